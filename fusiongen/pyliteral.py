"""Format JSON-like values as Python source, deterministically and the way a formatter would.

Generated modules embed schemas and constants as literals. The output is stable under `ruff format`:
a collection stays on one line when it fits, otherwise it is exploded one item per line with a
trailing comma (which formatters keep exploded).
"""

from __future__ import annotations

import json
import re

LINE_LENGTH = 110
INDENT = "    "


class PyName(str):
    """A name to print as code, not as a string: a reference to another module constant."""


def docstring_text(text: str) -> str:
    """User text made safe between triple quotes: backslashes, quotes and the unsafe characters (control
    characters, other line breaks, bidirectional controls) escaped, `\\n` kept."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n":
            out.append(char)
        elif _is_unsafe(char):  # \r, NUL, U+2028, bidirectional controls...
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


# Characters never written raw outside a string literal: every line break Python, editors or Markdown know
# (a path or text holding one would end a comment), the other control characters, lone surrogates (a path
# that is not UTF-8) and the bidirectional controls (they reorder what a reviewer sees). A fixed set, not
# `str.isprintable`, so the same text encodes the same way under every Python's Unicode database.
_UNSAFE = frozenset(
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u2028", "\u2029", "\ufeff", "\u200e", "\u200f", "\u061c"]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _is_unsafe(char: str) -> bool:
    return char in _UNSAFE or "\ud800" <= char <= "\udfff"


# The same set as one character class: a string without any (nearly every one) is checked in C, not per char.
_ANY_UNSAFE = re.compile("[" + "".join(sorted(f"\\u{ord(c):04x}" for c in _UNSAFE)) + "\\ud800-\\udfff]")


def comment_text(text: str) -> str:
    """Text (a path) made safe on one line of a `#` comment, an HTML comment or a Markdown code span,
    reversibly: backslashes and the unsafe characters become Python-style escapes, and so do `<`, `>`
    (`-->` would end an HTML comment) and backticks. Ordinary paths do not change."""
    return "".join(_escape(c) if _is_unsafe(c) or c in "<>`" else "\\\\" if c == "\\" else c for c in text)


# Markdown: escaped everywhere (emphasis, code, links, tables, strikethrough, backslash itself) ...
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]|~")
# ... and at the start of a line, where they open a heading, a list, a quote or a setext underline.
_MARKDOWN_LINE_START = frozenset("#+-=")
_LINE_BREAKS = ("\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c")


def markdown_text(text: str, *, inline: bool = False) -> str:
    """User text as Markdown that shows exactly that text: no HTML (`<`, `>`, `&` become entities), no
    links, emphasis, code or tables, no block structure from what a line starts with (leading spaces
    dropped: they would start a code block). Line breaks stay line breaks (`inline`: spaces, for a table
    cell); other control characters, lone surrogates and bidirectional controls become visible escapes."""
    for brk in _LINE_BREAKS:
        text = text.replace(brk, "\n")
    lines = []
    for line in text.split("\n"):
        out = []
        for char in line.lstrip(" \t"):
            if char == "&":
                out.append("&amp;")
            elif char == "<":
                out.append("&lt;")
            elif char == ">":
                out.append("&gt;")
            elif char in _MARKDOWN_PUNCTUATION or (not out and char in _MARKDOWN_LINE_START):
                out.append("\\" + char)
            elif _is_unsafe(char):
                out.append("\\" + _escape(char))
            elif char in ".)" and out and all(o.isdigit() for o in out):
                out.append("\\" + char)  # "1." or "1)" opens an ordered list
            else:
                out.append(char)
        lines.append("".join(out))
    return (" " if inline else "\n").join(lines)


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes, plus DEL (TOML forbids it raw, JSON leaves it alone) and the other
    unsafe characters."""
    literal = json.dumps(text, ensure_ascii=False)  # DEL, C1 and line/bidirectional controls escaped too
    return "".join(f"\\u{ord(c):04x}" if _is_unsafe(c) else c for c in literal)


_json_string = json.encoder.encode_basestring  # what json.dumps(str, ensure_ascii=False) returns


def py_string(text: str) -> str:
    """A double-quoted Python string literal (JSON's escapes are valid Python escapes). The unsafe characters
    JSON leaves raw are escaped too: a lone surrogate (a path that is not UTF-8, decoded with
    surrogateescape) cannot be written to a UTF-8 file, and U+2028, C1 controls or bidirectional controls
    would break or reorder the line for editors and reviewers. The program gets the same string."""
    literal = _json_string(text)  # json.dumps(text, ensure_ascii=False), without a JSONEncoder per call
    if _ANY_UNSAFE.search(literal):
        literal = "".join(f"\\u{ord(c):04x}" if _is_unsafe(c) else c for c in literal)
    return literal


def py_literal(value: object, level: int = 0, prefix_width: int = 0) -> str:
    """`value` as Python source, starting at indentation `level` after `prefix_width` characters."""
    if not _is_collection(value):
        return _flat(value)
    flat = _flat_within(value, LINE_LENGTH - len(INDENT) * level - prefix_width)
    if flat is not None:
        return flat
    inner = INDENT * (level + 1)
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            head = f"{py_string(str(key))}: "
            lines.append(f"{inner}{head}{py_literal(item, level + 1, len(head))},")
        return "{\n" + "\n".join(lines) + "\n" + INDENT * level + "}"
    assert isinstance(value, list | tuple)
    open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    lines = [f"{inner}{py_literal(item, level + 1)}," for item in value]
    return open_ + "\n" + "\n".join(lines) + "\n" + INDENT * level + close


def _is_collection(value: object) -> bool:
    return isinstance(value, dict | list | tuple) and len(value) > 0


def _flat_within(value: object, budget: int) -> str | None:
    """`_flat(value)` if it is at most `budget` characters, else None, found without writing more than about
    `budget` characters: a nested literal is tried at each level on the way down, and writing each level whole
    made a large API's schemas quadratic in their depth."""
    if not isinstance(value, dict | list | tuple):
        flat = _flat(value)
        return flat if len(flat) <= budget else None
    if isinstance(value, dict):
        open_, close = "{", "}"
    else:
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ",)" if len(value) == 1 else ")")
    parts: list[str] = []
    used = len(open_) + len(close)
    keyed = isinstance(value, dict)
    for key, item in value.items() if isinstance(value, dict) else (("", item) for item in value):
        if used > budget:
            return None
        head = f"{py_string(str(key))}: " if keyed else ""
        used += len(head) + (2 if parts else 0)
        part = _flat_within(item, budget - used)
        if part is None:
            return None
        parts.append(head + part)
        used += len(part)
    return open_ + ", ".join(parts) + close if used <= budget else None


def _flat(value: object) -> str:
    if value is None:
        return "None"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, PyName):
        return str(value)
    if isinstance(value, str):
        return py_string(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_string(str(k))}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, tuple):
        items = [_flat(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, frozenset):
        return "frozenset({" + ", ".join(_flat(v) for v in sorted(value, key=str)) + "})" if value else "frozenset()"
    raise TypeError(f"cannot render {type(value).__name__} as a literal")
