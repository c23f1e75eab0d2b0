"""Source positions for TOML documents: where every key and value is written.

tomli turns a spec into plain dicts and lists, which is what the rest of fusiongen wants, but it
forgets where anything came from. Diagnostics need `specs/x.toml:12:5`, so this module scans the
same text a second time and records, for every path into the parsed document, the position of its
key and of the start of its value, plus enough to map a character of a decoded string back to the
source. It also notices keys and tables that are defined twice, so a tomli failure caused by a
duplicate can be explained with both positions.

tomli stays the judge of what the document means. The scanner is only a position oracle: it must
agree with tomli on valid documents (including the TOML 1.1 additions tomli accepts: `\\e` and
`\\xHH` escapes, newlines and a trailing comma in inline tables), and on invalid ones it may be
lenient but never fails with anything other than `ScanError`.

Scanning is a single forward pass, linear in the length of the text. Positions are stored as
offsets and turned into line/column only when asked for (a binary search over line starts).
"""

from __future__ import annotations

import bisect
import copy
import enum
import sys
from dataclasses import dataclass
from typing import Final, NoReturn

__all__ = ["Duplicate", "Path", "ScanError", "SourceMap", "Span", "scan"]


@dataclass(frozen=True, order=True)
class Span:
    """A position in the source: 1-based line, and 1-based column counted in code points."""

    line: int
    col: int


Path = tuple[str | int, ...]
"""A path into the parsed document: table keys are `str`, array indices (of arrays and of
arrays of tables alike) are `int`."""


@dataclass(frozen=True)
class Duplicate:
    """A key or table defined twice; `first` and `second` are the key spans of both definitions."""

    path: tuple[str | int, ...]
    first: Span
    second: Span


class ScanError(Exception):
    """The scanner could not make sense of the text; `span` tells where it gave up."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(f"{span.line}:{span.col}: {message}" if span else message)
        self.message = message
        self.span = span


class _Fail(Exception):
    """Raised as `_Fail(offset, message)` while scanning; `scan` turns it into a `ScanError`."""


_BARE_KEY: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_WS: Final = frozenset(" \t")
_BLANK: Final = frozenset(" \t\r\n")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_CONTROL: Final = frozenset(chr(c) for c in range(32)) | {"\x7f"}
_SIMPLE_ESCAPES: Final = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "e": "\x1b", '"': '"', "\\": "\\"}
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}
# Numbers, booleans, inf/nan and dates/times only use these characters (plus one space between a
# date and a time); the scanner skips over them without interpreting them.
_SCALAR_START: Final = frozenset("0123456789+-tfin")
_SCALAR_CHARS: Final = _BARE_KEY | frozenset("+.:")
_DIGITS: Final = frozenset("0123456789")


def _line_starts(source: str) -> list[int]:
    """Offsets at which each line starts; only LF ends a line (CRLF ends in LF too)."""
    starts = [0]
    at = source.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = source.find("\n", at + 1)
    return starts


def _span(line_starts: list[int], offset: int) -> Span:
    line = bisect.bisect_right(line_starts, offset)
    return Span(line, offset - line_starts[line - 1] + 1)


def _read_string(src: str, start: int, offsets: list[int]) -> tuple[int, str]:
    """Scan the string literal whose opening quote is at `start`.

    Returns the offset just past the closing delimiter and the decoded text, and appends to
    `offsets` the source offset of each decoded character, so the two have the same length: an
    escape maps to its backslash, a CRLF inside a multi-line string (decoded as LF) to its CR. One
    routine serves keys, values and `SourceMap.string_char`, so they cannot disagree.
    """
    quote = src[start]
    multi = src.startswith(quote * 3, start)
    basic = quote == '"'
    i = start + (3 if multi else 1)
    if multi:  # a newline right after the opening delimiter is not part of the string
        i += 1 if src.startswith("\n", i) else 2 if src.startswith("\r\n", i) else 0
    chars: list[str] = []
    n = len(src)
    while i < n:
        c = src[i]
        if c == quote:
            if not multi:
                return i + 1, "".join(chars)
            run = 1
            while run < 5 and src.startswith(quote, i + run):
                run += 1
            # Up to two quotes may directly precede the closing delimiter: `""""a"""""` is `"a""`.
            kept = run - 3 if run >= 3 else run
            chars.extend(quote * kept)
            offsets.extend(range(i, i + kept))
            if run >= 3:
                return i + run, "".join(chars)
            i += run
        elif c == "\\" and basic:
            i = _read_escape(src, i, multi, chars, offsets)
        elif multi and c == "\r" and src.startswith("\r\n", i):
            chars.append("\n")
            offsets.append(i)
            i += 2
        elif c in _CONTROL and c != "\t" and not (multi and c == "\n"):
            raise _Fail(i, f"character {c!r} is not allowed in a string")
        else:
            chars.append(c)
            offsets.append(i)
            i += 1
    raise _Fail(start, "unterminated string")


def _read_escape(src: str, i: int, multi: bool, chars: list[str], offsets: list[int]) -> int:
    """Decode the escape sequence whose backslash is at `i`; return the offset after it."""
    code = src[i + 1 : i + 2]
    if code in _SIMPLE_ESCAPES:
        chars.append(_SIMPLE_ESCAPES[code])
        offsets.append(i)
        return i + 2
    width = _HEX_ESCAPES.get(code)
    if width is not None:
        digits = src[i + 2 : i + 2 + width]
        if len(digits) != width or not _HEX.issuperset(digits):
            raise _Fail(i, f"\\{code} needs {width} hex digits")
        point = int(digits, 16)
        if 0xD800 <= point <= 0xDFFF or point > 0x10FFFF:
            raise _Fail(i, "escape is not a Unicode scalar value")
        chars.append(chr(point))
        offsets.append(i)
        return i + 2 + width
    if multi:  # a backslash ending a line trims all whitespace and newlines after it
        j = i + 1
        while src[j : j + 1] in _WS:
            j += 1
        if src.startswith("\n", j) or src.startswith("\r\n", j):
            while src[j : j + 1] in _BLANK:
                j += 1
            return j
    raise _Fail(i, "invalid escape sequence")


class SourceMap:
    """Where each path of a parsed TOML document is written; built by `scan`, or by `deferred` on first use."""

    def __init__(self, source: str, positions: dict[Path, tuple[int, int]], strings: dict[Path, int]) -> None:
        """`positions` maps a path to the offsets of its key and value, `strings` to its opening quote."""
        self._source = source
        self._line_starts = _line_starts(source)
        self._keys = {path: key for path, (key, _) in positions.items()}
        self._values = {path: value for path, (_, value) in positions.items()}
        self._strings = strings
        self._decoded: dict[int, tuple[int, list[int]]] = {}  # string start → (end, offset of each char)
        self._scanned = True

    @classmethod
    def deferred(cls, source: str) -> SourceMap:
        """The map of `source`, scanned the first time a position is asked for: a spec that loads without a
        diagnostic never needs one (a large API's spec is 100,000 lines, and the scan is pure Python).
        `source` must be valid TOML (tomli read it): a scan that fails then is fusiongen's bug (RuntimeError)."""
        deferred = cls.__new__(cls)
        deferred._source = source
        deferred._scanned = False
        return deferred

    def _scan(self) -> None:
        try:
            scanned, _ = scan(self._source)
        except ScanError as exc:
            raise RuntimeError(f"position scanner failed on valid TOML: {exc}") from exc  # our bug, not the user's
        self.__dict__.update(scanned.__dict__)

    def _span(self, offset: int) -> Span:
        return _span(self._line_starts, offset)

    def key(self, path: Path) -> Span | None:
        """Where the key of `path` is written (for an array element: where the element starts)."""
        if not self._scanned:
            self._scan()
        offset = self._keys.get(path)
        return None if offset is None else self._span(offset)

    def value(self, path: Path) -> Span | None:
        """Where the value of `path` starts (for a table defined by a header: the header's `[`)."""
        if not self._scanned:
            self._scan()
        offset = self._values.get(path)
        return None if offset is None else self._span(offset)

    def nearest(self, path: Path) -> tuple[Span, Path]:
        """The key span of the longest known prefix of `path`, and that prefix.

        A diagnostic about a missing key points at the table that should hold it; the empty path
        (and a path none of whose prefixes is known) maps to 1:1.
        """
        if not self._scanned:
            self._scan()
        for n in range(len(path), 0, -1):
            offset = self._keys.get(path[:n])
            if offset is not None:
                return self._span(offset), path[:n]
        return Span(1, 1), ()

    def with_prefix(self, tables: tuple[str, ...], prefix: str) -> SourceMap:
        """This map with each entity of `tables` renamed `<prefix>.<name>`, as a mounted spec's entities are
        (docs/spec.md §3.2): a diagnostic about `("tools", "support.a")` then points where `a` is written."""

        def renamed(path: Path) -> Path:
            if len(path) >= 2 and path[0] in tables and isinstance(path[1], str):
                return (path[0], f"{prefix}.{path[1]}", *path[2:])
            return path

        if not self._scanned:
            self._scan()
        clone = copy.copy(self)
        clone._keys = {renamed(path): offset for path, offset in self._keys.items()}
        clone._values = {renamed(path): offset for path, offset in self._values.items()}
        clone._strings = {renamed(path): offset for path, offset in self._strings.items()}
        return clone

    def string_char(self, path: Path, index: int) -> Span | None:
        """Where character `index` of the decoded string at `path` comes from.

        An escape sequence maps to its backslash; `index == len(value)` maps to the closing
        delimiter. None when `path` is not a string or `index` is out of range.
        """
        if not self._scanned:
            self._scan()
        start = self._strings.get(path)
        if start is None or index < 0:
            return None
        decoded = self._decoded.get(start)
        if decoded is None:  # decoded once per string: many diagnostics in one string stay linear
            offsets: list[int] = []
            end, _ = _read_string(self._source, start, offsets)
            decoded = self._decoded[start] = (end, offsets)
        end, offsets = decoded
        if index < len(offsets):
            return self._span(offsets[index])
        if index == len(offsets):
            multi = self._source.startswith(self._source[start] * 3, start)
            return self._span(end - (3 if multi else 1))
        return None


class _Kind(enum.Enum):
    """How a path came to exist; decides which later definitions are duplicates."""

    VALUE = "value"  # `key = value`: final, and everything inside it too
    HEADER = "header"  # `[table]` (or one entry of an array of tables)
    IMPLICIT = "implicit"  # a prefix of a header: may still get its own `[header]` once
    DOTTED = "dotted"  # a prefix of a dotted key: may get more dotted keys, but no header
    ARRAY_OF_TABLES = "array of tables"  # `[[table]]`


@dataclass
class _Entry:
    kind: _Kind
    key: int
    value: int
    count: int = 0  # number of entries of an array of tables


class _Scanner:
    """One forward pass over the text; a `None` table path means "scan, but do not record".

    The contents of a duplicate definition are scanned in that mode so that syntax is still
    checked, while only the duplicate itself is reported and the first definition's positions stay.
    """

    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0
        self.entries: dict[Path, _Entry] = {}
        self.strings: dict[Path, int] = {}
        self.duplicates: list[tuple[Path, int, int]] = []

    def fail(self, message: str) -> NoReturn:
        raise _Fail(self.i, message)

    def peek(self) -> str:
        return self.src[self.i : self.i + 1]

    def skip_ws(self) -> None:
        while self.peek() in _WS:
            self.i += 1

    def skip_blank(self) -> None:
        """Skip whitespace, newlines and comments (between statements, inside arrays/inline tables)."""
        while True:
            c = self.peek()
            if c in _BLANK:
                self.i += 1
            elif c == "#":
                self.skip_comment()
            else:
                return

    def skip_comment(self) -> None:
        end = self.src.find("\n", self.i)
        self.i = len(self.src) if end == -1 else end

    def document(self) -> None:
        table: Path | None = ()
        while True:
            self.skip_blank()
            if self.i >= len(self.src):
                return
            if self.peek() == "[":
                table = self.header(array=self.src.startswith("[[", self.i))
            else:
                self.keyval(table)
            self.skip_ws()
            if self.peek() == "#":
                self.skip_comment()
            if self.src.startswith("\r\n", self.i):
                self.i += 1
            if self.i < len(self.src) and self.peek() != "\n":
                self.fail("expected the end of the line")

    def key(self) -> list[tuple[str, int]]:
        """A possibly dotted key: each segment's decoded name and offset."""
        parts: list[tuple[str, int]] = []
        while True:
            self.skip_ws()
            start, c = self.i, self.peek()
            if c in _BARE_KEY:
                while self.peek() in _BARE_KEY:
                    self.i += 1
                name = self.src[start : self.i]
            elif c in ('"', "'"):
                if self.src.startswith(c * 3, start):
                    self.fail("a key cannot be a multi-line string")
                self.i, name = _read_string(self.src, start, [])
            else:
                self.fail("expected a key")
            parts.append((name, start))
            if len(parts) > sys.getrecursionlimit():  # tomli's limit too; keeps path building linear
                self.fail("a key with too many parts")
            self.skip_ws()
            if self.peek() != ".":
                return parts
            self.i += 1

    def header(self, array: bool) -> Path | None:
        """`[a.b]` or `[[a.b]]`; returns the path its body keys are relative to."""
        bracket = self.i
        self.i += 2 if array else 1
        parts = self.key()
        closing = "]]" if array else "]"
        if not self.src.startswith(closing, self.i):
            self.fail(f"expected '{closing}'")
        self.i += len(closing)
        path: Path = ()
        for n, (name, offset) in enumerate(parts):
            path += (name,)
            entry = self.entries.get(path)
            if n < len(parts) - 1:  # a prefix: created implicitly, or walked through
                if entry is None:
                    self.entries[path] = _Entry(_Kind.IMPLICIT, offset, offset)
                elif entry.kind is _Kind.ARRAY_OF_TABLES:
                    path += (entry.count - 1,)  # `[a.b]` after `[[a]]` extends the last entry
                elif entry.kind is _Kind.VALUE:
                    self.duplicate(path, entry, offset)
                    return None
            elif array:
                if entry is None:
                    entry = self.entries[path] = _Entry(_Kind.ARRAY_OF_TABLES, offset, bracket)
                elif entry.kind is not _Kind.ARRAY_OF_TABLES:
                    self.duplicate(path, entry, offset)
                    return None
                path += (entry.count,)
                entry.count += 1
                self.entries[path] = _Entry(_Kind.HEADER, bracket, bracket)
            elif entry is None or entry.kind is _Kind.IMPLICIT:  # the explicit definition wins
                self.entries[path] = _Entry(_Kind.HEADER, offset, bracket)
            else:
                self.duplicate(path, entry, offset)
                return None
        return path

    def keyval(self, table: Path | None) -> None:
        """`key = value`, relative to `table` (a header's path, or an inline table's)."""
        parts = self.key()
        if self.peek() != "=":
            self.fail("expected '=' after a key")
        self.i += 1
        self.skip_ws()
        self.value(self.define(table, parts, self.i))

    def define(self, table: Path | None, parts: list[tuple[str, int]], value: int) -> Path | None:
        """Record the (dotted) key `parts` under `table`; None if it is a duplicate."""
        if table is None:
            return None
        path = table
        for n, (name, offset) in enumerate(parts):
            path += (name,)
            entry = self.entries.get(path)
            if n == len(parts) - 1:
                if entry is not None:
                    self.duplicate(path, entry, offset)
                    return None
                self.entries[path] = _Entry(_Kind.VALUE, offset, value)
            elif entry is None:
                self.entries[path] = _Entry(_Kind.DOTTED, offset, offset)
            elif entry.kind is _Kind.IMPLICIT:  # tomli allows it; afterwards no header may define it
                entry.kind = _Kind.DOTTED
            elif entry.kind is not _Kind.DOTTED:
                self.duplicate(path, entry, offset)
                return None
        return path

    def duplicate(self, path: Path, first: _Entry, offset: int) -> None:
        self.duplicates.append((path, first.key, offset))

    def value(self, path: Path | None) -> None:
        start, c = self.i, self.peek()
        if c in ('"', "'"):
            self.i, _ = _read_string(self.src, start, [])
            if path is not None:
                self.strings[path] = start
        elif c in ("[", "{"):
            self.bracketed(path, "]" if c == "[" else "}")
        elif c in _SCALAR_START:
            self.skip_scalar()
            date = self.i - start == 10 and self.src[start + 4] == "-"
            if date and self.peek() == " " and self.src[self.i + 1 : self.i + 2] in _DIGITS:
                self.i += 1  # `1979-05-27 07:32:00`: the time after a space is part of the value
                self.skip_scalar()
        else:
            self.fail("expected a value")

    def skip_scalar(self) -> None:
        while self.peek() in _SCALAR_CHARS:
            self.i += 1

    def bracketed(self, path: Path | None, closing: str) -> None:
        """An array (`closing` is `]`) or an inline table (`}`) at `path`.

        Newlines, comments and a trailing comma are allowed in both, as tomli allows them in inline
        tables too (TOML 1.1). One loop without callbacks serves both, so that a nesting level costs
        few Python frames: the recursion limit is what bounds the nesting depth.
        """
        self.i += 1
        index = 0
        while True:
            self.skip_blank()
            if self.peek() == closing:
                break
            if closing == "}":
                self.keyval(path)
            else:
                element = None if path is None else (*path, index)
                if element is not None:  # an element's "key" is where it starts
                    self.entries[element] = _Entry(_Kind.VALUE, self.i, self.i)
                self.value(element)
                index += 1
            self.skip_blank()
            if self.peek() == closing:
                break
            if self.peek() != ",":
                self.fail(f"expected ',' or '{closing}'")
            self.i += 1
        self.i += 1


def scan(source: str) -> tuple[SourceMap, list[Duplicate]]:
    """Scan TOML `source`; return its source map and every key or table defined twice.

    Raises `ScanError` when the text cannot be scanned (unterminated string, stray characters,
    nesting deeper than Python's recursion limit allows).
    """
    scanner = _Scanner(source)
    try:
        scanner.document()
    except _Fail as exc:
        offset, message = exc.args
        raise ScanError(message, _span(_line_starts(source), offset)) from None
    except RecursionError:
        raise ScanError("arrays or inline tables nested too deeply") from None
    source_map = SourceMap(source, {p: (e.key, e.value) for p, e in scanner.entries.items()}, scanner.strings)
    span = source_map._span
    return source_map, [Duplicate(path, span(a), span(b)) for path, a, b in scanner.duplicates]
