"""A lossless model of ``CMakeCache.txt``.

The file is kept as its original lines (text plus line ending), so rendering
an unmodified cache gives back the input byte for byte: comments, blank
lines, ordering, CRLF endings, ``-ADVANCED`` and INTERNAL entries. Entry
lines additionally get a typed view (:class:`Entry`: key, type, value).
Edits replace only the value part of one line, or insert/remove whole
entries, and leave every other byte alone.

Syntax accepted (the same as CMake's ``cmCacheManager::LoadCache``):
``KEY:TYPE=VALUE`` or ``"KEY":TYPE=VALUE`` (quoted keys may contain ``:``
and ``=``); a value may contain ``=``, ``;`` and anything else but a line
break, may be empty, and is wrapped in single quotes by CMake when it has
leading or trailing blanks. Lines starting with ``#`` or ``//`` are comments.
The file is decoded as UTF-8 with ``surrogateescape`` so that any byte
survives a round trip; NUL bytes, unparseable lines and a missing final
newline (a truncated file) are errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from megabuild.errors import MegabuildError

# Types CMake writes. UNINITIALIZED comes from -D without a type.
KNOWN_TYPES = frozenset({"BOOL", "PATH", "FILEPATH", "STRING", "INTERNAL", "STATIC", "UNINITIALIZED"})

_ENTRY = re.compile(r'(?P<head>(?:"(?P<qkey>[^"]*)"|(?P<key>[^=:"]*)):(?P<type>[^=]*)=)(?P<value>.*)', re.S)


class CacheFormatError(MegabuildError):
    """The input is not a CMake cache file."""


class Entry(NamedTuple):
    """Typed view of one cache entry line."""

    key: str
    type: str
    value: str
    line: int  # index into CacheFile.lines


@dataclass
class Line:
    text: str  # without the line ending
    eol: str  # "\n" or "\r\n"
    parsed: tuple[str, str, str] | None = None  # (key, type, value) of an entry line, kept in sync


def _unquote_value(raw: str) -> str:
    # CMake strips trailing blanks/CR of the value part, then one level of '...'.
    value = raw.rstrip(" \t\r")
    if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
        value = value[1:-1]
    return value


def _quote_value(value: str) -> str:
    if value and (value[0] in " \t" or value[-1] in " \t\r" or (value[0] == "'" and value[-1] == "'")):
        return f"'{value}'"
    return value


def _parse_entry_text(text: str) -> tuple[str, str, str] | None:
    stripped = text.lstrip(" \t")
    match = _ENTRY.fullmatch(stripped)
    if not match:
        return None
    key = match.group("qkey") if match.group("qkey") is not None else match.group("key")
    return key, match.group("type"), _unquote_value(match.group("value"))


def format_key(key: str) -> str:
    """How CMake writes a key: quoted when it contains ``:`` or starts with ``//``."""
    if '"' in key or "\n" in key or "\r" in key:
        raise MegabuildError(f"invalid cache key {key!r}")
    if ":" in key or "=" in key or key.startswith("//") or key.startswith("#"):
        return f'"{key}"'
    return key


class CacheFile:
    """Lines of a cache file plus an index of its entries."""

    def __init__(self, lines: list[Line], source: str = "<cache>") -> None:
        self.lines = lines
        self.source = source
        self._index: dict[str, int] | None = None

    # ----------------------------------------------------------------- parsing
    @classmethod
    def parse_bytes(cls, data: bytes, source: str = "<cache>") -> CacheFile:
        if b"\0" in data:
            raise CacheFormatError(f"{source}: contains NUL bytes; not a CMake cache (binary file?)")
        return cls.parse(data.decode("utf-8", "surrogateescape"), source)

    @classmethod
    def parse(cls, text: str, source: str = "<cache>") -> CacheFile:
        if text and not text.endswith("\n"):
            raise CacheFormatError(f"{source}: does not end with a newline (truncated file?)")
        lines: list[Line] = []
        for number, raw in enumerate(text.split("\n")[:-1] if text else [], start=1):
            line = Line(raw[:-1], "\r\n") if raw.endswith("\r") else Line(raw, "\n")
            body = line.text.strip(" \t")
            if "\r" in line.text:
                raise CacheFormatError(f"{source}:{number}: stray carriage return inside a line")
            is_comment = not body or body.startswith("#") or body.startswith("//")
            if not is_comment:
                line.parsed = _parse_entry_text(line.text)
                if line.parsed is None:
                    shown = line.text if len(line.text) <= 60 else line.text[:57] + "..."
                    raise CacheFormatError(f"{source}:{number}: not a cache entry: {shown!r}")
            lines.append(line)
        return cls(lines, source)

    def render(self) -> str:
        return "".join(line.text + line.eol for line in self.lines)

    def to_bytes(self) -> bytes:
        return self.render().encode("utf-8", "surrogateescape")

    # ------------------------------------------------------------------ access
    def _entry_at(self, index: int) -> Entry | None:
        parsed = self.lines[index].parsed
        if parsed is None:
            return None
        return Entry(parsed[0], parsed[1], parsed[2], index)

    def entries(self) -> Iterator[Entry]:
        for index, line in enumerate(self.lines):
            if line.parsed is not None:
                yield Entry(line.parsed[0], line.parsed[1], line.parsed[2], index)

    def _build_index(self) -> dict[str, int]:
        if self._index is None:
            # CMake keeps the last definition of a duplicated key.
            self._index = {entry.key: entry.line for entry in self.entries()}
        return self._index

    def keys(self) -> list[str]:
        return list(self._build_index())

    def get(self, key: str) -> Entry | None:
        index = self._build_index().get(key)
        return None if index is None else self._entry_at(index)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._build_index()

    def as_dict(self) -> dict[str, Entry]:
        return {
            entry.key: entry for entry in (self._entry_at(i) for i in self._build_index().values()) if entry
        }

    @property
    def uses_crlf(self) -> bool:
        return any(line.eol == "\r\n" for line in self.lines)

    # ----------------------------------------------------------------- editing
    def set_value(self, key: str, value: str) -> None:
        """Replace the value of an existing entry, keeping its key spelling and type."""
        if "\n" in value or "\r" in value:
            raise MegabuildError(f"value for {key} contains a line break")
        index = self._build_index().get(key)
        if index is None:
            raise MegabuildError(f"no cache entry {key}")
        line = self.lines[index]
        indent = line.text[: len(line.text) - len(line.text.lstrip(" \t"))]
        match = _ENTRY.fullmatch(line.text.lstrip(" \t"))
        assert match is not None
        line.text = indent + match.group("head") + _quote_value(value)
        line.parsed = _parse_entry_text(line.text)

    def add(self, key: str, type_: str, value: str, help_text: str = "") -> None:
        """Append a new entry (with a ``//`` help line) before the INTERNAL section."""
        if key in self:
            raise MegabuildError(f"cache entry {key} already exists")
        if "\n" in value or "\r" in value or "\n" in type_ or "=" in type_:
            raise MegabuildError(f"invalid value or type for {key}")
        eol = "\r\n" if self.uses_crlf else "\n"
        entry_text = f"{format_key(key)}:{type_}={_quote_value(value)}"
        new = [
            Line(f"//{help_text}", eol),
            Line(entry_text, eol, _parse_entry_text(entry_text)),
            Line("", eol),
        ]
        position = len(self.lines)
        for index, line in enumerate(self.lines):
            nxt = self.lines[index + 1].text if index + 1 < len(self.lines) else ""
            if line.text.startswith("####") and nxt.startswith("# INTERNAL cache entries"):
                position = index
                break
        self.lines[position:position] = new
        self._index = None

    def remove(self, key: str) -> bool:
        """Remove an entry with its ``//`` help lines; True if it existed."""
        index = self._build_index().get(key)
        if index is None:
            return False
        start = index
        while start > 0 and self.lines[start - 1].text.lstrip(" \t").startswith("//"):
            start -= 1
        end = index + 1
        blank_after = end < len(self.lines) and not self.lines[end].text.strip()
        if blank_after and start > 0 and not self.lines[start - 1].text.strip():
            end += 1  # drop one of the two blank lines that surrounded it
        del self.lines[start:end]
        self._index = None
        return True
