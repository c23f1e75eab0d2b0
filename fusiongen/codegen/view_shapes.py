"""The view of shapes.py: one function per model that reads exactly its declared, visible fields.

A shape's code is the generated server's hot path, so each field's conversion is a straight-line
expression chosen here (the common types inline, the rest through a checking helper of the runtime).
Presenters ask for the shapes of the models they nest; `ShapeViews` collects them in order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fusiongen.codegen.constants import ConstantView, enum_constant
from fusiongen.ir import FieldIR, ModelIR, ServerIR, TypeIR
from fusiongen.pyliteral import docstring_text, py_string


@dataclass(frozen=True)
class OutputFieldView:
    key: str  # the field name as a Python string literal
    required: bool
    nullable: bool
    convert: str  # expression converting `value`; may raise OutputError


@dataclass(frozen=True)
class ExactFieldView:
    key: str  # the field name as a Python string literal
    type: str  # the one Python type its value is sent as is: str, int or bool
    local: str  # the local variable holding its value: `name_` cannot shadow anything (as in inputs.py)


@dataclass(frozen=True)
class ShapeView:
    function: str
    model: str
    description: str
    fields: tuple[OutputFieldView, ...]
    # Every field a required, non-null str, int or bool sent as is: a dict holding exactly those types is read
    # into locals and copied in one expression, before the field-by-field path (empty: no such shortcut).
    exact: tuple[ExactFieldView, ...] = ()
    # `shape_list_of_x`, for a model with the exact shortcut that some field holds a list of: its exact items shaped
    # inline, one call a list rather than one an item (None: no such function).
    list_function: str | None = None


class ShapeViews:
    """The shape functions the server needs, added as presenters and other shapes ask for them."""

    def __init__(self, server: ServerIR) -> None:
        self.server = server
        self.output_constants: dict[str, ConstantView] = {}
        self.shape_models: list[str] = []
        self.list_models: set[str] = set()

    def want_shape(self, model: str) -> str:
        if model not in self.shape_models:
            self.shape_models.append(model)
        return f"shape_{self.server.model(model).snake}"

    def want_list_shape(self, model: str) -> str | None:
        """The list shape of `model` (`shape_list_of_x`), or None when it has no exact shortcut to inline."""
        if not exact_fields(self.server.model(model)):
            return None
        self.list_models.add(model)
        self.want_shape(model)
        return list_shape_name(self.server.model(model))

    def want_shape_ref(self, model: str) -> str:
        """A model's shape as presenters.py refers to it."""
        return "shapes." + self.want_shape(model)

    def output_convert(
        self,
        field: FieldIR,
        type_ir: TypeIR,
        value: str,
        name: str,
        cast: str | None,
        embed: str | None = None,
        prefix: str = "",
    ) -> str:
        if cast is not None:
            check = f"cast_{cast}({value}, at, {name})"
            already = {"integer": "int", "string": "str", "boolean": "bool"}.get(cast)
            return f"{value} if type({value}) is {already} else {check}" if already else check
        kind = type_ir.kind
        if kind == "enum":
            constant = enum_constant(self.output_constants, field.name, type_ir.enum_values, as_set=True)
            return f"out_enum({value}, {prefix}{constant}, at, {name})"
        if kind == "model":
            assert type_ir.model is not None
            path = f'at + ".{field.name}"' if name.startswith('"') else f'f"{{at}}.{field.name}[{{index}}]"'
            if embed is not None:
                return f"shape_{self.server.presenter(embed).snake}({value}, {path})"
            return f"{prefix}{self.want_shape(type_ir.model)}({value}, {path})"
        if kind == "map":
            assert type_ir.values is not None
            # Keys are the handler's data: error paths name the map, never a key ("prices[*]").
            inner = type_ir.values
            if inner.kind == "model":
                assert inner.model is not None
                item = f'{prefix}{self.want_shape(inner.model)}(item, at + ".{field.name}[*]")'
            else:
                item = self.output_convert(field, inner, "item", py_string(f"{field.name}[*]"), None, None, prefix)
            return f"{{key: {item} for key, item in map_items({value}, at, {name})}}"
        if kind == "list":
            assert type_ir.items is not None
            items = f"items_of({value}, at, {name})"
            if type_ir.items.kind == "model":  # the item path is built only if an item fails (shape_items)
                assert type_ir.items.model is not None
                if embed is None and (shape_list := self.want_list_shape(type_ir.items.model)) is not None:
                    return f'{prefix}{shape_list}({items}, at + ".{field.name}")'
                shape = (
                    f"shape_{self.server.presenter(embed).snake}"
                    if embed is not None
                    else f"{prefix}{self.want_shape(type_ir.items.model)}"
                )
                return f'shape_items({items}, {shape}, at + ".{field.name}")'
            item = self.output_convert(field, type_ir.items, "item", f'f"{field.name}[{{index}}]"', None, embed, prefix)
            return f"[{item} for index, item in enumerate({items})]"
        check = f"out_{'string' if kind == 'text' else kind}({value}, at, {name})"
        exact = {"string": "str", "text": "str", "integer": "int", "boolean": "bool"}.get(kind)
        # The common case inline (no call), the rest through the checking function.
        return f"{value} if type({value}) is {exact} else {check}" if exact else check

    def output_field(
        self, field: FieldIR, embeds: dict[str, str] | None = None, prefix: str = "shapes."
    ) -> OutputFieldView:
        key = py_string(field.name)
        convert = self.output_convert(
            field, field.type, "value", key, field.cast, (embeds or {}).get(field.name), prefix
        )
        return OutputFieldView(key=key, required=field.required, nullable=field.nullable, convert=convert)

    def shape(self, model: ModelIR) -> ShapeView:
        fields = tuple(self.output_field(f, prefix="") for f in model.visible_fields)
        return ShapeView(
            f"shape_{model.snake}",
            model.name,
            docstring_text(model.description or _what(model)),
            fields,
            exact_fields(model),
        )

    # --- input -----------------------------------------------------------------------------------

    def shapes(self) -> tuple[ShapeView, ...]:
        """Every shape asked for so far, including those shaping a model asks for (nested models)."""
        found: list[ShapeView] = []
        while len(found) < len(self.shape_models):
            found.append(self.shape(self.server.model(self.shape_models[len(found)])))
        listed = self.list_models
        return tuple(
            dataclasses.replace(shape, list_function=list_shape_name(self.server.model(shape.model)))
            if shape.model in listed
            else shape
            for shape in found
        )


def list_shape_name(model: ModelIR) -> str:
    """The list shape's name (lower/generated_names.py reserves it for every model)."""
    return f"shape_list_of_{model.snake}"


def _what(model: ModelIR) -> str:
    """A shape function's docstring when the spec gives the model no description."""
    if model.origin is not None:
        return f"The inline object {model.origin} (generated as {model.name})."
    return f"A {model.name}."


_EXACT_TYPES = {"string": "str", "text": "str", "integer": "int", "boolean": "bool"}


def exact_fields(model: ModelIR) -> tuple[ExactFieldView, ...]:
    """The fields of a model whose every visible field is sent as is when its value has one exact type (the
    inline case of `output_convert`: required, not nullable, no cast), or () when any field needs more."""
    fields = model.visible_fields
    exact = tuple(
        ExactFieldView(py_string(f.name), _EXACT_TYPES[f.type.kind], f"{f.name}_")
        for f in fields
        if f.required and not f.nullable and f.cast is None and f.type.kind in _EXACT_TYPES
    )
    return exact if fields and len(exact) == len(fields) else ()
