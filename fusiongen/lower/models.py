"""Lower models: fields, hidden and guarded names, casts and the fillable operations, each checked.

A model is the domain declared once: what is hidden never leaves the server, what is guarded is never
writable, and each operation accepts only its fillable fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fusiongen.ir import CAST_KINDS, SCALAR_KINDS, FieldIR, ModelIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import FieldSpec, ModelSpec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.fields import lower_field
from fusiongen.lower.objects import InlineObject, lower_inline_object, register_inline_objects
from fusiongen.names import snake_case


def lower_models(ctx: LowerContext) -> tuple[ModelIR, ...]:
    """The declared models, each followed by the inline objects declared in it, then the inline objects of
    tool inputs and presenter schemas: every model generated code defines, in an order a reader can follow."""
    in_models: dict[str | int, list[InlineObject]] = {}
    elsewhere: list[InlineObject] = []
    for found in register_inline_objects(ctx):
        (in_models.setdefault(found.loc[1], []) if found.loc[0] == "models" else elsewhere).append(found)
    lowered: list[ModelIR] = []
    for name, model in ctx.spec.models.items():
        lowered.append(lower_model(ctx, name, model))
        lowered += (_lower_inline(ctx, found) for found in in_models.get(name, ()))
    lowered += (_lower_inline(ctx, found) for found in elsewhere)
    return tuple(lowered)


def _lower_inline(ctx: LowerContext, found: InlineObject) -> ModelIR:
    model = lower_inline_object(ctx, found)
    _warn_json_beside_hidden(ctx, f'inline object "{found.origin}"', model.fields, (*found.loc, "fields"))
    return model


def lower_model(ctx: LowerContext, name: str, model: ModelSpec) -> ModelIR:
    loc: Loc = ("models", name)
    ctx.check_identifier(name, loc, "model name", value=False)
    declared = model.fields
    _check_names(ctx, name, model.hidden, declared, ("models", name, "hidden"), "FG120", "hidden")
    _check_names(ctx, name, model.guarded, declared, ("models", name, "guarded"), "FG121", "guarded")
    for cast_field, target in model.casts.items():
        declared_type = declared[cast_field].type if cast_field in declared else None
        if declared_type in ("enum", "list", "map", "json", "object") or declared_type in ctx.spec.models:
            kind = "a model" if declared_type in ctx.spec.models else f"a {declared_type}"
            ctx.error(
                "FG125",
                f'"{cast_field}" is {kind} field: only scalar fields can be cast',
                (*loc, "casts", cast_field),
                value=True,
            )
        if cast_field not in declared:
            ctx.unknown_field("FG123", "casts", name, cast_field, declared, (*loc, "casts", cast_field), value=False)
        if target not in CAST_KINDS:
            ctx.error(
                "FG125",
                f'cannot cast "{cast_field}" to "{target}"',
                (*loc, "casts", cast_field),
                value=True,
                hint="cast targets: " + ", ".join(CAST_KINDS),
            )
    guarded = set(model.guarded)
    for operation, names in model.fillable.items():
        op_loc = (*loc, "fillable", operation)
        ctx.check_identifier(operation, op_loc, "operation name", value=False)
        _check_names(ctx, name, names, declared, op_loc, "FG122", f"fillable.{operation}")
        for index, field_name in enumerate(names):
            if field_name in guarded:
                ctx.error(
                    "FG124",
                    f'field "{field_name}" of model "{name}" is both guarded and fillable ("{operation}")',
                    (*op_loc, index),
                    hint="a guarded field can never be written; remove it from one of the lists",
                )
    fields = tuple(
        lower_field(
            ctx,
            field_name,
            spec,
            ("models", name, "fields", field_name),
            hidden=field_name in model.hidden,
            guarded=field_name in guarded,
            cast=_cast(model.casts.get(field_name), spec.type),
        )
        for field_name, spec in declared.items()
    )
    _warn_json_beside_hidden(ctx, f'model "{name}"', fields, ("models", name, "fields"))
    return ModelIR(
        name=name,
        snake=snake_case(name),
        description=model.description,
        fields=fields,
        fillable=tuple((op, tuple(n for n in names if n in declared)) for op, names in model.fillable.items()),
    )


def _check_names(
    ctx: LowerContext,
    model: str,
    names: Iterable[str],
    declared: Mapping[str, FieldSpec],
    loc: Loc,
    code: str,
    what: str,
) -> None:
    for index, field_name in enumerate(names):
        if field_name not in declared:
            ctx.unknown_field(code, what, model, field_name, declared, (*loc, index))


def _warn_json_beside_hidden(ctx: LowerContext, owner: str, fields: tuple[FieldIR, ...], fields_loc: Loc) -> None:
    """A model with hidden fields holds data that must not all be shown. A visible `json` field is sent as the
    handler returns it (checked only to be plain JSON), so fusiongen cannot keep those values out of it:
    copying the record, or part of it, into the field would send them. Warned, since a json field of
    unrelated content is legitimate; the warning says how to make the guarantee hold."""
    hidden = [f.name for f in fields if f.hidden]
    if not hidden:
        return
    for field in fields:
        if field.type.element.kind == "json" and not field.type.element.unknown and not field.hidden:
            ctx.warning(
                "FG126",
                f'json field "{field.name}" of {owner} is sent as the handler returns it, beside hidden '
                + ", ".join(f'"{h}"' for h in hidden)
                + ": fusiongen cannot keep hidden values out of it",
                (*fields_loc, field.name),
                hint="declare its fields (a model, whose own hidden list applies), or hide it",
            )


def _cast(target: str | None, declared_type: str) -> str | None:
    """The cast to compile: only valid targets, only on scalar fields (others are diagnostics)."""
    scalar = declared_type in SCALAR_KINDS and declared_type not in ("enum", "list", "json")
    return target if target in CAST_KINDS and scalar else None
