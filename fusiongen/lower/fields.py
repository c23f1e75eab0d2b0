"""Lower field declarations: types resolved against the models, defaults checked against their types.

Models, tool inputs and inline presenter schemas all declare fields the same way, so they all go
through `lower_field`.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import math
import uuid
from collections.abc import Callable
from typing import Any

from fusiongen.ir import SCALAR_KINDS, ConstraintsIR, FieldIR, TypeIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import FieldSpec
from fusiongen.lower.constraints import lower_constraints, satisfies
from fusiongen.lower.context import LowerContext
from fusiongen.lower.patterns import python_pattern


def lower_type(ctx: LowerContext, name: str, spec: FieldSpec, loc: Loc) -> TypeIR:
    type_loc = (*loc, "type")
    if spec.values is not None and spec.type not in ("enum", "map"):
        ctx.error(
            "FG112", f'"values" only applies to enum and map fields, and this one is {spec.type}', (*loc, "values")
        )
    if spec.type == "map":
        return _map_type(ctx, name, spec, loc)
    if spec.type == "enum" and spec.values is not None and not _strings(spec.values):
        ctx.error("FG112", f'enum field "{name}" needs "values" as a list of strings', (*loc, "values"), value=True)
        return TypeIR("enum", enum_values=("",))
    if spec.items is not None and spec.type != "list":
        ctx.error("FG113", f'"items" only applies to list fields, and this one is {spec.type}', (*loc, "items"))
    if spec.type == "enum":
        if not spec.values:
            at = (*loc, "values") if spec.values is not None else type_loc
            ctx.error("FG112", f'enum field "{name}" needs a non-empty "values" list', at, value=True)
        else:
            seen: set[str] = set()
            for index, value in enumerate(spec.values):
                if value in seen:
                    ctx.error(
                        "FG112", f'enum field "{name}" lists "{value}" twice', (*loc, "values", index), value=True
                    )
                seen.add(value)
        return TypeIR("enum", enum_values=tuple(spec.values or ()))
    if spec.type == "list":
        if spec.items is None:
            ctx.error(
                "FG113", f'list field "{name}" needs "items" (a scalar type or a model name)', type_loc, value=True
            )
            return TypeIR("list", items=TypeIR("string"))
        return TypeIR("list", items=resolve_type_name(ctx, spec.items, (*loc, "items"), in_list=True))
    return resolve_type_name(ctx, spec.type, type_loc)


def _strings(values: object) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)


def _map_type(ctx: LowerContext, name: str, spec: FieldSpec, loc: Loc) -> TypeIR:
    """`{ type = "map", values = "T" }`: an object whose keys the agent or the handler chooses, each value a T."""
    if not isinstance(spec.values, str):
        at = (*loc, "values") if spec.values is not None else (*loc, "type")
        ctx.error(
            "FG112",
            f'map field "{name}" needs "values": the type of its values (a scalar type, json or a model name)',
            at,
            value=True,
        )
        return TypeIR("map", values=TypeIR("string"))
    return TypeIR("map", values=resolve_type_name(ctx, spec.values, (*loc, "values"), in_list=True))


def resolve_type_name(ctx: LowerContext, type_name: str, loc: Loc, *, in_list: bool = False) -> TypeIR:
    if type_name in SCALAR_KINDS and type_name not in ("enum", "list"):
        return TypeIR(type_name)
    if type_name in ctx.spec.models:
        return TypeIR("model", model=type_name)
    if in_list and type_name in ("enum", "list", "map"):
        inside = "map values" if loc[-1] == "values" else "list items"
        ctx.error("FG113", f'{inside} cannot be "{type_name}"; name a scalar type or a model', loc, value=True)
        return TypeIR("string")
    if ctx.withdrawn("models", type_name):
        return TypeIR("string")
    known = [*SCALAR_KINDS, "map", *ctx.spec.models]
    close = difflib.get_close_matches(type_name, known, n=1)
    ctx.error(
        "FG110",
        f'unknown type "{type_name}"',
        loc,
        value=True,
        hint=f'did you mean "{close[0]}"?' if close else "a scalar type or a model name",
    )
    return TypeIR("string")


def lower_field(
    ctx: LowerContext,
    name: str,
    spec: FieldSpec,
    loc: Loc,
    *,
    hidden: bool = False,
    guarded: bool = False,
    cast: str | None = None,
    output_only: bool = False,
) -> FieldIR:
    """`output_only`: the field only describes results (a presenter's inline schema), so input
    constraints would be checked nowhere and are refused."""
    ctx.check_identifier(name, loc, "field name", value=False)
    type_ir = lower_type(ctx, name, spec, loc)
    constraints = lower_constraints(ctx, name, spec, type_ir, loc, output_only=output_only)
    has_default = "default" in spec.model_fields_set
    default = spec.default
    if type_ir.kind in ("date", "datetime") and isinstance(default, datetime.date | datetime.datetime):
        default = default.isoformat()  # a TOML date: the JSON value is its ISO text
    if has_default and not _default_fits(default, type_ir, spec.nullable):
        allowed = " (one of " + ", ".join(f'"{v}"' for v in type_ir.enum_values) + ")" if type_ir.kind == "enum" else ""
        ctx.error("FG114", f'default of "{name}" is not a valid {type_ir.kind}{allowed}', (*loc, "default"), value=True)
    elif has_default and (why := satisfies(default, constraints, type_ir)):
        ctx.error("FG114", f'default of "{name}" breaks its constraints: {why}', (*loc, "default"), value=True)
    constraints = dataclasses.replace(
        constraints, examples=_fitting_examples(ctx, name, spec, type_ir, constraints, loc)
    )
    return FieldIR(
        name=name,
        type=type_ir,
        description=spec.description,
        required=spec.required and not has_default,
        nullable=spec.nullable,
        has_default=has_default,
        default=default,
        hidden=hidden,
        guarded=guarded,
        cast=cast,
        constraints=constraints,
    )


def _fitting_examples(
    ctx: LowerContext, name: str, spec: FieldSpec, type_ir: TypeIR, constraints: ConstraintsIR, loc: Loc
) -> tuple[Any, ...]:
    """The examples as JSON values. One the field would refuse teaches the agent to send something
    wrong, so each must fit: a diagnostic for each that does not."""
    fitting: list[Any] = []
    for index, example in enumerate(spec.examples or ()):
        if isinstance(example, datetime.date | datetime.datetime) and type_ir.kind in ("date", "datetime"):
            example = example.isoformat()
        fits = _default_fits(example, type_ir, spec.nullable)
        why = satisfies(example, constraints, type_ir) if fits else f"it is not a valid {type_ir.kind}"
        if why:
            ctx.error(
                "FG119",
                f'example {index + 1} of "{name}" does not fit the field: {why}',
                (*loc, "examples", index),
                value=True,
            )
        else:
            fitting.append(example)
    return tuple(fitting)


def _json_value(value: object) -> bool:
    """Whether a default can be written as JSON (and so as a Python literal): no dates, no nan or inf."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


def _default_fits(value: object, type_ir: TypeIR, nullable: bool) -> bool:
    if not _json_value(value):
        return False
    if value is None:
        return nullable
    kind = type_ir.kind
    if kind == "json":
        return True  # any JSON value (checked above)
    if kind in ("date", "datetime", "uuid") and isinstance(value, str):
        parsers: dict[str, Callable[[str], object]] = {
            "date": datetime.date.fromisoformat,
            "datetime": datetime.datetime.fromisoformat,
            "uuid": uuid.UUID,
        }
        parse = parsers[kind]
        try:
            parse(value)
        except ValueError:
            return False
        return len(value) == 10 if kind == "date" else (kind != "datetime" or "T" in value)
    if kind in ("string", "text"):
        return isinstance(value, str)
    if kind == "enum":
        return value in type_ir.enum_values
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list) and all(
            type_ir.items is not None and _default_fits(v, type_ir.items, False) for v in value
        )
    if kind == "map":
        return isinstance(value, dict) and all(
            type_ir.values is not None and _default_fits(v, type_ir.values, False) for v in value.values()
        )
    return isinstance(value, dict)


def value_refused(value: Any, type_ir: TypeIR, nullable: bool, constraints: dict[str, Any]) -> str | None:
    """Why a field of this type and these constraints (spec keys, already consistent) would refuse `value` as
    its default or example (FG114, FG119), or None: for importers, so that what they write validates."""
    if not _default_fits(value, type_ir, nullable):
        return f"it is not a valid {type_ir.kind}"
    pattern = constraints.get("pattern")
    checked = ConstraintsIR(
        **{k: v for k, v in constraints.items() if k != "pattern"},
        pattern=pattern,
        python_pattern=python_pattern(pattern) if pattern is not None else None,
    )
    return satisfies(value, checked, type_ir)
