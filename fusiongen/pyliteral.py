"""Format JSON-like values as Python source, deterministically and the way a formatter would.

Generated modules embed schemas and constants as literals. The output is stable under `ruff format`:
a collection stays on one line when it fits, otherwise it is exploded one item per line with a
trailing comma (which formatters keep exploded).
"""

from __future__ import annotations

import json

LINE_LENGTH = 110
INDENT = "    "


class PyName(str):
    """A name to print as code, not as a string: a reference to another module constant."""


def docstring_text(text: str) -> str:
    """User text made safe between triple quotes: backslashes, quotes and control characters escaped,
    line breaks kept."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n":
            out.append(char)
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes, plus DEL, which TOML forbids raw and JSON leaves alone."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def py_string(text: str) -> str:
    """A double-quoted Python string literal (JSON's escapes are valid Python escapes)."""
    return json.dumps(text, ensure_ascii=False)


def py_literal(value: object, level: int = 0, prefix_width: int = 0) -> str:
    """`value` as Python source, starting at indentation `level` after `prefix_width` characters."""
    flat = _flat(value)
    if len(INDENT) * level + prefix_width + len(flat) <= LINE_LENGTH or not _is_collection(value):
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
