"""Reading an OpenAPI document: YAML or JSON, `$ref`s within it, and where each JSON pointer is written.

Positions come from libyaml's node tree (every diagnostic names the JSON pointer *and* points at the line
that declares it): a YAML document is composed once, and its data constructed from those nodes; a JSON
document's data comes from the json module (twenty times faster), and its nodes are composed only when the
first position is asked for. An alias is walked once (a 506-byte "billion laughs" document would otherwise
take a walk per expansion); what is under it is positioned at the alias's first use.

Before mapping, the data is measured without recursion: a document whose aliases expand it past
MAX_EXPANDED_NODES, nests past MAX_DEPTH levels, or contains itself (`&a [*a]`) is FG300, never a hang, a
RecursionError or an "internal error".
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


MAX_DEPTH = 128  # nesting of objects and arrays; the large real documents nest at most 22 deep
MAX_EXPANDED_NODES = 2_000_000  # values counted as often as aliases repeat them; GitHub's document has 57,006


@dataclass
class Document:
    """A loaded document: its data, the file it came from and the position of every pointer in it
    (`text`: the source, composed into positions on first use when they were not recorded at load)."""

    data: dict[str, Any]
    file: str
    positions: dict[str, Position] = field(default_factory=dict)
    text: str | None = None

    def position(self, pointer: str) -> Position:
        """Where `pointer` is written, or the nearest enclosing node that is."""
        if self.text is not None:
            text, self.text = self.text, None
            with contextlib.suppress(yaml.YAMLError):
                root = yaml.compose(text, Loader=yaml.CSafeLoader)
                if root is not None:
                    self.positions = record_positions(root)
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


def record_positions(root: yaml.Node) -> dict[str, Position]:
    """Every pointer's line and column, walked with a stack; a node reached again through an alias is not
    walked again (its pointers keep their first place)."""
    positions: dict[str, Position] = {}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "#")]
    while stack:
        node, pointer = stack.pop()
        positions.setdefault(pointer, Position(node.start_mark.line + 1, node.start_mark.column + 1))
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                token = f"{pointer}/{escape_pointer(str(key.value))}"
                positions.setdefault(token, Position(key.start_mark.line + 1, key.start_mark.column + 1))
                stack.append((value, token))
        elif isinstance(node, yaml.SequenceNode):
            stack += ((item, f"{pointer}/{index}") for index, item in reversed(list(enumerate(node.value))))
    return positions


def _shape_problem(data: Any) -> str | None:
    """Why the data cannot be mapped safely, or None: measured with a stack, each shared value (an alias)
    once, its expanded size and height remembered."""
    sizes: dict[int, tuple[int, int]] = {}  # id → (values under it, expanded; its height)
    in_progress: set[int] = set()
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, finished = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        key = id(node)
        if finished:
            in_progress.discard(key)
            measured = [sizes.get(id(c), (1, 0)) for c in children if isinstance(c, dict | list)]
            size = 1 + len(children) + sum(s - 1 for s, _ in measured)
            height = 1 + max((h for _, h in measured), default=0)
            if size > MAX_EXPANDED_NODES:
                return f"its aliases expand it past {MAX_EXPANDED_NODES:,} values (an alias bomb?)"
            if height > MAX_DEPTH:
                return f"it nests objects and arrays more than {MAX_DEPTH} levels deep"
            sizes[key] = (size, height)
            continue
        if key in sizes:
            continue
        if key in in_progress:
            return "a YAML alias refers to a node that contains it (the document contains itself)"
        if len(in_progress) >= MAX_DEPTH:
            return f"it nests objects and arrays more than {MAX_DEPTH} levels deep"
        in_progress.add(key)
        stack.append((node, True))
        stack += ((child_node, False) for child_node in children)
    return None


def _parse(text: str, suffix: str) -> tuple[Any, dict[str, Position] | None]:
    """The data, and the positions when parsing gave them (YAML); JSON's come later, on first use."""
    if suffix == ".json":
        return json.loads(text), None
    loader = yaml.CSafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        return loader.construct_document(root), record_positions(root)
    finally:
        loader.dispose()


def load_document(path: Path) -> Document:
    """Read and parse `path`; a document that is not OpenAPI 3.x raises `SpecError` with FG300/FG301."""
    file = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Diagnostic("FG300", f"cannot read the OpenAPI document: {exc}", file)]) from exc
    try:
        data, positions = _parse(text, path.suffix.lower())
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        position = Position(mark.line + 1, mark.column + 1) if mark is not None else Position(1, 1)
        if isinstance(exc, json.JSONDecodeError):
            position = Position(exc.lineno, exc.colno)
        raise SpecError([Diagnostic("FG300", f"not valid YAML or JSON: {exc}", file, position)]) from exc
    except RecursionError:
        why = f"it nests objects and arrays more than {MAX_DEPTH} levels deep"
        raise SpecError([Diagnostic("FG300", f"the document cannot be imported: {why}", file)]) from None
    problem = _shape_problem(data)
    if problem is not None:
        raise SpecError([Diagnostic("FG300", f"the document cannot be imported: {problem}", file)])
    version = data.get("openapi") if isinstance(data, dict) else None
    if not isinstance(version, str) or not version.startswith("3."):
        found = "no `openapi` key" if version is None else f"openapi {version!r}"
        raise SpecError([Diagnostic("FG301", f"not an OpenAPI 3.0 or 3.1 document ({found})", file)])
    if positions is None:
        return Document(data, file, text=text)
    return Document(data, file, positions)


def items(node: Any) -> Iterator[tuple[str, Any]]:
    """A mapping's items in document order, or nothing if it is not a mapping."""
    if isinstance(node, Mapping):
        yield from ((str(k), v) for k, v in node.items())
