"""Load a spec file: TOML text → `Spec` plus a map of source positions.

tomli decides what the document means; `toml_positions` only tells where things are written, so a
diagnostic can point at `file:line:col`. Pydantic's errors are translated into diagnostics here, so
a user never sees a pydantic repr.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli
from pydantic import BaseModel, ValidationError

from fusiongen.diagnostics import Diagnostic, Position, SpecError
from fusiongen.spec import Spec
from fusiongen.toml_positions import ScanError, SourceMap, scan

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class LoadedSpec:
    """A parsed spec and where each of its parts is written."""

    spec: Spec
    path: Path
    display_path: str
    source_map: SourceMap
    source: str

    def key_at(self, *loc: str | int) -> Position:
        return _key_position(self.source_map, loc)

    def value_at(self, *loc: str | int) -> Position:
        span = self.source_map.value(loc)
        return Position(span.line, span.col) if span else self.key_at(*loc)

    def string_char_at(self, loc: Loc, index: int) -> Position:
        span = self.source_map.string_char(loc, index)
        return Position(span.line, span.col) if span else self.value_at(*loc)

    def diagnostic(self, code: str, message: str, loc: Loc, *, hint: str | None = None, value: bool = False,
                   warning: bool = False) -> Diagnostic:
        from fusiongen.diagnostics import Severity

        position = self.value_at(*loc) if value else self.key_at(*loc)
        return Diagnostic(code, message, self.display_path, position,
                          Severity.WARNING if warning else Severity.ERROR, hint)


def _key_position(source_map: SourceMap, loc: Loc) -> Position:
    span, _ = source_map.nearest(loc)
    return Position(span.line, span.col)


def load_spec(path: Path, display_path: str | None = None) -> LoadedSpec:
    """Read and parse a spec; raise `SpecError` with every shape mistake found."""
    shown = display_path or path.as_posix()
    try:
        source = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError([Diagnostic("FG002", f"cannot read the spec: {reason}", shown)]) from None
    return parse_spec(source, path, shown)


def parse_spec(source: str, path: Path, display_path: str) -> LoadedSpec:
    try:
        document = tomli.loads(source)
    except tomli.TOMLDecodeError as exc:
        raise SpecError(_syntax_diagnostics(source, exc, display_path)) from None
    try:
        source_map, _ = scan(source)
    except ScanError as exc:  # tomli accepted it, so this is our bug, not the user's
        raise RuntimeError(f"position scanner failed on valid TOML: {exc}") from exc
    try:
        spec = Spec.model_validate(document)
    except ValidationError as exc:
        raise SpecError(_shape_diagnostics(exc, source_map, display_path)) from None
    return LoadedSpec(spec, path, display_path, source_map, source)


def _syntax_diagnostics(source: str, exc: tomli.TOMLDecodeError, display_path: str) -> list[Diagnostic]:
    """A TOML syntax error; a key or table defined twice gets its own, clearer message."""
    try:
        _, duplicates = scan(source)
    except ScanError:
        duplicates = []
    if duplicates:
        return [
            Diagnostic(
                "FG102",
                f"{_describe(dup.path)} defined twice (first at {dup.first.line}:{dup.first.col})",
                display_path,
                Position(dup.second.line, dup.second.col),
                hint="TOML allows each key and table once; merge the two definitions.",
            )
            for dup in duplicates
        ]
    line = getattr(exc, "lineno", 1) or 1
    col = getattr(exc, "colno", 1) or 1
    message = getattr(exc, "msg", str(exc)).rstrip(".")
    return [Diagnostic("FG001", f"TOML syntax error: {message}", display_path, Position(line, col))]


def _describe(path: Loc) -> str:
    names = {"tools": "tool", "models": "model", "presenters": "presenter", "workflows": "workflow"}
    if len(path) == 2 and isinstance(path[0], str) and path[0] in names:
        return f'{names[path[0]]} "{path[1]}"'
    if len(path) >= 4 and path[0] == "models" and path[2] == "fields":
        return f'field "{path[3]}" of model "{path[1]}"'
    return '"' + ".".join(str(p) for p in path) + '"'


_TYPE_WORDS = {
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "an integer",
    "float_type": "a number",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
}


def _kind_of(value: Any) -> str:
    return {
        str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "an array", dict: "a table"
    }.get(type(value), type(value).__name__)


def _shape_diagnostics(exc: ValidationError, source_map: SourceMap, display_path: str) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for error in exc.errors():
        loc: Loc = tuple(error["loc"])
        kind = error["type"]
        where = ".".join(str(p) for p in loc)
        if kind == "extra_forbidden":
            name = str(loc[-1])
            allowed = _allowed_keys(loc[:-1])
            close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
            hint = f'did you mean "{close[0]}"?' if close else (
                f"allowed keys here: {', '.join(allowed)}" if allowed else None)
            found.append(Diagnostic("FG100", f'unknown key "{name}" in {_table_name(loc[:-1])}', display_path,
                                    _key_position(source_map, loc), hint=hint))
        elif kind == "missing":
            found.append(Diagnostic("FG103", f'missing required key "{loc[-1]}" in {_table_name(loc[:-1])}',
                                    display_path, _key_position(source_map, loc[:-1])))
        else:
            if kind == "literal_error":
                options = str(error.get("ctx", {}).get("expected", "")).replace("'", '"')
                message = f'"{where}" must be one of {options}; got {_short(error.get("input"))}'
            elif kind in _TYPE_WORDS:
                message = f'"{where}" must be {_TYPE_WORDS[kind]}, not {_kind_of(error.get("input"))}'
            else:
                message = f'"{where}": {error["msg"]}'
            span = source_map.value(loc)
            position = Position(span.line, span.col) if span else _key_position(source_map, loc)
            found.append(Diagnostic("FG101", message, display_path, position))
    return found


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else '"' + value + '"'
    return text if len(text) <= 40 else text[:37] + "..."


def _table_name(loc: Loc) -> str:
    if not loc:
        return "the spec"
    return "[" + ".".join(f'"{p}"' if isinstance(p, str) and "." in p else str(p) for p in loc) + "]"


def _allowed_keys(loc: Loc) -> list[str]:
    """The keys the spec language accepts at `loc`, found by walking the pydantic models."""
    current: Any = Spec
    for part in loc:
        current = _step(current, part)
        if current is None:
            return []
    model = _as_model(current)
    return [f.alias or name for name, f in model.model_fields.items()] if model else []


def _step(annotation: Any, part: str | int) -> Any:
    annotation = _unwrap(annotation)
    model = _as_model(annotation)
    if model is not None:
        by_key = {f.alias or name: f for name, f in model.model_fields.items()}
        field = by_key.get(str(part))
        return field.annotation if field else None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin is list and args:
        return args[0]
    return None


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = options[0] if len(options) == 1 else annotation
            if len(options) != 1:
                return annotation
        else:
            return annotation


def _as_model(annotation: Any) -> type[BaseModel] | None:
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
