"""Run-time interpreters the generated presenter code is measured against (bench/presenters.py).

Neither is used by fusiongen or by generated servers: they are what a generic, non-generating
implementation would do at run time, written to be *fair* baselines (everything that can be prepared
once is prepared once; only what is inherently run-time work is done per call):

* `PathMasker`: a generic redaction-path interpreter. Paths are parsed once into segment tuples and
  merged into a trie (one walk per call however many paths share a prefix); each node carries its
  pre-built location string for error messages. `apply` is copy-on-write: it never mutates its input
  and copies only the containers on the way to a masked value. `apply_in_place` is the same walk
  mutating the data, for callers that own it (as the generated code owns what its shapers built).
  Semantics are the generated masks' (docs/spec.md §7.7): `None`/absent stay, every other value
  becomes the censor, and a node that is not the container its path needs fails closed (`MaskError`).

* `PresenterInterpreter`: executes a `fusiongen.ir.PresenterIR` at run time: shapes field by field
  from the IR (dispatching on each field's type kind), evaluates the IR's compiled expression sources
  with `eval` (each `ExprIR.python` compiled once with `compile()`, not per call), masks with a
  `PathMasker` (in place: the interpreter owns the dicts it just shaped), and builds the same content
  blocks and structured content as the generated `present_<name>` / `present_<name>_many`. It uses the
  generated server's runtime helpers (`baselines.runtime_helpers`: value checks, casts, `Notes`,
  `presented_result`, table/list text) and `_expressions` helpers, so both sides share the same leaf
  functions and serialization: the difference measured is interpretation versus compiled straight-line code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from fusiongen.ir import ExprIR, FieldIR, PresenterIR, ServerIR, TypeIR, UIBlockIR

STAR = "[*]"


# --- redaction paths -----------------------------------------------------------------------------


def parse_path(path: str | tuple[str, ...]) -> tuple[str, ...]:
    """ "lines[*].card_number" -> ("lines", "[*]", "card_number"); tuples (IR paths) pass through."""
    if isinstance(path, tuple):
        return path
    segments: list[str] = []
    for part in path.split("."):
        while part.endswith(STAR):
            part = part[: -len(STAR)]
            if part:
                segments.append(part)
            segments.append(STAR)
            part = ""
        if part:
            segments.append(part)
    return tuple(segments)


class MaskError(Exception):
    """A node on a redaction path is not the container the path needs: nothing may be sent."""

    def __init__(self, where: str) -> None:
        super().__init__(f"result.{where}: expected a shape that can be redacted")
        self.where = where


class _Node:
    """One trie node: the keys below it (dict level) or its list items (`star`)."""

    __slots__ = ("censor", "keys", "star", "where")

    def __init__(self, where: str) -> None:
        self.where = where  # location shown in MaskError, built once
        self.censor: str | None = None  # set: this value is replaced (a leaf)
        self.keys: dict[str, _Node] = {}
        self.star: _Node | None = None

    def freeze(self) -> tuple[tuple[str, str | None, _Node], ...]:
        return tuple((key, child.censor, child) for key, child in self.keys.items())


class PathMasker:
    """Redact concrete paths; `entries` are (path, censor) pairs, a path a string or a segment tuple."""

    def __init__(self, entries: Iterable[tuple[str | tuple[str, ...], str]]) -> None:
        self.paths = tuple((parse_path(path), censor) for path, censor in entries)
        self._root = _Node("")
        for segments, censor in self.paths:
            node = self._root
            for segment in segments:
                if segment == STAR:
                    if node.star is None:
                        node.star = _Node(node.where + STAR)
                    node = node.star
                else:
                    child = node.keys.get(segment)
                    if child is None:
                        where = f"{node.where}.{segment}" if node.where else segment
                        child = node.keys[segment] = _Node(where)
                    node = child
            if node.censor is None:  # the first path to reach a value decides its censor
                node.censor = censor
        # Per node, the (key, censor, child) triples, frozen once so the walk does no dict building.
        self._items: dict[int, tuple[tuple[str, str | None, _Node], ...]] = {}
        stack = [self._root]
        while stack:
            node = stack.pop()
            self._items[id(node)] = node.freeze()
            stack += node.keys.values()
            if node.star is not None:
                stack.append(node.star)

    @classmethod
    def of(cls, paths: Iterable[str | tuple[str, ...]], censor: str) -> PathMasker:
        return cls((path, censor) for path in paths)

    # copy-on-write -----------------------------------------------------------------------------
    def apply(self, data: Any) -> Any:
        """A masked version of `data`; `data` itself is never changed (containers are copied on write)."""
        return self._object(self._root, data)

    def _object(self, node: _Node, value: Any) -> Any:
        if type(value) is not dict:
            raise MaskError(node.where or "(the result)")
        copy = None
        for key, censor, child in self._items[id(node)]:
            current = value.get(key)
            if current is None:
                continue
            new = censor if censor is not None else self._value(child, current)
            if new is not current:
                if copy is None:
                    copy = dict(value)
                copy[key] = new
        return value if copy is None else copy

    def _value(self, node: _Node, value: Any) -> Any:
        star = node.star
        if star is None:
            return self._object(node, value)
        if type(value) is not list:
            raise MaskError(node.where)
        if star.censor is not None:  # every item replaced
            censor = star.censor
            return [None if item is None else censor for item in value]
        items = [self._object(star, item) for item in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value

    # in place ------------------------------------------------------------------------------------
    def apply_in_place(self, data: Any) -> None:
        """Mask `data` itself (for data the caller owns, e.g. dicts it has just built)."""
        self._object_in_place(self._root, data)

    def _object_in_place(self, node: _Node, value: Any) -> None:
        if type(value) is not dict:
            raise MaskError(node.where or "(the result)")
        for key, censor, child in self._items[id(node)]:
            current = value.get(key)
            if current is None:
                continue
            if censor is not None:
                value[key] = censor
            else:
                self._value_in_place(child, current)

    def _value_in_place(self, node: _Node, value: Any) -> None:
        star = node.star
        if star is None:
            self._object_in_place(node, value)
            return
        if type(value) is not list:
            raise MaskError(node.where)
        if star.censor is not None:
            censor = star.censor
            value[:] = [None if item is None else censor for item in value]
            return
        for item in value:
            self._object_in_place(star, item)


def presenter_paths(server: ServerIR, presenter: PresenterIR) -> list[tuple[tuple[str, ...], str]]:
    """Every concrete path a presenter masks, with its censor: its own, then its embedded presenters'
    (prefixed with the embedding field, through `[*]` for a list of models)."""
    found = [(path, presenter.censor) for path in presenter.redactions]
    for field_name, child_name in presenter.embeds:
        field = next(f for f in presenter.fields if f.name == field_name)
        prefix = (field_name, STAR) if field.type.kind == "list" else (field_name,)
        child = server.presenter(child_name)
        found += [(prefix + path, censor) for path, censor in presenter_paths(server, child)]
    return found


# --- presenters ------------------------------------------------------------------------------------


class PresenterInterpreter:
    """Executes one presenter of `server` from its IR at run time (see the module docstring)."""

    def __init__(self, server: ServerIR, presenter: str, runtime: Any, expressions: ModuleType) -> None:
        self.server = server
        self.presenter = server.presenter(presenter)
        self.rt = runtime
        # What can be looked up once is: model fields, presenters, embeds, enum sets, compiled code.
        self._model_fields = {m.name: m.visible_fields for m in server.models}
        self._presenters = {p.name: p for p in server.presenters}
        self._embeds = {p.name: dict(p.embeds) for p in server.presenters}
        self._enums: dict[tuple[str, ...], frozenset[str]] = {}
        self._code: dict[str, Any] = {}
        self._ns: dict[str, Any] = {k: v for k, v in vars(expressions).items() if not k.startswith("__")}
        self._ns["__builtins__"] = __builtins__
        self._out = {
            "string": runtime.out_string,
            "text": runtime.out_string,
            "integer": runtime.out_integer,
            "number": runtime.out_number,
            "boolean": runtime.out_boolean,
            "date": runtime.out_date,
            "datetime": runtime.out_datetime,
            "uuid": runtime.out_uuid,
        }
        self._cast = {
            kind: getattr(runtime, f"cast_{kind}")
            for kind in ("string", "integer", "number", "boolean", "date", "datetime")
        }
        self._masks = {p.name: PathMasker(presenter_paths(server, p)) for p in server.presenters}
        for p in server.presenters:
            self._prepare(p)

    def _prepare(self, p: PresenterIR) -> None:
        exprs: list[ExprIR] = []
        for rule in (*p.rules, *p.collection_rules):
            exprs += [rule.text] + ([rule.when] if rule.when else [])
        for suggestion in p.suggestions:
            exprs += [suggestion.reason] + ([suggestion.when] if suggestion.when else [])
        for block in (*p.ui, *p.collection_ui):
            exprs += [cell for row in block.rows for cell in row] + list(block.items)
            exprs += [e for e in (block.text, block.when) if e is not None]
        for e in exprs:
            if e.python not in self._code:
                self._code[e.python] = compile(e.python, f"<{p.name}: {e.source}>", "eval")
        for f in p.fields:
            self._prepare_type(f.type)
        for fields in self._model_fields.values():
            for f in fields:
                self._prepare_type(f.type)

    def _prepare_type(self, t: TypeIR | None) -> None:
        if t is not None and t.kind == "enum":
            self._enums.setdefault(t.enum_values, frozenset(t.enum_values))
        elif t is not None and t.kind == "list":
            self._prepare_type(t.items)

    # shaping -------------------------------------------------------------------------------------
    def shape(
        self, fields: tuple[FieldIR, ...], embeds: Mapping[str, str] | None, src: object, at: str
    ) -> dict[str, Any]:
        rt = self.rt
        get = rt.reader(src, at)
        missing = rt.MISSING
        out: dict[str, Any] = {}
        for f in fields:
            name = f.name
            value = get(name, missing)
            if value is missing:
                if f.required:
                    raise rt.OutputError(at, name, "a value (the field is required)")
                continue
            if value is None:
                if f.nullable:
                    out[name] = None
                    continue
                if not f.required:
                    continue
            embed = embeds.get(name) if embeds else None
            out[name] = self._convert(f.type, f.cast, value, at, name, embed)
        return out

    def _convert(self, t: TypeIR, cast: str | None, value: object, at: str, name: str, embed: str | None) -> Any:
        if cast is not None:
            return self._cast[cast](value, at, name)
        kind = t.kind
        if kind == "model":
            if embed is not None:
                child = self._presenters[embed]
                return self.shape(child.fields, self._embeds[embed], value, f"{at}.{name}")
            return self.shape(self._model_fields[t.model], None, value, f"{at}.{name}")  # type: ignore[index]
        if kind == "list":
            items = self.rt.items_of(value, at, name)
            inner = t.items
            return [
                self._convert(inner, None, item, at, f"{name}[{index}]", embed)  # type: ignore[arg-type]
                for index, item in enumerate(items)
            ]
        if kind == "enum":
            return self.rt.out_enum(value, self._enums[t.enum_values], at, name)
        return self._out[kind](value, at, name)

    # expressions ---------------------------------------------------------------------------------
    def _eval(self, e: ExprIR, data: Any) -> Any:
        ns = self._ns
        ns["data"] = data
        return eval(self._code[e.python], ns)  # compiled once from the IR's own Python

    def _notes(self, p: PresenterIR, data: dict[str, Any], notes: Any) -> None:
        ev = self._eval
        if p.description_rules:
            notes.descriptions.extend(p.description_rules)
        for rule in p.rules:
            if rule.when is None:
                notes.rules.append(ev(rule.text, data))
            elif ev(rule.when, data):
                notes.conditional.append(ev(rule.text, data))
        for s in p.suggestions:
            if s.when is None or ev(s.when, data):
                notes.suggestions.append((s.tool, ev(s.reason, data)))
        self._children(p, data, notes, self._notes)

    def _ui(self, p: PresenterIR, data: dict[str, Any], notes: Any) -> None:
        for block in p.ui:
            if block.when is None or self._eval(block.when, data):
                notes.blocks.append(self.rt.Block(block.type, self._render(block, data, None), block.for_user))
        self._children(p, data, notes, self._ui)

    def _children(self, p: PresenterIR, data: dict[str, Any], notes: Any, step: Any) -> None:
        for field_name, child_name in p.embeds:
            child = self._presenters[child_name]
            value = data.get(field_name)
            if isinstance(value, list):
                for item in value:
                    step(child, item, notes)
            elif value is not None:
                step(child, value, notes)

    def _render(self, block: UIBlockIR, data: Any, items: list[dict[str, Any]] | None) -> str:
        """A block's text for one item (`items` None) or for a collection (`data` is then unused)."""
        rt, ev = self.rt, self._eval
        kind = block.type
        if kind == "table":
            if items is not None:
                row = block.rows[0]
                rows = [tuple(ev(cell, item) for cell in row) for item in items]
            else:
                rows = [tuple(ev(cell, data) for cell in row) for row in block.rows]
            return rt.table_text(block.columns, rows)  # type: ignore[no-any-return]
        if kind == "list":
            if items is not None:
                return rt.list_text([ev(block.items[0], item) for item in items])  # type: ignore[no-any-return]
            return rt.list_text([ev(entry, data) for entry in block.items])  # type: ignore[no-any-return]
        if kind == "json":
            if items is not None:
                if not block.path:
                    return rt.json_text(items)  # type: ignore[no-any-return]
                return rt.json_text([self._read(item, block.path) for item in items])  # type: ignore[no-any-return]
            return rt.json_text(self._read(data, block.path) if block.path else data)  # type: ignore[no-any-return]
        assert block.text is not None
        text = ev(block.text, data)
        if kind == "mermaid":
            return rt.fenced("mermaid", text)  # type: ignore[no-any-return]
        if kind == "code":
            return rt.fenced(block.language, text)  # type: ignore[no-any-return]
        if kind == "summary":
            return rt.summary_text(text)  # type: ignore[no-any-return]
        return text  # type: ignore[no-any-return]

    def _read(self, data: Any, path: tuple[str, ...]) -> Any:
        for key in path:
            data = data.get(key) if isinstance(data, dict) else None
        return data

    # the pipeline --------------------------------------------------------------------------------
    def present(self, raw: object) -> Any:
        """What `present_<name>(raw)` returns, interpreted."""
        p, rt = self.presenter, self.rt
        data = self.shape(p.fields, self._embeds[p.name], raw, "result")
        notes = rt.Notes()
        self._notes(p, data, notes)
        self._ui(p, data, notes)
        self._masks[p.name].apply_in_place(data)
        return rt.presented_result(data, notes)

    def present_many(self, raw: object) -> Any:
        """What `present_<name>_many(raw)` returns, interpreted."""
        p, rt = self.presenter, self.rt
        found = rt.items_of(raw, "result", "")
        total = len(found)
        kept = found[: p.limit] if p.limit is not None else found
        embeds = self._embeds[p.name]
        items = [self.shape(p.fields, embeds, item, f"result[{index}]") for index, item in enumerate(kept)]
        notes = rt.Notes()  # the truncation notice: presented_collection writes it into the first block
        self._ns["count"] = total
        for rule in p.collection_rules:
            notes.rules.append(self._eval(rule.text, None))
        for block in p.collection_ui:
            if block.when is None or self._eval(block.when, None):
                notes.blocks.append(rt.Block(block.type, self._render(block, None, items), block.for_user))
        mask = self._masks[p.name]
        for data in items:
            self._notes(p, data, notes)
            mask.apply_in_place(data)
        return rt.presented_collection(items, total, notes)
