"""A schema's validation keywords → the spec's constraint keys (docs/spec.md §5.10), checked as `validate` will.

The written spec must validate as written, and a document can say things the spec refuses: a pattern
outside the portable subset, bounds that leave no value, an example its own schema rejects. So every
constraint is checked here with the same functions the spec's lowering uses, and what would be an error
there is left out here, with a warning naming the JSON pointer and a comment at the field.

`exclusiveMinimum`/`exclusiveMaximum` are read by their value, not by the declared version: a boolean is
OpenAPI 3.0's modifier of `minimum`/`maximum`, a number 3.1's (JSON Schema 2020-12) bound of its own.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fusiongen.importers.openapi.document import child
from fusiongen.ir import TypeIR

NUMERIC = {"minimum": "minimum", "maximum": "maximum"}
TEXT = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"}
ITEMS = {"minItems": "min_items", "maxItems": "max_items", "uniqueItems": "unique_items"}
NO_SPEC_KEY = ("multipleOf", "minProperties", "maxProperties", "minContains", "maxContains")
DOCUMENT_KEYS = {
    **{spec: key for family in (NUMERIC, TEXT, ITEMS) for key, spec in family.items()},
    "exclusive_minimum": "exclusiveMinimum",
    "exclusive_maximum": "exclusiveMaximum",
}
APPLIES_TO = {"numeric": ("integer", "number"), "text": ("string",), "items": ("list",)}
PATTERN_CODE = "FG332"  # a pattern outside the portable subset
NOT_CARRIED_CODE = "FG333"  # a constraint the spec has no key for, or one that does not apply to the type
DROPPED_CODE = "FG334"  # a constraint, default or example the spec would refuse (they contradict)


@dataclass(frozen=True)
class Checks:
    """The spec's own checks, given by `api` (importers do not import `lower`): why a pattern is not
    portable, and why a field would refuse a value as its default or example; None when it is fine."""

    pattern_problem: Callable[[str], str | None]
    value_refused: Callable[[Any, TypeIR, bool, dict[str, Any]], str | None]


@dataclass(frozen=True)
class Problem:
    code: str
    pointer: str
    message: str


@dataclass
class Carried:
    """What a schema's validation keywords become: spec constraint keys, and what was left out (and why)."""

    constraints: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def leave_out(self, code: str, pointer: str, message: str) -> None:
        self.problems.append(Problem(code, pointer, message))


def family_keys(family: str) -> dict[str, str]:
    return {"numeric": NUMERIC, "text": TEXT, "items": ITEMS}[family]


def constraints_of(
    checks: Checks, schema: Mapping[str, Any], pointer: str, kind: str, *, value_level: bool = True
) -> Carried:
    """The constraints `schema` (at `pointer`) declares, for a field of spec type `kind`.

    On a list field the array schema's item bounds are its own and its items' value bounds come from the
    item schema (`value_level` False for the array schema: a value bound there means nothing in JSON Schema).
    """
    out = Carried()
    for family in ("numeric", "text", "items"):
        applies = kind in APPLIES_TO[family] and (value_level or family == "items")
        for key, spec_key in family_keys(family).items():
            if key not in schema:
                continue
            if applies:
                out.constraints[spec_key] = schema[key]
            else:
                _not_applicable(out, key, schema[key], child(pointer, key), kind)
    if kind in APPLIES_TO["numeric"] and value_level:
        _exclusive_bounds(out, schema, pointer)
    else:
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if key in schema and schema[key] is not False:
                _not_applicable(out, key, schema[key], child(pointer, key), kind)
    for key in NO_SPEC_KEY:
        if key in schema:
            out.leave_out(
                NOT_CARRIED_CODE, child(pointer, key), f"{key}={_shown(schema[key])} has no spec key; not checked"
            )
    _check_values(out, pointer)
    _check_pattern(checks, out, pointer)
    _check_counts(out, pointer)
    _check_bounds(out, pointer)
    return out


def _not_applicable(out: Carried, key: str, value: Any, pointer: str, kind: str) -> None:
    out.leave_out(
        NOT_CARRIED_CODE,
        pointer,
        f"{key}={_shown(value)} does not apply to {_article(kind)} {kind} field in the spec; not checked",
    )


def _exclusive_bounds(out: Carried, schema: Mapping[str, Any], pointer: str) -> None:
    for key, closed, spec_key in (
        ("exclusiveMinimum", "minimum", "exclusive_minimum"),
        ("exclusiveMaximum", "maximum", "exclusive_maximum"),
    ):
        value = schema.get(key)
        if value is None or value is False:
            continue
        if value is True:  # 3.0: `minimum` itself is excluded
            if closed in out.constraints:
                out.constraints[spec_key] = out.constraints.pop(closed)
            else:
                out.leave_out(DROPPED_CODE, child(pointer, key), f"{key}: true without `{closed}` bounds nothing")
        else:
            out.constraints[spec_key] = value


def _check_values(out: Carried, pointer: str) -> None:
    """Each value has the JSON type its keyword takes (a length is a whole number ≥ 0, a bound finite)."""
    for spec_key, value in list(out.constraints.items()):
        if spec_key == "pattern":
            ok = isinstance(value, str)
        elif spec_key == "unique_items":
            ok = isinstance(value, bool)
        elif spec_key in ("min_length", "max_length", "min_items", "max_items"):
            ok = _whole(value) and value >= 0
            if ok:
                out.constraints[spec_key] = int(value)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok:
            del out.constraints[spec_key]
            out.leave_out(
                DROPPED_CODE,
                child(pointer, _document_key(spec_key)),
                f"{_document_key(spec_key)}={_shown(value)} is not a valid value; not carried",
            )
    if out.constraints.get("unique_items") is False:
        del out.constraints["unique_items"]  # the default


def _whole(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


def _check_pattern(checks: Checks, out: Carried, pointer: str) -> None:
    pattern = out.constraints.get("pattern")
    problem = checks.pattern_problem(pattern) if pattern is not None else None
    if problem is not None:
        del out.constraints["pattern"]  # the warning's comment keeps it in the spec, where the field is
        out.leave_out(
            PATTERN_CODE,
            child(pointer, "pattern"),
            f"pattern {pattern} is not checked, as it is not portable: {problem}",
        )


def _check_counts(out: Carried, pointer: str) -> None:
    for low, high in (("min_length", "max_length"), ("min_items", "max_items")):
        if low in out.constraints and high in out.constraints and out.constraints[low] > out.constraints[high]:
            values = f"{out.constraints.pop(low)} > {out.constraints.pop(high)}"
            out.leave_out(
                DROPPED_CODE,
                child(pointer, _document_key(low)),
                f"{_document_key(low)} {values}: no value fits; neither is carried",
            )


def _check_bounds(out: Carried, pointer: str) -> None:
    c = out.constraints
    lows = [c[k] for k in ("minimum", "exclusive_minimum") if k in c]
    highs = [c[k] for k in ("maximum", "exclusive_maximum") if k in c]
    if not lows or not highs:
        return
    low, high = max(lows), min(highs)
    open_bound = c.get("exclusive_minimum") == low or c.get("exclusive_maximum") == high
    if low > high or (low == high and open_bound):
        for key in ("minimum", "exclusive_minimum", "maximum", "exclusive_maximum"):
            c.pop(key, None)
        out.leave_out(DROPPED_CODE, pointer, f"the bounds {low}..{high} leave no value that fits; none is carried")


def json_value(value: Any) -> Any:
    """A YAML value as JSON would have it: YAML reads `2023-10-29` as a date, the spec wants its text."""
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    return value


def why_refused(
    checks: Checks, value: Any, type_ir: TypeIR, nullable: bool, constraints: Mapping[str, Any]
) -> str | None:
    """Why `validate` would refuse `value` as this field's default or example; None if it would not."""
    why = checks.value_refused(value, type_ir, nullable, dict(constraints))
    return f"{_shown(value)}: {why}" if why else None


def _document_key(spec_key: str) -> str:
    return DOCUMENT_KEYS[spec_key]


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(json_value(value))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
