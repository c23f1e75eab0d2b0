"""The presenters' schemas as one tree to walk: what lies inside a field, what is hidden there, and
which concrete paths a redaction path names.

Built once from the models and every presenter's schema, before any presenter is lowered, so that
a presenter, its expressions and its parents' redaction checks all see the same schemas.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from fusiongen.ir import FieldIR, ModelIR, RedactionPath
from fusiongen.load.spec import PresenterSpec

_SEGMENT = re.compile(r"(?P<name>\*|[A-Za-z_][A-Za-z0-9_]*)(?P<each>(\[\*\])*)\Z")


@dataclass(frozen=True)
class PresenterScope:
    models: Mapping[str, ModelIR]
    schemas: Mapping[str, tuple[FieldIR, ...]]  # presenter → its schema
    specs: Mapping[str, PresenterSpec]
    # hidden_leak's answers by (source kind, source, model): every embed edge asks about its subtree.
    _leaks: dict[tuple[str, str, str], tuple[tuple[str, ...], str] | None] = dataclass_field(
        default_factory=dict, compare=False, repr=False
    )

    def children(self, field: FieldIR, embed: str | None) -> tuple[FieldIR, ...] | None:
        """The fields inside a model-typed field (through an embed: the child presenter's schema)."""
        if embed is not None and embed in self.schemas:
            return self.schemas[embed]
        target = field.type.items if field.type.kind == "list" else field.type
        model = self.models.get(target.model or "") if target is not None and target.kind == "model" else None
        if model is not None:
            return model.visible_fields
        return None

    def hidden_names(self, field: FieldIR) -> set[str]:
        return {f.name for f in self.hidden_fields(field)}

    def hidden_fields(self, field: FieldIR) -> tuple[FieldIR, ...]:
        target = field.type.items if field.type.kind == "list" else field.type
        model = self.models.get(target.model or "") if target is not None and target.kind == "model" else None
        if model is not None:
            return tuple(f for f in model.fields if f.hidden)
        return ()

    def hidden_leak(self, presenter: str, model: str) -> tuple[tuple[str, ...], str] | None:
        """Whether presenter `presenter`, shaping data of model `model`, would show a field that model
        hides, at any depth: (the path it shows, the model hiding its last segment), or None.

        An inline schema is a declaration of its own, so its fields, the models it types them with and
        the presenters it embeds are checked against the real model's fields, all the way down (a hidden
        field of a nested model would otherwise be read straight from the handler's data)."""
        return self._leak(("presenter", presenter), model, set())

    def _outputs(self, source: tuple[str, str]) -> tuple[tuple[FieldIR, tuple[str, str] | None], ...]:
        """What a presenter's schema or a model's shape writes: each field and how its inside is shaped."""
        kind, name = source
        if kind == "presenter":
            fields, embeds = self.schemas.get(name, ()), dict(self.specs[name].embed) if name in self.specs else {}
        else:
            fields, embeds = (m.visible_fields if (m := self.models.get(name)) else ()), {}
        found = []
        for field in fields:
            inner: tuple[str, str] | None = None
            if field.name in embeds and embeds[field.name] in self.specs:
                inner = ("presenter", embeds[field.name])
            elif field.type.models:
                inner = ("model", field.type.models[0])
            found.append((field, inner))
        return tuple(found)

    def _leak(
        self, source: tuple[str, str], model: str, active: set[tuple[str, str, str]]
    ) -> tuple[tuple[str, ...], str] | None:
        found, _ = self._leak_walk(source, model, active)
        return found

    def _leak_walk(
        self, source: tuple[str, str], model: str, active: set[tuple[str, str, str]]
    ) -> tuple[tuple[tuple[str, ...], str] | None, bool]:
        """(the leak, whether the answer is complete): a walk cut short by a pair already on the stack
        (recursive models) is not memoized, so a later question about that pair is answered in full."""
        key = (*source, model)
        real = self.models.get(model)
        if real is None or source == ("model", model):  # a model's own shape is safe
            return None, True
        if key in self._leaks:
            return self._leaks[key], True
        if key in active:  # being checked further up: anything found through it is found there
            return None, False
        active.add(key)
        complete = True
        result: tuple[tuple[str, ...], str] | None = None
        for field, inner in self._outputs(source):
            declared = real.field(field.name)
            if declared is None:
                continue
            if declared.hidden:
                result = (field.name,), model
                break
            if inner is not None and declared.type.models:
                found, whole = self._leak_walk(inner, declared.type.models[0], active)
                complete = complete and whole
                if found is not None:
                    result = (field.name, *found[0]), found[1]
                    break
        active.discard(key)
        if result is not None or complete:
            self._leaks[key] = result
        return result, result is not None or complete

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
                    if name != "*" and json_kind(field):
                        problems.append(
                            f'"{field.name}" is a json field: its contents are not declared, so only the whole '
                            "field can be redacted"
                        )
                    elif name != "*" and field.type.kind == "map":
                        problems.append(
                            f'"{field.name}" is a map: its keys are data, not declared fields, so only the whole '
                            "field can be redacted"
                        )
                    elif name != "*":
                        problems.append(f'"{field.name}" has no fields')
                    continue
                # An embed naming a presenter the spec lost to a shape mistake (reported already) embeds nothing.
                embedded = self.specs.get(level_embeds.get(field.name, ""))
                child_embeds = dict(embedded.embed) if embedded is not None else {}
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


def json_kind(field: FieldIR) -> bool:
    """Whether the field holds undeclared JSON (`json`, or a list or map of it)."""
    return field.type.element.kind == "json"
