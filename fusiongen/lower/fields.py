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
    if spec.fields is not None and spec.type != "object":
        _fields_without_object(ctx, spec, loc)
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
        return TypeIR("list", items=_item_type(ctx, name, spec.items, (*loc, "items")))
    if spec.type == "object":
        return _object_type(ctx, f'object field "{name}" needs', spec, loc)
    return resolve_type_name(ctx, spec.type, type_loc)


# What a list's `items` table may say: its type, and an inline object's fields. Bounds and descriptions
# belong to the list field, where they already apply to every item.
_ITEM_KEYS = frozenset({"type", "fields"})


def _item_type(ctx: LowerContext, name: str, items: FieldSpec, loc: Loc) -> TypeIR:
    """`items = "T"` (short for `{ type = "T" }`) or `items = { type = "object", fields = {...} }`."""
    for key in sorted(items.model_fields_set - _ITEM_KEYS, key=list(FieldSpec.model_fields).index):
        ctx.error(
            "FG199",
            f'"{key}" in the items of "{name}": a list\'s items table declares only their type (and an inline '
            "object's fields)",
            (*loc, key),
            hint=f'put "{key}" on the list field "{name}": it applies to every item from there'
            if key not in ("hidden", "guarded", "cast")
            else f'"{key}" belongs on a field inside the object',
        )
    if items.type == "object":
        return _object_type(ctx, f'the items of "{name}" need', items, loc)
    if items.fields is not None:
        _fields_without_object(ctx, items, loc)
    return resolve_type_name(ctx, items.type, (*loc, "type"), in_list=True)


def _object_type(ctx: LowerContext, what_needs: str, spec: FieldSpec, loc: Loc) -> TypeIR:
    """An inline object: the model generated for it, which lower/objects.py registered under `loc`. Without
    one the field is lowered as json, which fits any default, so no second diagnostic follows the first."""
    generated = ctx.inline_models.get(loc)
    if generated is not None:
        return TypeIR("model", model=generated, inline=True)
    if not spec.fields:  # else its name was taken (FG198, already reported)
        ctx.error(
            "FG196",
            f'{what_needs} "fields": a table of at least one field',
            (*loc, "fields") if spec.fields is not None else (*loc, "type"),
            value=True,
            hint='e.g. { type = "object", fields = { street = "string" } }, or name a model as its type',
        )
    return TypeIR("json")


def _fields_without_object(ctx: LowerContext, spec: FieldSpec, loc: Loc) -> None:
    ctx.error(
        "FG195",
        f'"fields" only applies to object fields, and this one is {spec.type}',
        (*loc, "fields"),
        hint='write type = "object" to declare an inline object',
    )


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
    if type_name == "object":  # a map's values: inline objects are declared in fields and list items only
        ctx.error(
            "FG196",
            'map values cannot be an inline object: "values" names a type',
            loc,
            value=True,
            hint="declare the object as a model and name it",
        )
        return TypeIR("json")
    if in_list and type_name in ("enum", "list", "map"):
        inside = "map values" if loc[-1] == "values" else "list items"
        ctx.error("FG113", f'{inside} cannot be "{type_name}"; name a scalar type or a model', loc, value=True)
        return TypeIR("string")
    if ctx.withdrawn("models", type_name):
        return TypeIR("json", unknown=True)
    known = [*SCALAR_KINDS, "map", "object", *ctx.spec.models]
    close = difflib.get_close_matches(type_name, known, n=1)
    ctx.error(
        "FG110",
        f'unknown type "{type_name}"',
        loc,
        value=True,
        hint=f'did you mean "{close[0]}"?' if close else "a scalar type or a model name",
    )
    return TypeIR("json", unknown=True)


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
    in_object: bool = False,
) -> FieldIR:
    """`output_only`: the field only describes results (a presenter's inline schema), so input
    constraints would be checked nowhere and are refused. `in_object`: a field of an inline object, the
    only place where a field says `hidden`, `guarded` or `cast` itself."""
    ctx.check_identifier(name, loc, "field name", value=False)
    if not in_object:
        _refuse_member_keys(ctx, name, spec, loc)
    type_ir = lower_type(ctx, name, spec, loc)
    if type_ir.element.unknown:  # reported once (FG110): its constraints, default and examples are not judged
        return FieldIR(
            name=name,
            type=type_ir,
            description=spec.description,
            required=spec.required,
            nullable=spec.nullable,
            hidden=hidden,
            guarded=guarded,
            cast=cast,
        )
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


_MEMBER_KEYS = {"hidden": "hidden = [...]", "guarded": "guarded = [...]", "cast": "casts = { ... }"}


def _refuse_member_keys(ctx: LowerContext, name: str, spec: FieldSpec, loc: Loc) -> None:
    """`hidden`, `guarded` and `cast` on a field are what a model's lists say, for the fields of an inline
    object, which has no model table to list them in. Anywhere else they would be a second way to say the
    same, or (on a tool input) mean nothing: FG197, never silently ignored."""
    for key, model_key in _MEMBER_KEYS.items():
        if getattr(spec, key) is None:
            continue
        hint = f"a model lists them: {model_key} in [models.{loc[1]}]" if loc[0] == "models" else None
        ctx.error(
            "FG197",
            f'"{key}" on "{name}": only the fields of an inline object say "{key}" themselves',
            (*loc, key),
            hint=hint,
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
