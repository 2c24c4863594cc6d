"""Build and host prefix strings left in a file (binary or text), and what each one is.

conda-build builds in ``<croot>/<name>_<timestamp>/`` (``conda-bld`` locally,
``/home/conda/feedstock_root/build_artifacts`` on conda-forge's CI) with the host prefix
``_h_env_placehold_placehold...``, the build prefix ``_build_env`` and the sources in ``work``. In
an installed package the host placeholder is gone wherever conda's prefix replacement handled it
(the files of ``info/has_prefix``), so any of these strings left is a path that points nowhere on
the user's machine. Extra literal strings (the build's ``SRC_DIR``) can be added.

Three kinds of build path in a compiled file are records of the build, not paths the library
uses, and every conda-forge build carries them: the source file names ``__FILE__`` puts into error
messages (a whole C string naming a source file under the build's ``work`` dir), the compiler the
build settings record (``torch.__config__.show()``'s ``CXX_COMPILER``: a compiler under
``_build_env/bin``), and the compiler flags they record (``CXX_FLAGS``: ``CMAKE_CXX_FLAGS``, which
holds the activation's ``CXXFLAGS`` with ``-fdebug-prefix-map=$SRC_DIR=...`` and ``-isystem
$PREFIX/include``; a build path counts only in the path of such an option). A setting is alone in
its C string as PyTorch's ``CAFFE2_BUILD_STRINGS`` map holds it next to its key (``CXX_COMPILER``,
``CXX_FLAGS``), or written ``<key>=<value>``; in a text file only as that map's entry
``{"CXX_COMPILER", R"PYT(<path>)PYT"}`` (or a plain string), which the installed
``caffe2/core/macros.h`` holds. They are counted apart (:data:`SOURCE`, :data:`COMPILER`,
:data:`FLAGS`) so that an explanation can name them; everything else is :data:`PATH`: any other
build path in a binary, and in a text file a consumer reads (``set(CMAKE_CXX_COMPILER ...)`` in a
CMake config, a ``.pc`` file, a script's shebang). The loader's strings (RUNPATH, NEEDED,
LC_RPATH) are directories and library names, never one of the three; the runpath check reads them
on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megabuild.binaries.buffer import Buffer

# anchor (found with the buffer's fast find) -> the whole match, which must hold the anchor
PATTERNS: dict[bytes, re.Pattern[bytes]] = {
    b"_h_env_placehold": re.compile(rb"[/\\]_h_env_placehold"),
    b"_build_env": re.compile(rb"[/\\]_build_env(?![A-Za-z0-9_])"),
    # the work dir of a build: <croot>/<package>_<timestamp in ms>/work
    b"work": re.compile(rb"[/\\][A-Za-z0-9_.+-]+_[0-9]{10,}[/\\]+work(?![A-Za-z0-9_])"),
}
_CONTEXT = 100  # bytes either side of a hit shown in the finding
_LONGEST = 4096  # the longest C string a hit is classified in

PATH, SOURCE, COMPILER, FLAGS = "path", "source", "compiler", "flags"
_ROOT = rb"(?:[A-Za-z]:)?[/\\](?:[^\0]*[/\\])?"
# __FILE__ of a source under the build's work dir: <croot>/<name>_<ms>/work/<relative>.<ext>
# a source file's name: the compilers' C/C++/CUDA/Objective-C++ sources, and the PeachPy scripts
# whose names NNPACK's generated x86-64 kernels record as their source
_SOURCE_NAME = rb"[^\0\"'\s]+\.(?:c|cc|cpp|cxx|h|hh|hpp|cu|cuh|mm|py)"
_SOURCE = re.compile(_ROOT + rb"[A-Za-z0-9_.+-]+_[0-9]{10,}[/\\]work[/\\]" + _SOURCE_NAME)
# the same inside a longer string: TORCH_INTERNAL_ASSERT and friends concatenate __FILE__ into the
# message (``INTERNAL ASSERT FAILED at "<path>":23, please report a bug to PyTorch.``), and the
# linker can place a string right after an unterminated char array; the name ends the string or is
# followed by the quote or the ``:<line>`` of the message
_SOURCE_INSIDE = re.compile(
    rb"[/\\][A-Za-z0-9_.+-]+_[0-9]{10,}[/\\]work[/\\]" + _SOURCE_NAME + rb"(?=[\"':]|$)"
)
_COMPILER_PATH = (
    _ROOT + rb"_build_env[/\\]bin[/\\][A-Za-z0-9_.+-]*(?:c\+\+|g\+\+|gcc|clang\+\+|clang|cc|nvcc)"
    rb"(?:-[0-9.]+)?(?:\.exe)?"
)
_COMPILER_KEY = rb"(?:CMAKE_)?(?:CXX|C|CUDA)_COMPILER"
_COMPILER_SETTING = re.compile(_COMPILER_KEY + rb"=" + _COMPILER_PATH)
_COMPILER_VALUE = re.compile(_COMPILER_PATH)
_FLAGS_KEY = rb"(?:CMAKE_)?(?:CXX|CUDA)_FLAGS"
_FLAGS_SETTING = re.compile(_FLAGS_KEY + rb"=")
# a compiler's options: each token an option or the one argument that follows an option
_FLAGS_LIST = re.compile(rb"\s*-\S+(?:\s+[^\s-]\S*)?(?:\s+-\S+(?:\s+[^\s-]\S*)?)*\s*")
_TOKEN = re.compile(rb"\S+")
# the options whose argument is a path (joined, or the next token for the separate ones)
_PATH_OPTIONS = (b"-fdebug-prefix-map=", b"-ffile-prefix-map=", b"-fmacro-prefix-map=", b"--sysroot=")
_SEPARATE_PATH_OPTIONS = (b"-isystem", b"-idirafter", b"-iquote", b"-I", b"--sysroot")


def _entry(key: bytes, value: bytes) -> re.Pattern[bytes]:
    """An entry of a header's build-strings map (caffe2/core/macros.h) with its value as group 1
    (a plain string) or 2 (upstream's raw string ``R"PYT(...)PYT"``)."""
    raw = value.replace(rb'[^"]', rb".")
    return re.compile(
        rb'\{\s*"' + key + rb'"\s*,\s*(?:"(' + value + rb')"|R"PYT\((' + raw + rb')\)PYT")\s*\}'
    )


_COMPILER_ENTRY = _entry(_COMPILER_KEY, _COMPILER_PATH)
_FLAGS_ENTRY = _entry(_FLAGS_KEY, rb'[^"]*?')
_COMPILER_KEYS = (b"\0CXX_COMPILER\0", b"\0CMAKE_CXX_COMPILER\0")
_FLAGS_KEYS = (b"\0CXX_FLAGS\0", b"\0CMAKE_CXX_FLAGS\0", b"\0CUDA_FLAGS\0")


@dataclass(frozen=True)
class Hit:
    count: int
    example: str


def _around(window: bytes, at: int) -> str:
    """The printable text of ``window`` around offset ``at``: up to 60 characters before it and 100
    from it on (a hit in a long string shows the part that holds it)."""
    lo = at
    while lo > max(0, at - 60) and 0x20 <= window[lo - 1] < 0x7F:
        lo -= 1
    hi = at
    while hi < min(len(window), at + 100) and 0x20 <= window[hi] < 0x7F:
        hi += 1
    return window[lo:hi].decode("ascii")


def _c_string(data: Buffer, at: int) -> tuple[bytes, int] | None:
    """The NUL-terminated run of printable bytes holding offset ``at`` and the offset in it, or None
    (not a C string)."""
    lo, hi = max(0, at - _LONGEST), min(len(data), at + _LONGEST)
    window = bytes(data[lo:hi])
    start = end = at - lo
    while start > 0 and 0x20 <= window[start - 1] < 0x7F:
        start -= 1
    while end < len(window) and 0x20 <= window[end] < 0x7F:
        end += 1
    return (window[start:end], at - lo - start) if end < len(window) and window[end] == 0 else None


def _in_flags(flags: bytes, at: int) -> bool:
    """Whether offset ``at`` of ``flags`` (a compiler's options) lies in an option that names a
    path: ``-fdebug-prefix-map=<old>=<new>``, ``-isystem <dir>``, ``-I<dir>``, ..."""
    if not _FLAGS_LIST.fullmatch(flags):
        return False
    tokens = [(m.start(), m.group()) for m in _TOKEN.finditer(flags)]
    for i, (start, token) in enumerate(tokens):
        if start <= at < start + len(token):
            if token.startswith(b"-"):
                return token.startswith(_PATH_OPTIONS + _SEPARATE_PATH_OPTIONS)
            return i > 0 and tokens[i - 1][1] in _SEPARATE_PATH_OPTIONS
    return False


def _text_kind(data: Buffer, at: int) -> str:
    """:data:`COMPILER` or :data:`FLAGS` for a hit in the value of a header's build-strings entry
    (``{"CXX_COMPILER", R"PYT(<path>)PYT"}``, ``{"CXX_FLAGS", R"PYT(<flags>)PYT"}``)."""
    lo, hi = max(0, at - _LONGEST), min(len(data), at + _LONGEST)
    window = bytes(data[lo:hi])
    start = window.rfind(b"\n", 0, at - lo) + 1
    end = window.find(b"\n", at - lo)
    line = window[start : end if end >= 0 else len(window)]
    hit = at - lo - start
    for kind, entry in ((COMPILER, _COMPILER_ENTRY), (FLAGS, _FLAGS_ENTRY)):
        for m in entry.finditer(line):
            group = 1 if m.start(1) >= 0 else 2
            value, offset = m.group(group), hit - m.start(group)
            if 0 <= offset < len(value) and (kind == COMPILER or _in_flags(value, offset)):
                return kind
    return PATH


def _kind(data: Buffer, at: int, binary: bool, keys: frozenset[str]) -> str:
    """The kind of the hit at ``at``; ``keys``: the settings whose key a binary holds (a value
    alone in its C string is that setting's only next to its key)."""
    if not binary:
        return _text_kind(data, at)
    found = _c_string(data, at)
    if found is None:
        return PATH
    text, hit = found
    if _SOURCE.fullmatch(text) or any(m.start() < hit < m.end() for m in _SOURCE_INSIDE.finditer(text)):
        return SOURCE
    if _COMPILER_SETTING.fullmatch(text) or (COMPILER in keys and _COMPILER_VALUE.fullmatch(text)):
        return COMPILER
    setting = _FLAGS_SETTING.match(text)
    if setting is not None and _in_flags(text[setting.end() :], hit - setting.end()):
        return FLAGS
    if setting is None and FLAGS in keys and _in_flags(text, hit):
        return FLAGS
    return PATH


def scan(data: Buffer, extra: tuple[bytes, ...] = (), binary: bool = False) -> dict[str, Hit]:
    """The build-prefix strings ``data`` holds by kind (:data:`PATH`, :data:`COMPILER`,
    :data:`FLAGS`, and in a ``binary`` also :data:`SOURCE`): how many, and one in its printable
    context."""
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    keys = frozenset(
        kind
        for kind, names in ((COMPILER, _COMPILER_KEYS), (FLAGS, _FLAGS_KEYS))
        if binary and any(data.find(key) >= 0 for key in names)
    )
    literals = {literal for literal in extra if literal}
    patterns = dict(PATTERNS)
    patterns.update({literal: re.compile(re.escape(literal)) for literal in literals})
    for anchor, pattern in patterns.items():
        at = data.find(anchor)
        while at >= 0:
            lo = max(0, at - _CONTEXT)
            window = bytes(data[lo : at + len(anchor) + _CONTEXT])
            hit = at - lo
            if any(m.start() <= hit < m.end() for m in pattern.finditer(window)):
                kind = PATH if anchor in literals else _kind(data, at, binary, keys)
                counts[kind] = counts.get(kind, 0) + 1
                examples.setdefault(kind, _around(window, at - lo))
            at = data.find(anchor, at + len(anchor))
    return {kind: Hit(count, examples[kind]) for kind, count in counts.items()}
