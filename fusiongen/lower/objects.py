"""Lower inline objects: `{ type = "object", fields = { ... } }` becomes a generated model.

An inline object is a model declared where it is used. Lowering it to a `ModelIR` of its own, named after
where it is declared (`Invoice.address` → `InvoiceAddress`), lets every later phase treat it as the model
it is: hidden and guarded fields, casts, constraints, input parsing with dotted error paths, shaping,
redaction paths, JSON Schemas and reports. Only two things differ from a declared model: its fields say
`hidden`, `guarded` and `cast` themselves (there is no model table to list them in), and its diagnostics
point into the inline table, since every field is lowered at the location it is written.

No user can name a generated model (a type name is looked up among the declared models only), so its name
matters for generated code alone; one that a declared model or another inline object already has is FG198.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fusiongen.ir import CAST_KINDS, ModelIR
from fusiongen.load.loader import Loc
from fusiongen.load.spec import FieldSpec, Spec
from fusiongen.lower.context import LowerContext
from fusiongen.lower.fields import lower_field
from fusiongen.names import pascal_case, snake_case

_NOT_CASTABLE = ("enum", "list", "map", "json", "object")


@dataclass(frozen=True)
class InlineObject:
    """One `{ type = "object", fields = {...} }`, found before anything is lowered."""

    name: str  # the generated model's name: the PascalCase words of where it is declared
    origin: str  # where it is declared, as a person would say it: "Invoice.address", "Invoice.lines[*]"
    loc: Loc  # the table that declares it: a field's, or a list's `items`
    fields: Mapping[str, FieldSpec]

    @property
    def output_only(self) -> bool:
        """Declared in a presenter's schema: its fields describe results, so input constraints are refused."""
        return self.loc[0] == "presenters"


def inline_objects(spec: Spec) -> tuple[InlineObject, ...]:
    """Every inline object of the spec, each parent before the objects inside it, in spec order. A resource's
    inputs are URI variables, so one there is refused (FG182) like a model-typed one."""
    roots: list[tuple[Loc, str, Mapping[str, FieldSpec]]] = [
        *((("models", name, "fields"), name, model.fields) for name, model in spec.models.items()),
        *((("tools", name, "input"), name, tool.input) for name, tool in spec.tools.items()),
        *((("presenters", name, "schema"), name, p.schema_ or {}) for name, p in spec.presenters.items()),
        *((("resources", name, "input"), name, r.input) for name, r in spec.resources.items()),  # refused: FG182
    ]
    return tuple(found for loc, owner, fields in roots for found in _in_fields(fields, loc, (owner,), owner))


def _in_fields(
    fields: Mapping[str, FieldSpec], loc: Loc, words: tuple[str, ...], origin: str
) -> Iterator[InlineObject]:
    for name, spec in fields.items():
        yield from _in_field(spec, (*loc, name), (*words, name), f"{origin}.{name}")


def _in_field(spec: FieldSpec, loc: Loc, words: tuple[str, ...], origin: str) -> Iterator[InlineObject]:
    """`words` name the generated model (`Invoice`, `lines`, `item`), `origin` the place (`Invoice.lines[*]`)."""
    if spec.type == "object" and spec.fields:
        yield InlineObject("".join(pascal_case(w) for w in words), origin, loc, spec.fields)
        yield from _in_fields(spec.fields, (*loc, "fields"), words, origin)
    if spec.type == "list" and spec.items is not None:
        yield from _in_field(spec.items, (*loc, "items"), (*words, "item"), origin + "[*]")


def register_inline_objects(ctx: LowerContext) -> tuple[InlineObject, ...]:
    """Name every inline object in `ctx.inline_models`, so that `lower_type` can resolve each where it is
    declared; a name already taken is FG198 (and the object is not registered: its field is left untyped)."""
    # By name and by the snake_case name its functions get (shape_<snake>), which must not meet either.
    taken = {key: f'model "{name}"' for name in ctx.spec.models for key in (name, snake_case(name))}
    named: list[InlineObject] = []
    for found in inline_objects(ctx.spec):
        snake = snake_case(found.name)
        if found.name in taken or snake in taken:
            whose = (
                f"the name of {taken[found.name]}"
                if found.name in taken
                else f'whose Python name "{snake}" is that of {taken[snake]}'
            )
            ctx.error(
                "FG198",
                f'inline object "{found.origin}" would be generated as model "{found.name}", {whose}',
                found.loc,
                hint="rename the field or the other one",
            )
            continue
        taken |= dict.fromkeys((found.name, snake), f'inline object "{found.origin}"')
        ctx.inline_models[found.loc] = found.name
        ctx.inline_locs[found.name] = found.loc
        named.append(found)
    return tuple(named)


def lower_inline_object(ctx: LowerContext, found: InlineObject) -> ModelIR:
    """The generated model: each field lowered where it is written, with its own hidden, guarded and cast."""
    fields = []
    for name, spec in found.fields.items():
        loc = (*found.loc, "fields", name)
        _refuse_meaningless(ctx, found, name, spec, loc)
        fields.append(
            lower_field(
                ctx,
                name,
                spec,
                loc,
                hidden=bool(spec.hidden),
                guarded=bool(spec.guarded),
                cast=_cast(ctx, name, spec, loc),
                output_only=found.output_only,
                in_object=True,
            )
        )
    return ModelIR(
        name=found.name,
        snake=snake_case(found.name),
        description=None,  # the declaring field's description says what it is, in the schema beside it
        fields=tuple(fields),
        fillable=(),
        origin=found.origin,
    )


# What a member key would mean where the object is declared, when it means nothing there.
_MEANINGLESS = {
    "tools": {"cast": "a tool's input is never sent back, so nothing is cast"},
    "resources": {"cast": "a resource's input is never sent back, so nothing is cast"},
    "presenters": {
        "hidden": "a presenter's schema lists what it shows: leave the field out instead",
        "guarded": "a presenter's schema describes output, which the agent never writes",
    },
}


def _refuse_meaningless(ctx: LowerContext, found: InlineObject, name: str, spec: FieldSpec, loc: Loc) -> None:
    """A member key that would be ignored where the object is declared is FG197, never silently dropped."""
    for key, why in _MEANINGLESS.get(str(found.loc[0]), {}).items():
        if getattr(spec, key) is not None:
            ctx.error("FG197", f'"{key}" on "{name}" of inline object "{found.origin}": {why}', (*loc, key))


def _cast(ctx: LowerContext, name: str, spec: FieldSpec, loc: Loc) -> str | None:
    """The read-time conversion of a field of an inline object, checked as a model's `casts` are (FG125)."""
    if spec.cast is None:
        return None
    if spec.type in _NOT_CASTABLE or spec.type in ctx.spec.models:
        kind = "a model" if spec.type in ctx.spec.models else f"a {spec.type}"
        ctx.error("FG125", f'"{name}" is {kind} field: only scalar fields can be cast', (*loc, "cast"), value=True)
        return None
    if spec.cast not in CAST_KINDS:
        ctx.error(
            "FG125",
            f'cannot cast "{name}" to "{spec.cast}"',
            (*loc, "cast"),
            value=True,
            hint="cast targets: " + ", ".join(CAST_KINDS),
        )
        return None
    return spec.cast
