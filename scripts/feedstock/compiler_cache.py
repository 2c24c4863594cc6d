"""The compiler cache of local and CFEP-03 builds: a local dir, a remote store, or both.

sccache (the launcher recipe/build.sh sets) does the caching; this module only turns the
maintainer's options into one typed value and into the sccache config file the build reads
(``SCCACHE_CONF``). Options follow sccache's and the AWS CLI's names:

* ``--compiler-cache DIR`` (default ``build_artifacts/compiler-cache``): sccache's local dir;
* ``--compiler-cache s3://BUCKET[/PREFIX]`` with ``--compiler-cache-endpoint URL`` and
  ``--compiler-cache-region R`` for any S3-compatible store (AWS, R2, MinIO, SeaweedFS, Ceph);
* ``--compiler-cache redis://HOST[:PORT][/DB]`` (``rediss://`` for TLS);
* ``--compiler-cache-levels disk,s3`` puts the local dir in front (sccache's multi-level chain);
* ``--compiler-cache-read-only``: hits only, nothing written (the server must enforce it too);
* ``--compiler-cache-config FILE``: a whole sccache config (may hold a Redis password) used as is;
* ``--aws-credentials FILE``: an AWS shared-credentials file for the S3 store.

Credentials never travel as values: not in a URL (refused), an option or an environment
variable. They stay in the two files above, which the build sees read-only by path. The
generated config holds no secret (bucket, endpoint, prefix, mode).

The key prefix is versioned per feedstock (``pytorch-feedstock/v1`` by default): bump the
version to start from an empty cache.

Standard library only (build-locally reads it before anything else); reading a
``--compiler-cache-config`` file needs Python 3.11 (tomllib).
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

from feedstock.errors import UsageError

DEFAULT_KEY_PREFIX = "pytorch-feedstock/v1"
REMOTE_SCHEMES = ("s3", "redis", "rediss")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


class CacheOptionError(UsageError):
    """A compiler-cache option that cannot work (reported as one line before anything runs)."""


@dataclass(frozen=True)
class S3Store:
    bucket: str
    key_prefix: str
    endpoint: str | None = None  # scheme://host[:port]; None: AWS's own endpoint
    region: str | None = None

    kind = "s3"

    @property
    def use_ssl(self) -> bool:
        return self.endpoint is None or self.endpoint.startswith("https://")

    def describe(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        region = f" ({self.region})" if self.region else ""
        return f"s3 bucket {self.bucket}{where}{region}, prefix {self.key_prefix}/"


@dataclass(frozen=True)
class RedisStore:
    endpoint: str  # redis://host:port or rediss://host:port, never with credentials
    key_prefix: str
    db: int | None = None

    kind = "redis"

    def describe(self) -> str:
        db = f" db {self.db}" if self.db is not None else ""
        return f"redis {self.endpoint}{db}, prefix {self.key_prefix}/"


Store = Union[S3Store, RedisStore]


@dataclass(frozen=True)
class CompilerCache:
    """One resolved compiler cache: what every config of a run shares."""

    local_dir: Path | None  # sccache's dir on this machine (the disk level)
    remote: Store | None
    read_only: bool = False
    config_file: Path | None = None  # the user's sccache config, used instead of a generated one
    aws_credentials: Path | None = None

    @property
    def levels(self) -> tuple[str, ...]:
        return (("disk",) if self.local_dir else ()) + ((self.remote.kind,) if self.remote else ())

    @property
    def needs_config(self) -> bool:
        """Whether the build reads an sccache config file (only a local dir needs none)."""
        return self.remote is not None

    def describe(self) -> str:
        parts = []
        if self.local_dir:
            parts.append(f"local dir {self.local_dir}")
        if self.remote:
            parts.append(self.remote.describe())
        mode = ", READ-ONLY" if self.read_only else ""
        source = f" (from {self.config_file})" if self.config_file else ""
        return " then ".join(parts) + mode + source


# ------------------------------------------------------------------------------------------ parsing


def _refuse_credentials(url: str, what: str) -> None:
    split = urlsplit(url)
    if split.username is not None or split.password is not None or "@" in split.netloc:
        raise CacheOptionError(
            f"{what} {split.scheme}://***@{split.hostname or ''}...: credentials in a URL end up in logs "
            "and argv; put them in --compiler-cache-config FILE or --aws-credentials FILE"
        )
    if split.query or split.fragment:
        raise CacheOptionError(f"{what} {url!r}: no query or fragment allowed")


def _key_prefix(text: str, option: str) -> str:
    prefix = text.strip("/")
    if not _PREFIX_RE.match(prefix) or "//" in prefix or ".." in prefix.split("/"):
        raise CacheOptionError(f"{option} {text!r} is not a key prefix like {DEFAULT_KEY_PREFIX}")
    return prefix


def parse_endpoint(text: str) -> str:
    """An S3 endpoint as sccache signs it: scheme and host, a port only where it is not the default."""
    _refuse_credentials(text, "--compiler-cache-endpoint")
    split = urlsplit(text)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise CacheOptionError(
            f"--compiler-cache-endpoint {text!r}: give http://HOST[:PORT] or https://HOST[:PORT]"
        )
    if split.path not in ("", "/"):
        raise CacheOptionError(
            f"--compiler-cache-endpoint {text!r}: no path (the bucket and prefix go in --compiler-cache)"
        )
    default = {"http": 80, "https": 443}[split.scheme]
    if split.port == default:
        # sccache#2104: the signed Host header then differs from the one sent: every request 403s
        raise CacheOptionError(
            f"--compiler-cache-endpoint {text!r}: drop the default port :{default} (S3 refuses the signature)"
        )
    return f"{split.scheme}://{split.netloc}"


def parse_remote(url: str, *, endpoint: str | None, region: str | None, key_prefix: str | None) -> Store:
    """``s3://bucket[/prefix]`` or ``redis[s]://host[:port][/db]`` as a store."""
    _refuse_credentials(url, "--compiler-cache")
    split = urlsplit(url)
    if split.scheme == "s3":
        if not split.hostname:
            raise CacheOptionError(f"--compiler-cache {url!r}: s3://BUCKET[/PREFIX] names no bucket")
        in_url = split.path.strip("/")
        if in_url and key_prefix:
            raise CacheOptionError(
                f"--compiler-cache {url!r} has a key prefix: drop --compiler-cache-key-prefix "
                "or the URL's path"
            )
        prefix = _key_prefix(in_url or key_prefix or DEFAULT_KEY_PREFIX, "key prefix")
        return S3Store(
            bucket=split.netloc,
            key_prefix=prefix,
            endpoint=parse_endpoint(endpoint) if endpoint else None,
            region=region or None,
        )
    if endpoint or region:
        raise CacheOptionError("--compiler-cache-endpoint and --compiler-cache-region are for s3:// caches")
    if not split.hostname:
        raise CacheOptionError(f"--compiler-cache {url!r}: redis://HOST[:PORT][/DB] names no host")
    db: int | None = None
    if split.path.strip("/"):
        try:
            db = int(split.path.strip("/"))
        except ValueError:
            raise CacheOptionError(
                f"--compiler-cache {url!r}: the path of a Redis URL is a db number"
            ) from None
    prefix = _key_prefix(key_prefix or DEFAULT_KEY_PREFIX, "--compiler-cache-key-prefix")
    return RedisStore(endpoint=f"{split.scheme}://{split.netloc}", key_prefix=prefix, db=db)


def is_remote(location: str) -> bool:
    return urlsplit(location).scheme in REMOTE_SCHEMES


def _readable_file(path: str, option: str, feedstock_root: Path) -> Path:
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file() or not os.access(resolved, os.R_OK):
        raise CacheOptionError(f"{option} {path}: not a readable file")
    if resolved.is_relative_to(feedstock_root.resolve()):
        raise CacheOptionError(
            f"{option} {path}: keep credentials outside the feedstock checkout "
            "(it is mounted into the build, and recipe/ goes into every package)"
        )
    if any(c.isspace() for c in str(resolved)):
        raise CacheOptionError(f"{option} {resolved} contains whitespace: docker's -v cannot mount it")
    return resolved


def _levels(text: str | None, remote_kind: str | None) -> bool:
    """Whether ``--compiler-cache-levels`` puts the local dir in front of the remote."""
    if text is None:
        return False
    levels = tuple(level.strip() for level in text.split(",") if level.strip())
    if remote_kind is None or levels != ("disk", remote_kind):
        want = f"disk,{remote_kind}" if remote_kind else "disk,s3 or disk,redis"
        raise CacheOptionError(
            f"--compiler-cache-levels {text!r}: the one chain supported here is {want} "
            "(the local dir, then the remote cache)"
        )
    return True


@dataclass(frozen=True)
class CacheArgs:
    """The compiler-cache options as the command line gave them (build-locally.py, build_all.py)."""

    location: str | None = None  # DIR or URL; None: the default local dir
    off: bool = False
    local_dir: str | None = None  # --compiler-cache-dir
    endpoint: str | None = None
    region: str | None = None
    key_prefix: str | None = None
    levels: str | None = None
    read_only: bool = False
    config_file: str | None = None
    aws_credentials: str | None = None

    def remote_options_given(self) -> list[str]:
        given = {
            "--compiler-cache-endpoint": self.endpoint,
            "--compiler-cache-region": self.region,
            "--compiler-cache-key-prefix": self.key_prefix,
            "--compiler-cache-levels": self.levels,
            "--compiler-cache-read-only": self.read_only or None,
            "--compiler-cache-config": self.config_file,
            "--aws-credentials": self.aws_credentials,
        }
        return [name for name, value in given.items() if value]


def resolve(args: CacheArgs, default_dir: Path, feedstock_root: Path) -> CompilerCache | None:
    """The one compiler cache these options describe, or None for ``--no-compiler-cache``."""
    if args.off:
        return None
    remote_url = args.location if args.location and is_remote(args.location) else None
    if args.location and not remote_url and "://" in args.location:
        raise CacheOptionError(
            f"--compiler-cache {args.location!r}: a directory, s3://BUCKET[/PREFIX] or redis[s]://HOST[:PORT]"
        )
    if args.config_file:
        return _from_config_file(args, default_dir, feedstock_root)
    if remote_url is None:
        stray = args.remote_options_given()
        if stray:
            raise CacheOptionError(
                f"{stray[0]} needs a remote cache: --compiler-cache s3://... or redis://..."
            )
        return CompilerCache(local_dir=Path(os.path.abspath(args.location or default_dir)), remote=None)
    remote = parse_remote(remote_url, endpoint=args.endpoint, region=args.region, key_prefix=args.key_prefix)
    with_disk = _levels(args.levels, remote.kind)
    if args.local_dir and not with_disk:
        raise CacheOptionError(
            "--compiler-cache-dir is the first level: add --compiler-cache-levels disk,..."
        )
    credentials = None
    if args.aws_credentials:
        if remote.kind != "s3":
            raise CacheOptionError(
                "--aws-credentials is for s3:// caches (Redis: --compiler-cache-config FILE)"
            )
        credentials = _readable_file(args.aws_credentials, "--aws-credentials", feedstock_root)
    local = Path(os.path.abspath(args.local_dir or default_dir)) if with_disk else None
    return CompilerCache(local, remote, read_only=args.read_only, aws_credentials=credentials)


def _from_config_file(args: CacheArgs, default_dir: Path, feedstock_root: Path) -> CompilerCache:
    clashing = [
        name
        for name, value in (
            ("--compiler-cache URL", args.location if args.location and is_remote(args.location) else None),
            ("--compiler-cache-endpoint", args.endpoint),
            ("--compiler-cache-region", args.region),
            ("--compiler-cache-key-prefix", args.key_prefix),
            ("--compiler-cache-levels", args.levels),
        )
        if value
    ]
    if clashing:
        raise CacheOptionError(
            f"--compiler-cache-config describes the whole cache: drop {clashing[0]} (set it in the file)"
        )
    path = _readable_file(args.config_file or "", "--compiler-cache-config", feedstock_root)
    remote, read_only, with_disk = read_config_file(path)
    if args.read_only and not read_only:
        raise CacheOptionError(f'--compiler-cache-read-only: set rw_mode = "READ_ONLY" in {path}')
    credentials = None
    if args.aws_credentials:
        credentials = _readable_file(args.aws_credentials, "--aws-credentials", feedstock_root)
    local = None
    if with_disk:
        local = Path(os.path.abspath(args.local_dir or (args.location if args.location else default_dir)))
    return CompilerCache(local, remote, read_only=read_only, config_file=path, aws_credentials=credentials)


def read_config_file(path: Path) -> tuple[Store, bool, bool]:
    """(the remote store, read-only?, local dir first?) of a user's sccache config file.

    Refuses what would leak or not share: credentials in a URL, no remote, no key prefix."""
    try:
        tomllib = importlib.import_module("tomllib")
    except ImportError:
        raise CacheOptionError("--compiler-cache-config needs Python 3.11 or later (tomllib)") from None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CacheOptionError(f"--compiler-cache-config {path}: not an sccache TOML file ({exc})") from None
    cache = data.get("cache") if isinstance(data.get("cache"), dict) else {}
    remotes = [kind for kind in ("s3", "redis") if isinstance(cache.get(kind), dict)]
    if len(remotes) != 1:
        raise CacheOptionError(
            f"--compiler-cache-config {path}: needs exactly one of [cache.s3] or [cache.redis] "
            f"(found {', '.join(remotes) or 'none'})"
        )
    section: dict[str, Any] = cache[remotes[0]]
    for key in ("url", "endpoint"):
        if isinstance(section.get(key), str):
            _refuse_credentials(section[key], f"{path}: [cache.{remotes[0]}] {key}")
    if not section.get("key_prefix"):
        raise CacheOptionError(
            f"--compiler-cache-config {path}: set key_prefix in [cache.{remotes[0]}] "
            f"(e.g. {DEFAULT_KEY_PREFIX})"
        )
    prefix = _key_prefix(str(section["key_prefix"]), "key_prefix")
    store: Store
    if remotes[0] == "s3":
        store = S3Store(
            str(section.get("bucket", "")), prefix, section.get("endpoint"), section.get("region")
        )
    else:
        endpoint = str(section.get("endpoint") or section.get("url") or "")
        store = RedisStore(endpoint, prefix, section.get("db"))
    chain = cache.get("multilevel", {}).get("chain", []) if isinstance(cache.get("multilevel"), dict) else []
    return store, section.get("rw_mode") == "READ_ONLY", "disk" in chain


# ------------------------------------------------------------------------------------------ config file


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sccache_config(cache: CompilerCache, local_dir: str | None) -> str:
    """The sccache config (TOML) for ``cache``; ``local_dir``: the disk level's path as the build sees it.

    Holds no credential: S3 keys come from the AWS credentials file, and a Redis password only
    ever from the user's own ``--compiler-cache-config``."""
    if cache.remote is None:
        raise ValueError("a local-only cache needs no sccache config")
    lines = ["# written by build-locally.py (scripts/feedstock/compiler_cache.py); holds no credential"]
    if cache.local_dir is not None and local_dir is not None:
        lines += ["[cache.multilevel]", f"chain = {_toml_value(list(cache.levels))}", ""]
        lines += ["[cache.disk]", f"dir = {_toml_value(local_dir)}", ""]
    remote = cache.remote
    section: dict[str, object]
    if isinstance(remote, S3Store):
        section = {"bucket": remote.bucket, "key_prefix": remote.key_prefix, "use_ssl": remote.use_ssl}
        section["no_credentials"] = False
        if remote.endpoint:
            section["endpoint"] = remote.endpoint
        if remote.region:
            section["region"] = remote.region
    else:
        section = {"endpoint": remote.endpoint, "key_prefix": remote.key_prefix}
        if remote.db is not None:
            section["db"] = remote.db
    section["rw_mode"] = "READ_ONLY" if cache.read_only else "READ_WRITE"
    lines.append(f"[cache.{remote.kind}]")
    lines += [f"{key} = {_toml_value(value)}" for key, value in section.items()]
    return "\n".join(lines) + "\n"


def write_config(text: str, path: Path) -> Path:
    """Write the generated config whole (a crash leaves the old file or none, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


# ------------------------------------------------------------------------------------------ command line

# (flag, CacheArgs field, metavar, help)
_VALUE_OPTIONS = (
    ("--compiler-cache-dir", "local_dir", "DIR",
     "the local dir when it is the first level (default: %(default_dir)s)"),
    ("--compiler-cache-endpoint", "endpoint", "URL",
     "S3-compatible endpoint, e.g. https://ACCOUNT.r2.cloudflarestorage.com"),
    ("--compiler-cache-region", "region", "REGION", "S3 region (R2: auto; default: sccache's us-east-1)"),
    ("--compiler-cache-key-prefix", "key_prefix", "PREFIX",
     f"key prefix (default {DEFAULT_KEY_PREFIX}; bump v1 to v2 to invalidate)"),
    ("--compiler-cache-levels", "levels", "disk,REMOTE",
     "the local dir in front of the remote: disk,s3 or disk,redis"),
    ("--compiler-cache-config", "config_file", "FILE",
     "a whole sccache config file (may hold a Redis password), mounted read-only"),
    ("--aws-credentials", "aws_credentials", "FILE",
     "AWS shared-credentials file for s3:// ([default] profile), mounted read-only"),
)  # fmt: skip


def add_arguments(parser: Any, default_dir: str) -> None:
    """The compiler-cache options of build-locally.py and build_all.py (an argparse parser)."""
    group = parser.add_argument_group(
        "compiler cache", "sccache for every config; a remote store shares it between machines"
    )
    choice = group.add_mutually_exclusive_group()
    choice.add_argument(
        "--compiler-cache",
        metavar="DIR|URL",
        help=f"sccache's local dir (default: {default_dir}), s3://BUCKET[/PREFIX] or redis[s]://HOST[:PORT][/DB]",
    )
    choice.add_argument(
        "--no-compiler-cache", action="store_true", help="build without a compiler cache (as CI does)"
    )
    for flag, dest, metavar, text in _VALUE_OPTIONS:
        group.add_argument(
            flag, dest=f"cache_{dest}", metavar=metavar, help=text % {"default_dir": default_dir}
        )
    group.add_argument(
        "--compiler-cache-read-only",
        dest="cache_read_only",
        action="store_true",
        help="use hits, store nothing (for unreviewed commits; enforce it on the server too)",
    )


def args_from(ns: Any) -> CacheArgs:
    """The options ``add_arguments`` defined, out of a parsed namespace."""
    values = {dest: getattr(ns, f"cache_{dest}") for _, dest, _, _ in _VALUE_OPTIONS}
    return CacheArgs(
        location=ns.compiler_cache, off=ns.no_compiler_cache, read_only=ns.cache_read_only, **values
    )


def to_argv(args: CacheArgs) -> list[str]:
    """The same options again, for a build-locally.py run (paths made absolute: it runs elsewhere)."""
    if args.off:
        return ["--no-compiler-cache"]
    argv: list[str] = []
    if args.location:
        location = (
            args.location if is_remote(args.location) else str(Path(args.location).expanduser().resolve())
        )
        argv += ["--compiler-cache", location]
    for flag, dest, _, _ in _VALUE_OPTIONS:
        value = getattr(args, dest)
        if value:
            is_path = dest in ("local_dir", "config_file", "aws_credentials")
            argv += [flag, str(Path(value).expanduser().resolve()) if is_path else value]
    if args.read_only:
        argv.append("--compiler-cache-read-only")
    return argv
