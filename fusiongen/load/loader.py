"""Load a spec file: TOML text → `Spec` plus a map of source positions (`folder.load_path` is the entry).

tomli decides what the document means; `toml_positions` only tells where things are written, so a
diagnostic can point at `file:line:col`. Pydantic's errors are translated into diagnostics here, so
a user never sees a pydantic repr.
"""

from __future__ import annotations

import copy
import difflib
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli
from pydantic import BaseModel, ValidationError

from fusiongen.diagnostics import Diagnostic, Position, SpecError
from fusiongen.load.machines import MachineFile, read_machine
from fusiongen.load.spec import Spec
from fusiongen.load.toml_positions import Duplicate, ScanError, SourceMap, scan

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class SpecPart:
    """One file of a folder spec (docs/spec.md §3.1) or of a mounted spec (§3.2): where it is, its text, and
    where its keys are written (for a mounted file, under the names it is served by)."""

    path: Path
    display_path: str
    source_map: SourceMap
    source: str
    mount: str = ""  # the prefix it is mounted under; "" for the spec's own files


@dataclass(frozen=True)
class LoadedSpec:
    """A parsed spec and where each of its parts is written."""

    spec: Spec
    path: Path
    display_path: str
    source_map: SourceMap
    source: str
    document: dict[str, Any]  # the raw TOML, for positions of short forms
    # Each workflow's machine file, by workflow name (two files of a folder or a mount may name one path alike).
    machines: Mapping[str, MachineFile] = field(default_factory=dict)
    # Shape mistakes already found. The spec above then lacks what they were in (an unknown key, or the
    # whole model/presenter/tool/workflow holding a bad value), so lowering can still report the rest
    # of the spec's mistakes in the same run; `withdrawn` names those entities, so that references to
    # them are not reported as unknown too.
    problems: tuple[Diagnostic, ...] = ()
    withdrawn: frozenset[tuple[str, str]] = frozenset()
    # A folder spec or a spec with mounts: its files (the spec's own first, then the mounted ones), and which
    # file defines each entity (`("tools", "a.b")`) or top-level table (`("server",)`). Empty for a one-file
    # spec, whose positions are all in `source_map` and `display_path` (for a folder those are the file
    # holding [server]).
    parts: tuple[SpecPart, ...] = ()
    owners: Mapping[Loc, int] = field(default_factory=dict)
    folder: bool = False  # `path` is a folder spec (§3.1)

    @property
    def home(self) -> Path:
        """The folder the spec's relative names are read from: the handler module is looked up there."""
        return self.path if self.folder else self.path.parent

    @property
    def home_display(self) -> str:
        """`home` as diagnostics show it."""
        if not self.folder:
            return Path(self.display_path).parent.as_posix()
        part = self.parts[0]
        return part.display_path[: -len(part.path.relative_to(self.path).as_posix()) - 1]

    def file_at(self, *loc: str | int) -> str:
        """The file (as shown) that writes `loc`."""
        return self._locate(loc)[0]

    def _locate(self, loc: Loc) -> tuple[str, SourceMap]:
        if not self.parts:
            return self.display_path, self.source_map
        part = self.parts[owner_of(self.owners, loc)]
        return part.display_path, part.source_map

    def key_at(self, *loc: str | int) -> Position:
        return _key_position(self._locate(loc)[1], loc)

    def value_at(self, *loc: str | int) -> Position:
        """Where the value at `loc` is written; for a key the short form implies (the `type` of `id = "x"`),
        the value that implies it."""
        source_map = self._locate(loc)[1]
        span = source_map.value(loc)
        if (
            span is None
            and len(loc) > 1
            and source_map.value(loc[:-1]) is not None
            and source_map.key(loc[:-1]) is not None
            and isinstance(self.lookup(loc[:-1]), str)
        ):
            span = source_map.value(loc[:-1])
        return Position(span.line, span.col) if span else self.key_at(*loc)

    def lookup(self, loc: Loc) -> Any:
        """The raw TOML value at `loc`, or None."""
        return _lookup(self.document, loc)

    def string_char_at(self, loc: Loc, index: int) -> Position:
        span = self._locate(loc)[1].string_char(loc, index)
        return Position(span.line, span.col) if span else self.value_at(*loc)

    def diagnostic(
        self, code: str, message: str, loc: Loc, *, hint: str | None = None, value: bool = False, warning: bool = False
    ) -> Diagnostic:
        from fusiongen.diagnostics import Severity

        position = self.value_at(*loc) if value else self.key_at(*loc)
        return Diagnostic(
            code, message, self.file_at(*loc), position, Severity.WARNING if warning else Severity.ERROR, hint
        )


def owner_of(owners: Mapping[Loc, int], loc: Loc) -> int:
    """Which file of a folder spec writes `loc`: the one defining its entity, else its top-level table, else
    the first file."""
    found = owners.get(loc[:2]) if len(loc) >= 2 else None
    if found is None:
        found = owners.get(loc[:1], 0)
    return found


def _key_position(source_map: SourceMap, loc: Loc) -> Position:
    span, _ = source_map.nearest(loc)
    return Position(span.line, span.col)


def read_source(path: Path, shown: str) -> str:
    """A spec file's text: FG002 if it cannot be read or is not UTF-8 (a leading byte order mark is dropped)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError([Diagnostic("FG002", f"cannot read the spec: {exc.strerror or exc}", shown)]) from None
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            [
                Diagnostic(
                    "FG002",
                    f"the spec is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                    shown,
                    Position(line, col),
                    hint="save the file as UTF-8",
                )
            ]
        ) from None
    return source.removeprefix("\ufeff")


MAX_NESTING = 100  # arrays and inline tables; a spec needs a handful, parsers give up in the hundreds


# What the depth scan steps over as a whole, and the brackets it counts. TOML's four strings (spec §2; toml.io
# v1.0.0): multi-line basic (escapes, may span lines, the closing `"""` may follow one or two quotes of the
# content) and literal (no escapes), then one-line basic and literal; a string left open runs to the line's end
# (tomli reports it). Comments run to the line's end.
_TOML_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\[\s\S]|"{1,2}(?!"))*"{3,5}'
    r"|'''(?:[^']|'{1,2}(?!'))*'{3,5}"
    r'|"(?:[^"\\\n]|\\.)*"?'
    r"|'[^'\n]*'?"
    r"|#[^\n]*"
    r"|[\[\]{}]"
)


def _too_deep_at(source: str) -> Position | None:
    """Where arrays/inline tables first nest deeper than MAX_NESTING (strings and comments skipped). One regex
    scan: a spec the importer writes is 100,000 lines."""
    depth = 0
    for token in _TOML_TOKENS.finditer(source):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                start = token.start()
                line_start = source.rfind("\n", 0, start) + 1
                return Position(source.count("\n", 0, start) + 1, start - line_start + 1)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return None


def parse_document(source: str, display_path: str) -> tuple[dict[str, Any], SourceMap]:
    """The TOML document and where its keys are written; FG001/FG102 for text that is not a valid document."""
    deep = _too_deep_at(source)
    if deep is not None:
        raise SpecError([_too_deep(display_path, deep)])
    try:
        document = tomli.loads(source)
    except tomli.TOMLDecodeError as exc:
        raise SpecError(_syntax_diagnostics(source, exc, display_path)) from None
    except RecursionError:
        raise SpecError([_too_deep(display_path, Position(1, 1))]) from None
    return document, SourceMap.deferred(source)  # positions are read only for a diagnostic


Locate = Callable[[Loc], tuple[str, SourceMap]]  # a path into the document → the file (as shown) and its map


def validate_document(document: dict[str, Any], locate: Locate) -> tuple[Spec, list[Diagnostic], set[tuple[str, str]]]:
    """The spec the document holds, its shape mistakes and what they set aside; SpecError if nothing is left."""
    deep_table = _too_deep_table(document)
    if deep_table is not None:
        shown, source_map = locate(deep_table)
        raise SpecError([_too_deep(shown, _key_position(source_map, deep_table), "tables")])
    problems: list[Diagnostic] = []
    withdrawn: set[tuple[str, str]] = set()
    try:
        spec = Spec.model_validate(document)
    except ValidationError as exc:
        problems = _shape_diagnostics(exc, locate)
        checked = _without_shape_errors(document, exc, withdrawn)
        if checked is None:
            raise SpecError(problems) from None
        spec = checked
    return spec, problems, withdrawn


def spec_from_document(
    document: dict[str, Any], source_map: SourceMap, source: str, path: Path, display_path: str
) -> LoadedSpec:
    """The spec one file holds by itself (a file with `mounts` is assembled by `folder.load_path`)."""
    if "mounts" in document:
        raise RuntimeError("a spec with mounts is assembled from its parts")  # our bug, not the user's
    spec, problems, withdrawn = validate_document(document, lambda _: (display_path, source_map))
    machines = {
        name: read_machine(
            path.parent / w.machine, Path(display_path).parent.joinpath(w.machine).as_posix(), w.machine, path.parent
        )
        for name, w in spec.workflows.items()
        if w.machine is not None
    }
    return LoadedSpec(
        spec, path, display_path, source_map, source, document, machines, tuple(problems), frozenset(withdrawn)
    )


# The tables whose entries can be set aside when one of them is malformed.
ENTITY_TABLES = ("models", "presenters", "tools", "workflows", "resources", "prompts")


def _without_shape_errors(
    document: dict[str, Any], exc: ValidationError, withdrawn: set[tuple[str, str]]
) -> Spec | None:
    """The spec without what its shape errors are in, or None if that leaves no spec to check.

    An unknown key is dropped (it means nothing either way). Any other shape error sets aside the whole
    entity it is in (`models.X`, `tools.Y`...), recorded in `withdrawn`. Errors anywhere else (the
    `[server]` table, a table that is not a table) leave nothing sound to lower."""
    pruned = copy.deepcopy(document)
    for _ in range(3):  # setting one entity aside cannot create errors elsewhere, but stay bounded
        for error in exc.errors():
            loc = tuple(error["loc"])
            if error["type"] == "extra_forbidden" and loc:
                parent = _lookup(pruned, loc[:-1])
                if isinstance(parent, dict):
                    parent.pop(loc[-1], None)
                    continue
            table = pruned.get(str(loc[0])) if len(loc) >= 2 else None
            if loc and loc[0] in ENTITY_TABLES and isinstance(table, dict):
                table.pop(loc[1], None)
                withdrawn.add((str(loc[0]), str(loc[1])))
                continue
            return None
        try:
            return Spec.model_validate(pruned)
        except ValidationError as again:
            exc = again
    return None


def _lookup(document: Any, loc: Loc) -> Any:
    """The raw TOML value at `loc` inside `document`, or None."""
    node = document
    for part in loc:
        if isinstance(node, dict):
            if part not in node:
                return None
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node


def _opening_quote(line: str, end: int) -> int | None:
    """The index of the quote that opens the string still open at `end` of `line`."""
    quote: str | None = None
    start = None
    index = 0
    while index < end:
        char = line[index]
        if quote is None and char == "#":
            return None
        if quote is None and char in "\"'":
            quote, start = char, index
        elif quote == char:
            quote = None
        elif quote == '"' and char == "\\":
            index += 1
        index += 1
    return start if quote is not None else None


def _too_deep_table(document: dict[str, Any]) -> Loc | None:
    """The first table nested more than MAX_NESTING tables deep, however it is written. Header tables
    (`[models.A.fields.a.fields.b]`) escape `_too_deep_at`, and inline objects nest fields in fields without
    bound: past this depth pydantic gives up, and a generated schema literal would nest deeper than Python
    parses. Walked with a stack, so no depth of input costs recursion."""
    stack: list[tuple[Loc, Any, int]] = [((), document, 0)]
    while stack:
        loc, node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_NESTING:
                return loc
            stack += (((*loc, key), value, depth + 1) for key, value in node.items())
        elif isinstance(node, list):
            stack += (((*loc, index), value, depth) for index, value in enumerate(node))
    return None


def _too_deep(display_path: str, position: Position, what: str = "arrays or inline tables") -> Diagnostic:
    return Diagnostic(
        "FG001",
        f"{what} nested more than {MAX_NESTING} levels deep",
        display_path,
        position,
        hint="a spec never needs more than a few levels of nesting",
    )


def _syntax_diagnostics(source: str, exc: tomli.TOMLDecodeError, display_path: str) -> list[Diagnostic]:
    """A TOML syntax error; a key or table defined twice gets its own, clearer message."""
    line = getattr(exc, "lineno", 1) or 1
    col = getattr(exc, "colno", 1) or 1
    message = getattr(exc, "msg", str(exc)).rstrip(".")
    duplicates: list[Duplicate] = []
    try:
        _, duplicates = scan(source)
    except ScanError as scan_error:
        if scan_error.span is not None and "'\\n' is not allowed in a string" in scan_error.message:
            # A string that runs into the end of its line: point at its opening quote, not the line's end.
            text_line = source.split("\n")[scan_error.span.line - 1]
            quote = _opening_quote(text_line, scan_error.span.col - 1)
            if quote is not None:
                line, col, message = scan_error.span.line, quote + 1, "unterminated string"
    found = [
        Diagnostic(
            "FG102",
            f"{_describe(dup.path)} defined twice (first at {dup.first.line}:{dup.first.col})",
            display_path,
            Position(dup.second.line, dup.second.col),
            hint="TOML allows each key and table once; merge the two definitions.",
        )
        for dup in duplicates
    ]
    if not any(d.position.line == line for d in found):
        found.append(
            Diagnostic(
                "FG001", f"TOML syntax error: {message}", display_path, Position(line, col), hint=_syntax_hint(message)
            )
        )
    return found


def _syntax_hint(message: str) -> str | None:
    """What to write instead, for the syntax errors whose fix is not obvious from tomli's message."""
    if message.startswith("Unescaped '\\'"):  # most often a regular expression: `pattern = "^\d+$"`
        return (
            'in a "..." string a backslash starts an escape: write a regular expression as a literal string '
            "'...', e.g. pattern = '^\\d{13}$'"
        )
    return None


def _describe(path: Loc) -> str:
    names = {
        "tools": "tool",
        "models": "model",
        "presenters": "presenter",
        "workflows": "workflow",
        "resources": "resource",
        "prompts": "prompt",
    }
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
    import datetime

    if isinstance(value, datetime.datetime):
        return "a date-time"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, datetime.time):
        return "a time"
    return {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _shape_diagnostics(exc: ValidationError, locate: Locate) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for error in exc.errors():
        loc: Loc = tuple(error["loc"])
        display_path, source_map = locate(loc)
        kind = error["type"]
        if kind == "extra_forbidden":
            name = str(loc[-1])
            allowed = _allowed_keys(loc[:-1])
            close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
            hint = (
                f'did you mean "{close[0]}"?'
                if close
                else (f"allowed keys here: {', '.join(allowed)}" if allowed else None)
            )
            found.append(
                Diagnostic(
                    "FG100",
                    f'unknown key "{name}" in {_table_name(loc[:-1])}',
                    display_path,
                    _key_position(source_map, loc),
                    hint=hint,
                )
            )
        elif kind == "missing":
            found.append(
                Diagnostic(
                    "FG103",
                    f'missing required key "{loc[-1]}" in {_table_name(loc[:-1])}',
                    display_path,
                    _key_position(source_map, loc[:-1]),
                )
            )
        else:
            subject = f'"{loc[-1]}" in {_table_name(loc[:-1])}' if loc else "the spec"
            if kind == "literal_error":
                options = str(error.get("ctx", {}).get("expected", "")).replace("'", '"')
                message = f"{subject} must be one of {options}; got {_short(error.get('input'))}"
            elif kind == "model_type" and error.get("ctx", {}).get("class_name") == "FieldSpec":
                message = f"{subject} must be a type name or a table, not {_kind_of(error.get('input'))}"
            elif kind in _TYPE_WORDS:
                message = f"{subject} must be {_TYPE_WORDS[kind]}, not {_kind_of(error.get('input'))}"
            else:
                message = f"{subject}: {error['msg']}"
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
