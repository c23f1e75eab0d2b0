"""Reading an OpenAPI document: YAML or JSON, `$ref`s within it, and where each JSON pointer is written.

Positions come from a second, node-level YAML parse (JSON is read by the same parser, so both get lines
and columns): every diagnostic names the JSON pointer *and* points at the line that declares it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fusiongen.diagnostics import Diagnostic, Position, Severity, SpecError, display_path


def escape_pointer(token: str) -> str:
    """One JSON pointer token: `/pets` → `~1pets` (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_pointer(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def child(pointer: str, *tokens: str | int) -> str:
    return pointer + "".join("/" + escape_pointer(str(token)) for token in tokens)


class RefError(Exception):
    """A `$ref` that cannot be followed: outside the document, dangling, or part of a cycle of refs."""


@dataclass
class Document:
    """A loaded document: its data, the file it came from and the position of every pointer in it."""

    data: dict[str, Any]
    file: str
    positions: dict[str, Position] = field(default_factory=dict)

    def position(self, pointer: str) -> Position:
        """Where `pointer` is written, or the nearest enclosing node that is."""
        while pointer not in self.positions and "/" in pointer:
            pointer = pointer.rsplit("/", 1)[0]
        return self.positions.get(pointer, Position(1, 1))

    def diagnostic(
        self, code: str, pointer: str, message: str, *, hint: str | None = None, error: bool = False
    ) -> Diagnostic:
        return Diagnostic(
            code,
            f"{pointer}: {message}",
            self.file,
            self.position(pointer),
            Severity.ERROR if error else Severity.WARNING,
            hint,
        )

    def lookup(self, ref: str) -> Any:
        """The node a local `$ref` (`#/components/schemas/Pet`) names."""
        if not ref.startswith("#"):
            raise RefError(f"$ref {ref!r} points outside the document; only local refs are supported")
        node: Any = self.data
        for token in [unescape_pointer(t) for t in ref[1:].split("/")[1:]]:
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise RefError(f"$ref {ref!r} names nothing in the document")
        return node

    def resolve(self, node: Any, pointer: str) -> tuple[Any, str]:
        """Follow `$ref`s from `node` (at `pointer`) to a node that is not one; returns it and its pointer.

        Siblings of a `$ref` (3.1 allows `description`/`summary`) override the target's, as 3.1 says.
        """
        seen: set[str] = set()
        overrides: dict[str, Any] = {}
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise RefError(f"$ref {ref!r} refers to itself through {len(seen)} ref(s)")
            seen.add(ref)
            overrides = {k: v for k, v in node.items() if k in ("description", "summary")} | overrides
            node, pointer = self.lookup(ref), ref
        if overrides and isinstance(node, Mapping):
            node = {**node, **overrides}
        return node, pointer


def _record_positions(node: yaml.Node, pointer: str, positions: dict[str, Position]) -> None:
    positions.setdefault(pointer, Position(node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            token = escape_pointer(str(key.value))
            positions.setdefault(child(pointer, token), Position(key.start_mark.line + 1, key.start_mark.column + 1))
            _record_positions(value, f"{pointer}/{token}", positions)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_positions(item, f"{pointer}/{index}", positions)


def _parse(text: str, suffix: str) -> Any:
    if suffix == ".json":
        return json.loads(text)
    return yaml.safe_load(text)


def load_document(path: Path) -> Document:
    """Read and parse `path`; a document that is not OpenAPI 3.x raises `SpecError` with FG300/FG301."""
    file = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Diagnostic("FG300", f"cannot read the OpenAPI document: {exc}", file)]) from exc
    try:
        data = _parse(text, path.suffix.lower())
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        position = Position(mark.line + 1, mark.column + 1) if mark is not None else Position(1, 1)
        if isinstance(exc, json.JSONDecodeError):
            position = Position(exc.lineno, exc.colno)
        raise SpecError([Diagnostic("FG300", f"not valid YAML or JSON: {exc}", file, position)]) from exc
    version = data.get("openapi") if isinstance(data, dict) else None
    if not isinstance(version, str) or not version.startswith("3."):
        found = "no `openapi` key" if version is None else f"openapi {version!r}"
        raise SpecError([Diagnostic("FG301", f"not an OpenAPI 3.0 or 3.1 document ({found})", file)])
    positions: dict[str, Position] = {}
    with contextlib.suppress(yaml.YAMLError):  # JSON YAML cannot read node by node: pointers without lines
        root = yaml.compose(text)
        if root is not None:
            _record_positions(root, "#", positions)
    return Document(data, file, positions)


def items(node: Any) -> Iterator[tuple[str, Any]]:
    """A mapping's items in document order, or nothing if it is not a mapping."""
    if isinstance(node, Mapping):
        yield from ((str(k), v) for k, v in node.items())
