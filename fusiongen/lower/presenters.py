"""Lower presenters: schemas, embeds, redaction paths and expressions, checked against each other.

Everything a presenter does at run time is decided here: redaction paths are expanded into concrete
paths of the schema (so masking is straight-line code), and every `{…}` and `when` is compiled to
Python by `fusiongen.expr`. A block, rule or suggestion that reaches the model may not read a hidden
or redacted field: that is a build error, not a leak found in production.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from fusiongen.ir import FieldIR, ModelIR, PresenterIR, RedactionPath, RuleIR, SuggestionIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import PresenterSpec
from fusiongen.lower.expressions import PresenterExpressions

if TYPE_CHECKING:
    from fusiongen.lower.server import _Lowering

_SEGMENT = re.compile(r"(?P<name>\*|[A-Za-z_][A-Za-z0-9_]*)(?P<each>(\[\*\])*)\Z")
_TEXT_BLOCKS = ("markdown", "mermaid", "code", "summary")


class PresenterLowering:
    def __init__(self, lowering: _Lowering, models: dict[str, ModelIR]) -> None:
        self.lowering = lowering
        self.spec = lowering.spec
        self.models = models
        self.fields: dict[str, tuple[FieldIR, ...]] = {}  # presenter → its schema, resolved before anything else
        self._embedded_memo: dict[str, tuple[RedactionPath, ...]] = {}

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
        context = PresenterExpressions(self, fields, dict(embeds), self.effective_redactions(name, redactions), loc)
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
        return tuple(dict.fromkeys([*own, *self.embedded_redactions(name, visiting)]))

    def embedded_redactions(self, name: str, visiting: frozenset[str]) -> tuple[RedactionPath, ...]:
        """What the presenters embedded in `name` mask, as paths of `name` (memoized: embeds may share)."""
        if name in self._embedded_memo:
            return self._embedded_memo[name]
        found: list[RedactionPath] = []
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
        result = tuple(dict.fromkeys(found))
        if not visiting:  # a result computed inside a cycle check may be partial: keep only whole ones
            self._embedded_memo[name] = result
        return result

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


def _description_rules(fields: tuple[FieldIR, ...]) -> tuple[str, ...]:
    return tuple(f"{f.name}: {f.description}" for f in fields if f.description)


def check_parent_redactions(lowering: _Lowering, presenters: dict[str, PresenterIR]) -> None:
    """An embedded presenter's rules and blocks reach the model in its parent's result: they must not read
    what the parent redacts (the child alone cannot know; the parent's redact_pii entry is reported)."""

    memo: dict[str, list[tuple[str, ...]]] = {}

    def reads(name: str, visiting: frozenset[str]) -> list[tuple[str, ...]]:
        presenter = presenters.get(name)
        if presenter is None or name in visiting:
            return []
        if name in memo:
            return memo[name]
        found = list(presenter.model_reads)
        for field, child in presenter.embeds:
            found += [(field, *p) for p in reads(child, visiting | {name})]
        memo[name] = found = list(dict.fromkeys(found))
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
