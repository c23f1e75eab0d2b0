"""Lower a field's constraints (`minimum`, `max_length`, `pattern`, `min_items`, `examples`...).

Each constraint is checked against the field's type here, so generated code never has to wonder
whether `max_length` on an integer means something: it is a diagnostic instead. On a list field the
numeric and text constraints bound every item and the item constraints bound the list.
"""

from __future__ import annotations

import math
import re
from typing import Any

from fusiongen.ir import ConstraintsIR, TypeIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import FieldSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.patterns import PatternError, python_pattern

NUMERIC_KEYS = ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum")
TEXT_KEYS = ("min_length", "max_length", "pattern")
ITEM_KEYS = ("min_items", "max_items", "unique_items")
CONSTRAINT_KEYS = (*NUMERIC_KEYS, *TEXT_KEYS, *ITEM_KEYS)
_APPLIES_TO = {
    **dict.fromkeys(NUMERIC_KEYS, ("integer", "number")),
    **dict.fromkeys(TEXT_KEYS, ("string", "text")),
    **dict.fromkeys(ITEM_KEYS, ("list",)),
}


def lower_constraints(
    ctx: LowerContext, name: str, spec: FieldSpec, type_ir: TypeIR, loc: Loc, *, output_only: bool
) -> ConstraintsIR:
    """The constraints that fit the field's type; a diagnostic for each that does not, or that contradicts another."""
    declared = {key: _integral(getattr(spec, key)) for key in CONSTRAINT_KEYS if getattr(spec, key) is not None}
    if output_only and declared:
        for key in declared:
            ctx.error(
                "FG115",
                f'"{key}" on "{name}": constraints are checked on input, and a presenter\'s schema describes output',
                (*loc, key),
                hint="declare the constraint on the model field or the tool input instead",
            )
        return ConstraintsIR(examples=tuple(spec.examples or ()))
    fitting = {key: value for key, value in declared.items() if _applies(ctx, name, key, type_ir, loc)}
    _check_counts(ctx, name, fitting, loc)
    _check_bounds(ctx, name, fitting, loc)
    python = _check_pattern(ctx, fitting.get("pattern"), (*loc, "pattern"))
    if "pattern" in fitting and python is None:
        del fitting["pattern"]
    return ConstraintsIR(
        **{k: v for k, v in fitting.items() if k != "unique_items"},
        unique_items=bool(fitting.get("unique_items")),
        python_pattern=python,
        examples=tuple(spec.examples or ()),
    )


def _integral(value: Any) -> Any:
    """A bound as written: `minimum = 1` arrives as 1.0 (the spec's bounds are floats) and goes back to 1."""
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _applies(ctx: LowerContext, name: str, key: str, type_ir: TypeIR, loc: Loc) -> bool:
    kinds = _APPLIES_TO[key]
    kind = type_ir.kind
    if kind == "list" and key not in ITEM_KEYS and type_ir.items is not None:
        kind = type_ir.items.kind  # a list's value bounds apply to each item
    if kind in kinds:
        return True
    on = f"a list of {kind}" if type_ir.kind == "list" and key not in ITEM_KEYS else kind
    ctx.error(
        "FG115",
        f'"{key}" does not apply to "{name}", which is {on}',
        (*loc, key),
        hint=f'"{key}" applies to '
        + " and ".join(kinds)
        + (" fields (and lists of them)" if kinds != ("list",) else " fields"),
    )
    return False


def _check_counts(ctx: LowerContext, name: str, fitting: dict[str, Any], loc: Loc) -> None:
    for key in ("min_length", "max_length", "min_items", "max_items"):
        if key in fitting and fitting[key] < 0:
            ctx.error("FG118", f'"{key}" of "{name}" is negative', (*loc, key), value=True)
            del fitting[key]
    for low, high in (("min_length", "max_length"), ("min_items", "max_items")):
        if low in fitting and high in fitting and fitting[low] > fitting[high]:
            ctx.error(
                "FG116",
                f'"{low}" of "{name}" ({fitting[low]}) is greater than "{high}" ({fitting[high]}): no value fits',
                (*loc, low),
                value=True,
            )


def _check_bounds(ctx: LowerContext, name: str, fitting: dict[str, Any], loc: Loc) -> None:
    for key in NUMERIC_KEYS:
        if key in fitting and not math.isfinite(fitting[key]):
            ctx.error("FG116", f'"{key}" of "{name}" must be a finite number', (*loc, key), value=True)
            del fitting[key]
    low = _tightest(fitting, "minimum", "exclusive_minimum", max)
    high = _tightest(fitting, "maximum", "exclusive_maximum", min)
    if low is None or high is None:
        return
    (low_key, low_value), (high_key, high_value) = low, high
    open_bound = low_key.startswith("exclusive") or high_key.startswith("exclusive")
    if low_value > high_value or (low_value == high_value and open_bound):
        ctx.error(
            "FG116",
            f'"{low_key}" ({low_value}) and "{high_key}" ({high_value}) of "{name}" leave no value that fits',
            (*loc, low_key),
            value=True,
        )


def _tightest(fitting: dict[str, Any], closed: str, open_: str, pick: Any) -> tuple[str, Any] | None:
    """The bound that decides, of `minimum`/`exclusive_minimum` (or the maxima); exclusive wins a tie."""
    bounds = [(key, fitting[key]) for key in (open_, closed) if key in fitting]
    if not bounds:
        return None
    best = pick(value for _, value in bounds)
    return next((key, value) for key, value in bounds if value == best)


def _check_pattern(ctx: LowerContext, pattern: str | None, loc: Loc) -> str | None:
    if pattern is None:
        return None
    try:
        return python_pattern(pattern)
    except PatternError as exc:
        ctx.error(
            "FG117",
            f'pattern "{pattern}" cannot be used: {exc}',
            loc,
            value=True,
            hint="patterns are ECMA-262 regular expressions (JSON Schema's dialect) in the subset Python reads "
            "the same way; see docs/spec.md",
        )
        return None


def satisfies(value: Any, constraints: ConstraintsIR, type_ir: TypeIR) -> str | None:
    """Why a value of the right type (a default, an example) breaks the constraints, or None if it keeps them."""
    if type_ir.kind == "list":
        if not isinstance(value, list):
            return None
        if constraints.min_items is not None and len(value) < constraints.min_items:
            return f"it has fewer than {constraints.min_items} items"
        if constraints.max_items is not None and len(value) > constraints.max_items:
            return f"it has more than {constraints.max_items} items"
        if constraints.unique_items and len({repr(v) for v in value}) < len(value):
            return "its items are not unique"
        assert type_ir.items is not None
        return next((why for v in value if (why := satisfies(v, constraints, type_ir.items))), None)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _number_breaks(value, constraints)
    if isinstance(value, str):
        return _text_breaks(value, constraints)
    return None


def _number_breaks(value: float, c: ConstraintsIR) -> str | None:
    if c.minimum is not None and value < c.minimum:
        return f"it is less than the minimum {c.minimum}"
    if c.maximum is not None and value > c.maximum:
        return f"it is greater than the maximum {c.maximum}"
    if c.exclusive_minimum is not None and value <= c.exclusive_minimum:
        return f"it is not greater than {c.exclusive_minimum}"
    if c.exclusive_maximum is not None and value >= c.exclusive_maximum:
        return f"it is not less than {c.exclusive_maximum}"
    return None


def _text_breaks(value: str, c: ConstraintsIR) -> str | None:
    if c.min_length is not None and len(value) < c.min_length:
        return f"it is shorter than {c.min_length} characters"
    if c.max_length is not None and len(value) > c.max_length:
        return f"it is longer than {c.max_length} characters"
    if c.python_pattern is not None and not re.search(c.python_pattern, value, re.ASCII):
        return f"it does not match the pattern {c.pattern}"
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is outside the portable subset (FG117), or None: for importers, so what they write validates."""
    try:
        python_pattern(pattern)
    except PatternError as exc:
        return str(exc)
    return None
