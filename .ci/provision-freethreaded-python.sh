#!/usr/bin/env bash
# Provision a real free-threaded CPython for the tests (tests/support/freethreaded.py finds it).
#
# Debian serves the CPython 3.13.5 source (trixie's `python3.13` source package); no CPython 3.14
# source is reachable from CI, and 3.13t has the same free-threaded layout with 313 for 314.
# Builds `./configure --disable-gil --enable-shared` into a cache dir only when it is missing
# (about 5 minutes on 2 cores), then prints the interpreter's path on stdout. Idempotent: a
# second run only prints the path. apt runs with a private source list and state dir, so the
# machine's apt configuration is neither read for sources nor changed.
set -euo pipefail

version=3.13.5
cache_root="${FEEDSTOCK_FREETHREADED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytorch-feedstock}"
prefix="$cache_root/cpython-${version}t"
interpreter="$prefix/bin/python3.13t"
stamp="$prefix/.provisioned"

if [[ -f "$stamp" && -x "$interpreter" ]]; then
    echo "$interpreter"
    exit 0
fi

log() { echo "provision-freethreaded-python: $*" >&2; }

mkdir -p "$cache_root"
work="$(mktemp -d "$cache_root/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$apt_dir/sources.list"
apt_opts=(
    -o "Dir::Etc::sourcelist=$apt_dir/sources.list"
    -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=$(id -un)"
    -o "Debug::NoLocking=1"
)

log "fetching Debian trixie's python3.13 source package"
apt-get "${apt_opts[@]}" -qq update >&2
# Only the upstream tarball is used: Debian's patches move site-packages to dist-packages.
(cd "$apt_dir/src" && apt-get "${apt_opts[@]}" -qq --download-only source python3.13 >&2)
orig="$(find "$apt_dir/src" -maxdepth 1 -name "python3.13_${version}.orig.tar.*" ! -name "*.asc" | head -n 1)"
if [[ -z "$orig" ]]; then
    log "trixie's python3.13 source package has no ${version} upstream tarball: $(ls "$apt_dir/src")"
    exit 1
fi
tar -xf "$orig" -C "$apt_dir/src"
src="$(find "$apt_dir/src" -maxdepth 1 -type d -name "Python-${version}*" | head -n 1)"
if [[ -z "$src" || ! -x "$src/configure" ]]; then
    log "no configure script in $(basename "$orig")"
    exit 1
fi
found="$(sed -n 's/^#define PY_VERSION[[:space:]]*"\(.*\)"/\1/p' "$src/Include/patchlevel.h")"
if [[ "$found" != "$version" ]]; then
    log "the tarball is CPython ${found:-of unknown version}, not $version"
    exit 1
fi
log "building CPython from $(basename "$src") (patchlevel.h: $found) into $prefix"

# A prefix without the stamp (an interrupted run) is not reused.
rm -rf "$prefix"
build="$work/build"
mkdir -p "$build"
(
    cd "$build"
    "$src/configure" --disable-gil --enable-shared --prefix="$prefix" \
        LDFLAGS="-Wl,-rpath,$prefix/lib" >"$work/configure.log" 2>&1 ||
        { tail -n 40 "$work/configure.log" >&2; exit 1; }
    nice make -j"${FEEDSTOCK_FREETHREADED_JOBS:-2}" >"$work/make.log" 2>&1 ||
        { tail -n 60 "$work/make.log" >&2; exit 1; }
    # installed beside the prefix and moved in whole: a reader never sees half an interpreter
    make install DESTDIR="$work/dest" >"$work/install.log" 2>&1 ||
        { tail -n 40 "$work/install.log" >&2; exit 1; }
)
mv "$work/dest$prefix" "$prefix"
"$interpreter" -c 'import sys; assert sys.abiflags == "t" and not sys._is_gil_enabled()'
echo "$found" >"$stamp"
echo "$interpreter"
