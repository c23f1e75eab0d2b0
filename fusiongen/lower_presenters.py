"""Lower presenters: schemas, embeds, redaction paths and expressions, checked against each other.

Everything a presenter does at run time is decided here: redaction paths are expanded into concrete
paths of the schema (so masking is straight-line code), and every `{…}` and `when` is compiled to
Python by `fusiongen.expr`. A block, rule or suggestion that reaches the model may not read a hidden
or redacted field: that is a build error, not a leak found in production.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from fusiongen import expr
from fusiongen.diagnostics import Diagnostic
from fusiongen.ir import ExprIR, FieldIR, ModelIR, PresenterIR, RedactionPath, RuleIR, SuggestionIR, UIBlockIR
from fusiongen.loader import Loc
from fusiongen.spec import PresenterSpec, UIBlockSpec

if TYPE_CHECKING:
    from fusiongen.lower import _Lowering

_SEGMENT = re.compile(r"(?P<name>\*|[A-Za-z_][A-Za-z0-9_]*)(?P<each>(\[\*\])*)\Z")
_EXPR_TYPES = {
    "string": expr.ExprType.STRING,
    "text": expr.ExprType.STRING,
    "date": expr.ExprType.STRING,
    "datetime": expr.ExprType.STRING,
    "uuid": expr.ExprType.STRING,
    "enum": expr.ExprType.STRING,
    "integer": expr.ExprType.INTEGER,
    "number": expr.ExprType.NUMBER,
    "boolean": expr.ExprType.BOOLEAN,
    "list": expr.ExprType.LIST,
    "model": expr.ExprType.OBJECT,
}
_TEXT_BLOCKS = ("markdown", "mermaid", "code", "summary")


def _access(path: tuple[str, ...]) -> str:
    """How generated code reads a path of shaped data (a dict built by the shape function)."""
    return f"data.get({path[0]!r})" if len(path) == 1 else f"_x_get(data, {path!r})"


class PresenterLowering:
    def __init__(self, lowering: _Lowering, models: dict[str, ModelIR]) -> None:
        self.lowering = lowering
        self.spec = lowering.spec
        self.models = models
        self.fields: dict[str, tuple[FieldIR, ...]] = {}  # presenter → its schema, resolved before anything else

    # --- schemas ---------------------------------------------------------------------------------
    def schema(self, name: str, presenter: PresenterSpec) -> tuple[FieldIR, ...]:
        loc: Loc = ("presenters", name)
        error = self.lowering.error
        if presenter.schema_ is not None:
            if presenter.model is not None or presenter.fields is not None:
                error(
                    "FG152",
                    f'presenter "{name}" has both an inline schema and model/fields',
                    (*loc, "schema"),
                    hint="use either model (and fields) or schema",
                )
            return tuple(self.lowering.lower_field(n, s, (*loc, "schema", n)) for n, s in presenter.schema_.items())
        if presenter.model is None:
            error("FG152", f'presenter "{name}" needs a model or an inline schema', loc)
            return ()
        model = self.models.get(presenter.model)
        if model is None:
            close = difflib.get_close_matches(presenter.model, list(self.models), n=1)
            error(
                "FG150",
                f'presenter "{name}" names unknown model "{presenter.model}"',
                (*loc, "model"),
                value=True,
                hint=f'did you mean "{close[0]}"?' if close else None,
            )
            return ()
        if presenter.fields is None:
            return model.visible_fields
        chosen: list[FieldIR] = []
        for index, field_name in enumerate(presenter.fields):
            field = model.field(field_name)
            if field is None or field.hidden:
                why = "is hidden: it never leaves the server" if field else f'is not a field of "{model.name}"'
                close = difflib.get_close_matches(field_name, [f.name for f in model.visible_fields], n=1)
                error(
                    "FG151",
                    f'presenter field "{field_name}" {why}',
                    (*loc, "fields", index),
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close and not field else None,
                )
            else:
                chosen.append(field)
        return tuple(chosen)

    def implicit(self, model: ModelIR) -> PresenterIR:
        return PresenterIR(
            name=model.name,
            snake=model.snake,
            implicit=True,
            model=model.name,
            description=model.description,
            fields=model.visible_fields,
            description_rules=_description_rules(model.visible_fields),
        )

    # --- the walk over a schema that paths and expressions share ---------------------------------
    def children(self, field: FieldIR, embed: str | None) -> tuple[FieldIR, ...] | None:
        """The fields inside a model-typed field (through an embed: the child presenter's schema)."""
        if embed is not None and embed in self.fields:
            return self.fields[embed]
        target = field.type.items if field.type.kind == "list" else field.type
        if target is not None and target.kind == "model" and target.model in self.models:
            return self.models[target.model].visible_fields
        return None

    def hidden_names(self, field: FieldIR) -> set[str]:
        return {f.name for f in self.hidden_fields(field)}

    def hidden_fields(self, field: FieldIR) -> tuple[FieldIR, ...]:
        target = field.type.items if field.type.kind == "list" else field.type
        if target is not None and target.kind == "model" and target.model in self.models:
            return tuple(f for f in self.models[target.model].fields if f.hidden)
        return ()

    # --- presenters ------------------------------------------------------------------------------
    def lower(self, name: str, presenter: PresenterSpec, tools: set[str]) -> PresenterIR:
        loc: Loc = ("presenters", name)
        self.lowering.check_identifier(name, loc, "presenter name", value=False)
        fields = self.fields.get(name, ())
        by_name = {f.name: f for f in fields}
        embeds = self.embeds(name, presenter, by_name)
        redactions = self.redactions(presenter, fields, dict(embeds), loc)
        if presenter.limit is not None and presenter.limit < 1:
            self.lowering.error(
                "FG156", f"limit must be at least 1, not {presenter.limit}", (*loc, "limit"), value=True
            )
        context = _ExprContext(self, fields, dict(embeds), self.effective_redactions(name, redactions), loc)
        rules = [
            RuleIR(t)
            for i, text in enumerate(presenter.rules)
            if (t := context.template(text, (*loc, "rules", i), collection=False))
        ]
        for i, conditional in enumerate(presenter.rules_when):
            at = (*loc, "rules_when", i)
            when = context.condition(conditional.when, (*at, "when"), collection=False)
            text = context.template(conditional.rule, (*at, "rule"), collection=False)
            if when and text:
                rules.append(RuleIR(text, when))
        collection_rules = [
            RuleIR(t)
            for i, text in enumerate(presenter.collection_rules)
            if (t := context.template(text, (*loc, "collection_rules", i), collection=True, fields_allowed=False))
        ]
        suggestions = []
        for i, suggestion in enumerate(presenter.suggest):
            at = (*loc, "suggest", i)
            if suggestion.tool not in tools:
                close = difflib.get_close_matches(suggestion.tool, sorted(tools), n=1)
                self.lowering.error(
                    "FG159",
                    f'suggestion names unknown tool "{suggestion.tool}"',
                    (*at, "tool"),
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close else None,
                )
            reason = context.template(suggestion.reason, (*at, "reason"), collection=False)
            when = context.condition(suggestion.when, (*at, "when"), collection=False) if suggestion.when else None
            if reason:
                suggestions.append(SuggestionIR(suggestion.tool, reason, when))
        return PresenterIR(
            name=name,
            snake=self.lowering.snake(name),
            implicit=False,
            model=presenter.model,
            description=self.models[presenter.model].description if presenter.model in self.models else None,
            fields=fields,
            embeds=embeds,
            description_rules=_description_rules(fields),
            rules=tuple(rules),
            collection_rules=tuple(collection_rules),
            redactions=redactions,
            censor=presenter.censor,
            limit=presenter.limit,
            ui=tuple(
                b for i, s in enumerate(presenter.ui) if (b := context.block(s, (*loc, "ui", i), collection=False))
            ),
            collection_ui=tuple(
                b
                for i, s in enumerate(presenter.collection_ui)
                if (b := context.block(s, (*loc, "collection_ui", i), collection=True))
            ),
            suggestions=tuple(suggestions),
            model_reads=tuple(context.reads),
        )

    def embeds(self, name: str, presenter: PresenterSpec, by_name: dict[str, FieldIR]) -> tuple[tuple[str, str], ...]:
        found: list[tuple[str, str]] = []
        for field_name, child in presenter.embed.items():
            at: Loc = ("presenters", name, "embed", field_name)
            field = by_name.get(field_name)
            target = field.type.items if field and field.type.kind == "list" else (field.type if field else None)
            if field is None or target is None or target.kind != "model":
                self.lowering.error(
                    "FG153",
                    f'embed "{field_name}" must name a field of this presenter that holds a model or a list of models',
                    at,
                )
                continue
            if child not in self.spec.presenters:
                close = difflib.get_close_matches(child, list(self.spec.presenters), n=1)
                self.lowering.error(
                    "FG153",
                    f'embed "{field_name}" names unknown presenter "{child}"',
                    at,
                    value=True,
                    hint=f'did you mean "{close[0]}"?' if close else None,
                )
                continue
            child_spec = self.spec.presenters[child]
            if child_spec.model is not None and child_spec.model != target.model:
                self.lowering.error(
                    "FG153",
                    f'presenter "{child}" shapes model "{child_spec.model}", but field '
                    f'"{field_name}" holds "{target.model}"',
                    at,
                    value=True,
                )
                continue
            model = self.models.get(target.model or "")
            leaking = [f for f in (child_spec.schema_ or {}) if model and (m := model.field(f)) and m.hidden]
            if leaking:  # an inline schema would read the hidden field straight from the handler's data
                self.lowering.error(
                    "FG153",
                    f'presenter "{child}" declares "{leaking[0]}", a hidden field of model '
                    f'"{target.model}", which field "{field_name}" holds',
                    at,
                    value=True,
                    hint="hidden fields never leave the server; remove it from the schema",
                )
                continue
            found.append((field_name, child))
        return tuple(found)

    # --- redaction -------------------------------------------------------------------------------
    def effective_redactions(
        self, name: str, own: tuple[RedactionPath, ...], visiting: frozenset[str] = frozenset()
    ) -> tuple[RedactionPath, ...]:
        """A presenter's paths plus those its embedded presenters mask, as paths of this presenter."""
        found = list(own)
        spec = self.spec.presenters[name]
        by_name = {f.name: f for f in self.fields.get(name, ())}
        for field_name, child in spec.embed.items():
            field = by_name.get(field_name)
            if field is None or child not in self.spec.presenters or child in visiting:
                continue
            child_spec = self.spec.presenters[child]
            child_fields = self.fields.get(child, ())
            child_own: list[RedactionPath] = []
            for path in child_spec.redact_pii:
                problem, paths = self.expand(path, child_fields, dict(child_spec.embed))
                child_own.extend(paths if problem is None else [])
            prefix = (field_name, "[*]") if field.type.kind == "list" else (field_name,)
            for path in self.effective_redactions(child, tuple(child_own), visiting | {name}):
                found.append((*prefix, *path))
        return tuple(dict.fromkeys(found))

    def redactions(
        self, presenter: PresenterSpec, fields: tuple[FieldIR, ...], embeds: dict[str, str], loc: Loc
    ) -> tuple[RedactionPath, ...]:
        concrete: list[RedactionPath] = []
        for index, path in enumerate(presenter.redact_pii):
            problem, paths = self.expand(path, fields, embeds)
            if problem:
                self.lowering.error(
                    "FG155", f'redaction path "{path}": {problem}', (*loc, "redact_pii", index), value=True
                )
            concrete.extend(p for p in paths if p not in concrete)
        return tuple(concrete)

    def expand(
        self, path: str, fields: tuple[FieldIR, ...], embeds: dict[str, str]
    ) -> tuple[str | None, list[RedactionPath]]:
        """Expand `a.*.b[*].c` into concrete paths of the schema; a problem is reported, never skipped."""
        segments = path.split(".")
        for segment in segments:
            if not _SEGMENT.match(segment):
                return f'"{segment}" is not a field name, "*" or name[*]', []
        results: list[RedactionPath] = []

        def walk(
            level: tuple[FieldIR, ...], rest: list[str], prefix: RedactionPath, level_embeds: dict[str, str]
        ) -> str | None:
            match = _SEGMENT.match(rest[0])
            assert match is not None
            name, each = match["name"], match["each"].count("[*]")
            candidates = list(level) if name == "*" else [f for f in level if f.name == name]
            if not candidates:
                close = difflib.get_close_matches(name, [f.name for f in level], n=1)
                return f'no field "{name}" here' + (f' (did you mean "{close[0]}"?)' if close else "")
            problems: list[str] = []
            matched = 0
            for field in candidates:
                depth = 1 if field.type.kind == "list" else 0
                if each > depth:
                    problems.append(
                        f'"{field.name}" is a list of single items: one [*] reaches them'
                        if depth
                        else f'"{field.name}" is not a list, so [*] does not apply'
                    )
                    continue
                if name == "*" and depth and each == 0 and len(rest) > 1:
                    each = 1  # "every field of a" includes the items of its list fields: none may slip past
                if field.type.kind == "list" and each == 0 and len(rest) > 1:
                    problems.append(f'"{field.name}" is a list: write {field.name}[*] to reach its items')
                    continue
                here = (*prefix, field.name, *(["[*]"] * each))
                each = match["each"].count("[*]")  # the wildcard's per-field choice above must not stick
                if len(rest) == 1:
                    results.append(here)
                    matched += 1
                    continue
                inner = self.children(field, level_embeds.get(field.name))
                if inner is None:
                    if name != "*":
                        problems.append(f'"{field.name}" has no fields')
                    continue
                child_embeds = (
                    dict(self.lowering.spec.presenters[level_embeds[field.name]].embed)
                    if field.name in level_embeds
                    else {}
                )
                problem = walk(inner, rest[1:], here, child_embeds)
                if problem is None:
                    matched += 1
                elif name != "*":
                    problems.append(problem)
            if name == "*" and matched:
                return None
            return problems[0] if problems else (None if matched else "matches no field")

        problem = walk(fields, segments, (), embeds)
        return problem, results if problem is None else []


class _ExprContext:
    """Compiles one presenter's expressions, with positions inside the spec's strings."""

    def __init__(
        self,
        owner: PresenterLowering,
        fields: tuple[FieldIR, ...],
        embeds: dict[str, str],
        redactions: tuple[RedactionPath, ...],
        loc: Loc,
    ) -> None:
        self.owner = owner
        self.lowering = owner.lowering
        self.fields = fields
        self.embeds = embeds
        self.redactions = redactions
        self.reads: list[tuple[str, ...]] = []  # what model-facing expressions read (checked against parents)
        model = owner.models.get(owner.spec.presenters[loc[1]].model or "") if len(loc) > 1 else None
        self.top_hidden = {f.name: f for f in model.fields if f.hidden} if model else {}

    def resolve(self, path: tuple[str, ...]) -> expr.FieldInfo | None:
        level, embeds, nullable = self.fields, self.embeds, False
        hidden = self.top_hidden
        for depth, name in enumerate(path):
            field = next((f for f in level if f.name == name), None) or hidden.get(name)
            if field is None:
                return None
            hidden = {f.name: f for f in self.owner.hidden_fields(field)}
            nullable = nullable or not field.required or field.nullable
            if depth == len(path) - 1:
                kind = field.cast or field.type.kind
                item = _EXPR_TYPES.get(field.type.items.kind) if field.type.items else None
                return expr.FieldInfo(_EXPR_TYPES[kind], nullable, item)
            if field.type.kind != "model":
                return None
            inner = self.owner.children(field, embeds.get(name))
            if inner is None:
                return None
            embeds = dict(self.owner.spec.presenters[embeds[name]].embed) if name in embeds else {}
            level = inner
        return None

    def hidden_reason(self, path: tuple[str, ...]) -> str | None:
        """Why reading `path` would leak, if it would: it is hidden, or overlaps a redacted path."""
        if path and path[0] in self.top_hidden:
            return f'"{".".join(path)}" is hidden'
        level: tuple[FieldIR, ...] = self.fields
        embeds = self.embeds
        for depth, name in enumerate(path):
            field = next((f for f in level if f.name == name), None)
            if field is None:
                break
            if depth + 1 < len(path) and path[depth + 1] in self.owner.hidden_names(field):
                return f'"{".".join(path)}" is hidden'
            inner = self.owner.children(field, embeds.get(name))
            if inner is None:
                break
            level = inner
        for redacted in self.redactions:
            plain = tuple(s for s in redacted if s != "[*]")
            if plain[: len(path)] == path or path[: len(plain)] == plain:
                written = "".join(s if s == "[*]" else f".{s}" for s in redacted).lstrip(".")
                return f'"{".".join(path)}" is redacted (redact_pii "{written}")'
        return None

    def _compile(
        self, kind: str, text: str, loc: Loc, *, collection: bool, for_user: bool = False, fields_allowed: bool = True
    ) -> ExprIR | None:
        def resolve(path: tuple[str, ...]) -> expr.FieldInfo | None:
            return self.resolve(path) if fields_allowed else None

        compile_fn: Callable[..., expr.Compiled | list[expr.ExprError]] = {
            "template": expr.compile_template,
            "condition": expr.compile_condition,
        }[kind]
        result = compile_fn(text, resolve, access=_access, collection=collection)
        if isinstance(result, list):
            loaded = self.lowering.loaded
            for error in result:
                position = loaded.string_char_at(loc, error.start)
                self.lowering.diagnostics.append(Diagnostic("FG157", error.message, loaded.display_path, position))
            return None
        if not for_user:
            self.reads.extend(p for p in result.paths if p not in self.reads)
            for path in result.paths:
                reason = self.hidden_reason(path)
                if reason:
                    self.lowering.error(
                        "FG158",
                        f"{reason}: it cannot be shown to the model",
                        loc,
                        value=True,
                        hint='mark the block audience = "user", or read another field',
                    )
                    return None
        return ExprIR(text, result.python, result.paths)

    def template(
        self, text: str, loc: Loc, *, collection: bool, for_user: bool = False, fields_allowed: bool = True
    ) -> ExprIR | None:
        return self._compile(
            "template", text, loc, collection=collection, for_user=for_user, fields_allowed=fields_allowed
        )

    def condition(self, text: str, loc: Loc, *, collection: bool) -> ExprIR | None:
        return self._compile("condition", text, loc, collection=collection)

    def block(self, spec: UIBlockSpec, loc: Loc, *, collection: bool) -> UIBlockIR | None:
        user = spec.audience == "user"
        allowed = {
            "table": {"columns", "rows"} if not collection else {"columns", "row"},
            "list": {"items"} if not collection else {"item"},
            "json": {"path"},
            "code": {"text", "language"},
        }.get(spec.type, {"text"})
        given = {
            k
            for k in ("columns", "rows", "row", "text", "items", "item", "path", "language")
            if getattr(spec, k) is not None
        }
        for key in sorted(given - allowed):
            self.lowering.error(
                "FG160",
                f'a {spec.type} block{" of collection_ui" if collection else ""} has no "{key}"',
                (*loc, key),
                hint="its keys: " + ", ".join(sorted(allowed)),
            )
        for key in sorted(allowed - given - {"language", "path"}):
            self.lowering.error("FG160", f'a {spec.type} block needs "{key}"', loc)
        if given - allowed or allowed - given - {"language", "path"}:
            return None
        when = (
            self._compile(
                "condition",
                spec.when,
                (*loc, "when"),
                collection=collection,
                for_user=user,
                fields_allowed=not collection,
            )
            if spec.when
            else None
        )

        def tpl(text: str, at: Loc, per_item: bool = True) -> ExprIR | None:
            # In a collection block, row and item templates see one item; other text sees only count().
            return self.template(
                text, at, collection=collection, for_user=user, fields_allowed=per_item or not collection
            )

        columns = tuple(spec.columns or ())
        rows: list[tuple[ExprIR, ...]] = []
        all_rows = spec.rows or ([spec.row] if spec.row is not None else [])
        bad = False
        for r, row in enumerate(all_rows):
            if len(row) != len(columns):
                cells = f"{len(row)} cell" + ("" if len(row) == 1 else "s")
                self.lowering.error(
                    "FG160",
                    f"a table row has {cells} for {len(columns)} columns",
                    (*loc, "rows", r) if spec.rows is not None else (*loc, "row"),
                )
                bad = True
        if bad:
            return None
        for r, row in enumerate(all_rows):
            at = (*loc, "rows", r) if spec.rows is not None else (*loc, "row")
            cells = [tpl(cell, (*at, c)) for c, cell in enumerate(row)]
            if any(c is None for c in cells):
                return None
            rows.append(tuple(c for c in cells if c is not None))
        text = tpl(spec.text, (*loc, "text"), per_item=False) if spec.text is not None else None
        entries = [tpl(t, (*loc, "items", i)) for i, t in enumerate(spec.items or [])]
        if spec.item is not None:
            entries.append(tpl(spec.item, (*loc, "item")))
        path: tuple[str, ...] = ()
        if spec.path:
            path = tuple(spec.path.split("."))
            if self.resolve(path) is None:
                self.lowering.error(
                    "FG160", f'json block path "{spec.path}" is not a field', (*loc, "path"), value=True
                )
                return None
        if spec.type == "json" and not user:
            self.reads.append(path)  # () reads the whole result: any parent redaction under it is shown
            reason = (
                self.hidden_reason(path)
                if path
                else ("the whole result holds redacted fields" if self.redactions else None)
            )
            if reason:
                self.lowering.error(
                    "FG158",
                    f"{reason}: a json block cannot show it to the model",
                    (*loc, "path") if path else loc,
                    hint='mark the block audience = "user"',
                )
                return None
        if (spec.text is not None and text is None) or any(e is None for e in entries):
            return None
        return UIBlockIR(
            spec.type, user, when, columns, tuple(rows), text, tuple(e for e in entries if e), path, spec.language or ""
        )


def _description_rules(fields: tuple[FieldIR, ...]) -> tuple[str, ...]:
    return tuple(f"{f.name}: {f.description}" for f in fields if f.description)


def check_parent_redactions(lowering: _Lowering, presenters: dict[str, PresenterIR]) -> None:
    """An embedded presenter's rules and blocks reach the model in its parent's result: they must not read
    what the parent redacts (the child alone cannot know; the parent's redact_pii entry is reported)."""

    def reads(name: str, visiting: frozenset[str]) -> list[tuple[str, ...]]:
        presenter = presenters.get(name)
        if presenter is None or name in visiting:
            return []
        found = list(presenter.model_reads)
        for field, child in presenter.embeds:
            found += [(field, *p) for p in reads(child, visiting | {name})]
        return found

    owner = PresenterLowering(lowering, {m.name: m for m in lowering.models})
    owner.fields = lowering.presenter_fields
    for name, presenter in presenters.items():
        spec = lowering.spec.presenters[name]
        for field, child in presenter.embeds:
            child_reads = [(field, *p) for p in reads(child, frozenset({name}))]
            for index, text in enumerate(spec.redact_pii):
                _, own = owner.expand(text, presenter.fields, dict(presenter.embeds))
                for redacted in own:
                    plain = tuple(s for s in redacted if s != "[*]")
                    if plain[:1] != (field,):
                        continue
                    hit = next((r for r in child_reads if r[: len(plain)] == plain or plain[: len(r)] == r), None)
                    if hit is not None:
                        lowering.error(
                            "FG158",
                            f'presenter "{child}" (embedded as "{field}") shows '
                            f'"{".".join(hit)}" to the model, which redact_pii "{text}" masks',
                            ("presenters", name, "redact_pii", index),
                            value=True,
                            hint=f'redact it in "{child}" too, or show it only with audience = "user"',
                        )
                        break
