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

from fusiongen.ir import FieldIR, ModelIR, RedactionPath
from fusiongen.load.spec import PresenterSpec

_SEGMENT = re.compile(r"(?P<name>\*|[A-Za-z_][A-Za-z0-9_]*)(?P<each>(\[\*\])*)\Z")


@dataclass(frozen=True)
class PresenterScope:
    models: Mapping[str, ModelIR]
    schemas: Mapping[str, tuple[FieldIR, ...]]  # presenter → its schema
    specs: Mapping[str, PresenterSpec]

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
                child_embeds = dict(self.specs[level_embeds[field.name]].embed) if field.name in level_embeds else {}
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
