"""Byte-exact round trip and error handling of the CMakeCache parser (megabuild.cache.model)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from megabuild.cache.model import CacheFile, CacheFormatError
from megabuild.errors import MegabuildError
from support.paths import REAL_PYTORCH_CACHE

REAL = REAL_PYTORCH_CACHE

ADVERSARIAL = (
    "# This is the CMakeCache file.\n"
    "# For build in directory: /w/build\n"
    "\n"
    "########################\n"
    "# EXTERNAL cache entries\n"
    "########################\n"
    "\n"
    "//Help with = and ; and : inside\n"
    "CMAKE_CXX_FLAGS:STRING=-DA=1 -DB=2;x=y\n"
    "EMPTY:STRING=\n"
    '"KEY:WEIRD":STRING=quoted key with colon\n'
    '"K=EQ":BOOL=ON\n'
    "SPACED:STRING=' leading and trailing '\n"
    "CUDA_TOOLKIT_ROOT_DIR:PATH=/usr/local/cuda-13.12\n"
    "OTHER_PREFIX:PATH=/opt/tools-3.12.1/lib\n"
    "  INDENTED:BOOL=OFF\n"
    "UNICODE:STRING=caf\u00e9 \u2028 sep\n"
    "WEIRD_TYPE:FOO=bar\n"
    "\n"
    "########################\n"
    "# INTERNAL cache entries\n"
    "########################\n"
    "\n"
    "//ADVANCED property for variable: CMAKE_CXX_FLAGS\n"
    "CMAKE_CXX_FLAGS-ADVANCED:INTERNAL=1\n"
    "_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;11;7;64;;cpython-311-x86_64-linux-gnu;/p/lib/python3.11\n"
    "DUP:STRING=first\n"
    "DUP:STRING=second\n"
)


def test_real_pytorch_cache_round_trips() -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not present")
    data = REAL.read_bytes()
    cache = CacheFile.parse_bytes(data)
    assert cache.to_bytes() == data
    entries = cache.as_dict()
    assert len(entries) > 500
    assert entries["USE_MAGMA"].type == "BOOL" and entries["USE_MAGMA"].value == "OFF"
    assert entries["CMAKE_COMMAND"].type == "INTERNAL"
    assert "PYTHON_EXECUTABLE-ADVANCED" in entries
    crlf = data.replace(b"\n", b"\r\n")
    crlf_cache = CacheFile.parse_bytes(crlf)
    assert crlf_cache.to_bytes() == crlf
    assert crlf_cache.as_dict()["USE_MAGMA"].value == "OFF"


def test_adversarial_corpus_round_trips_and_views() -> None:
    for text in (ADVERSARIAL, ADVERSARIAL.replace("\n", "\r\n")):
        cache = CacheFile.parse(text)
        assert cache.render() == text
        d = cache.as_dict()
        assert d["CMAKE_CXX_FLAGS"].value == "-DA=1 -DB=2;x=y"
        assert d["EMPTY"].value == ""
        assert d["KEY:WEIRD"].value == "quoted key with colon"
        assert d["K=EQ"].type == "BOOL"
        assert d["SPACED"].value == " leading and trailing "
        assert d["INDENTED"].value == "OFF"
        assert d["UNICODE"].value == "caf\u00e9 \u2028 sep"
        assert d["DUP"].value == "second"  # CMake keeps the last one
        assert d["_Python_INTERPRETER_PROPERTIES"].value.startswith("Python;3;11;7")


def test_edits_touch_only_their_line() -> None:
    text = ADVERSARIAL.replace("\n", "\r\n")
    cache = CacheFile.parse(text)
    cache.set_value("KEY:WEIRD", "new = value; x")
    cache.set_value("SPACED", "  pad  ")
    out = cache.render()
    old_lines, new_lines = text.split("\r\n"), out.split("\r\n")
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert changed == [
        ('"KEY:WEIRD":STRING=quoted key with colon', '"KEY:WEIRD":STRING=new = value; x'),
        ("SPACED:STRING=' leading and trailing '", "SPACED:STRING='  pad  '"),
    ]
    again = CacheFile.parse(out).as_dict()
    assert again["KEY:WEIRD"].value == "new = value; x"
    assert again["SPACED"].value == "  pad  "


def test_add_and_remove_entries() -> None:
    cache = CacheFile.parse(ADVERSARIAL)
    cache.add("NEW:KEY", "BOOL", "ON", help_text="added")
    out = cache.render()
    assert '//added\n"NEW:KEY":BOOL=ON\n\n########################\n# INTERNAL' in out
    assert CacheFile.parse(out).as_dict()["NEW:KEY"].value == "ON"
    assert cache.remove("CMAKE_CXX_FLAGS")
    assert "Help with" not in cache.render()
    assert "CMAKE_CXX_FLAGS" not in cache
    assert not cache.remove("NOPE")
    with pytest.raises(MegabuildError):
        cache.set_value("X", "a\nb")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"FOO:BOOL=ON\nBAR:STRING=trunc", "does not end with a newline"),
        (b"FOO:BOOL=ON\nBAR:STRI\n", "not a cache entry"),
        (b"FOO:BOOL=ON\njust words\n", "not a cache entry"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00\n", "NUL bytes"),
        (b"FOO:BOOL=ON\r\r\n", "carriage return"),
        (b'"unterminated:STRING=x\n', "not a cache entry"),
    ],
)
def test_bad_input_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(CacheFormatError, match=message) as info:
        CacheFile.parse_bytes(data, "CMakeCache.txt")
    assert "\n" not in str(info.value)


_key = st.text(st.characters(blacklist_characters='\r\n"=:', blacklist_categories=("Cs",)), min_size=1)
_value = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))
_type = st.sampled_from(["BOOL", "STRING", "PATH", "FILEPATH", "INTERNAL", "STATIC", "UNINITIALIZED"])
_line = st.one_of(
    st.tuples(_key, _type, _value).map(lambda t: f"{t[0]}:{t[1]}={t[2]}"),
    st.tuples(_key, _type, _value).map(lambda t: f'"{t[0]}:x":{t[1]}={t[2]}'),
    _value.map(lambda v: "//" + v),
    _value.map(lambda v: "#" + v),
    st.just(""),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_line, max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_generated_caches_round_trip(lines: list[str], eol: str) -> None:
    text = "".join(line + eol for line in lines)
    cache = CacheFile.parse(text)
    assert cache.render() == text
    assert cache.to_bytes() == text.encode("utf-8", "surrogateescape")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_round_trip_or_fail_cleanly(data: bytes) -> None:
    try:
        cache = CacheFile.parse_bytes(data)
    except CacheFormatError as exc:
        assert "\n" not in str(exc)
        return
    assert cache.to_bytes() == data


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=len(ADVERSARIAL) - 1))
def test_truncation_never_parses_silently_wrong(cut: int) -> None:
    """A cut file either fails (no final newline) or is a prefix of whole lines that round-trips."""
    text = ADVERSARIAL[:cut]
    try:
        cache = CacheFile.parse(text)
    except CacheFormatError:
        assert not text.endswith("\n")
        return
    assert text.endswith("\n")
    assert cache.render() == text
