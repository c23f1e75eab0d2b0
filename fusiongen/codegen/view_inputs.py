"""The view of inputs.py: one typed object per tool, built only from validated arguments.

Each argument's check is a straight-line call of a runtime validator that records a `FieldError`
instead of raising, so a model learns every bad field of its call at once. Nested model arguments
get a parse function of their own; `InputViews` collects them as tools ask for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusiongen.codegen.constants import ConstantView, enum_constant
from fusiongen.ir import FieldIR, ModelIR, ServerIR, TypeIR
from fusiongen.pyliteral import py_literal, py_string

_PY_TYPES = {
    "string": "str",
    "text": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "date": "datetime.date",
    "datetime": "datetime.datetime",
    "uuid": "uuid.UUID",
    "enum": "str",
}


@dataclass(frozen=True)
class InputFieldView:
    name: str
    key: str
    local: str  # a local variable name that cannot shadow anything
    annotation: str
    required: bool
    nullable: bool
    expected: str  # what a missing required field should have been
    absent: str  # literal used when an optional field is absent
    absent_is_none: bool  # optional with no default: absent and null both mean None
    convert: str  # expression validating `value`, recording errors in `errors`


@dataclass(frozen=True)
class NestedInputView:
    function: str
    model: str
    keys_constant: str
    guarded_constant: str
    fields: tuple[InputFieldView, ...]


def _expected(type_ir: TypeIR) -> str:
    return {
        "string": "a string",
        "text": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "date": "a date as YYYY-MM-DD",
        "datetime": "an ISO 8601 date-time",
        "uuid": "a UUID",
        "enum": "one of " + ", ".join(repr(v) for v in type_ir.enum_values),
        "list": "an array",
        "model": "an object",
    }[type_ir.kind]


def _default_literal(field: FieldIR) -> str:
    """A default as the handler receives it: date, datetime and uuid defaults as those objects."""
    value = field.default
    if isinstance(value, str) and field.type.kind == "date":
        return f"datetime.date.fromisoformat({py_string(value)})"
    if isinstance(value, str) and field.type.kind == "datetime":
        return f"datetime.datetime.fromisoformat({py_string(value)})"
    if isinstance(value, str) and field.type.kind == "uuid":
        return f"uuid.UUID({py_string(value)})"
    return py_literal(value)


def _indexed(name: str) -> str:
    """The name expression of item `index` of the list named by the expression `name`."""
    body = name[2:-1] if name.startswith('f"') else name[1:-1]
    return f'f"{body}[{{index}}]"'


class InputViews:
    """The argument parsers the server needs: per tool, and per model nested in an argument."""

    def __init__(self, server: ServerIR) -> None:
        self.server = server
        self.input_constants: dict[str, ConstantView] = {}
        self.input_models: list[str] = []

    def want_nested_input(self, model: str) -> str:
        if model not in self.input_models:
            self.input_models.append(model)
        return f"parse_{self.server.model(model).snake}_fields"

    def input_convert(self, field: FieldIR, type_ir: TypeIR, value: str, name: str, nested: bool = False) -> str:
        """The check of one value. A hidden field's value is never echoed, and neither is anything inside
        it: its nested model's fields and its list items are checked as secret too. Inside a nested parse
        function (`nested`), whether the object itself sits in a hidden field arrives as its `secret`."""
        secret = ", secret=True" if field.hidden else ", secret=secret" if nested else ""
        kind = type_ir.kind
        if kind == "enum":
            constant = enum_constant(self.input_constants, field.name, type_ir.enum_values, as_set=False)
            return f"in_enum({value}, {constant}, {name}, errors{secret})"
        if kind == "model":
            assert type_ir.model is not None
            return f"{self.want_nested_input(type_ir.model)}({value}, {name}, errors{secret})"
        if kind == "list":
            assert type_ir.items is not None
            item = self.input_convert(field, type_ir.items, "item", _indexed(name), nested)
            return f"[{item} for index, item in enumerate(in_list({value}, {name}, errors{secret}) or ())]"
        return f"in_{'string' if kind == 'text' else kind}({value}, {name}, errors{secret})"

    def input_field(self, field: FieldIR, prefix: str) -> InputFieldView:
        name = f'f"{{{prefix}}}.{field.name}"' if prefix else py_string(field.name)
        annotation = self.annotation(field)
        return InputFieldView(
            name=field.name,
            key=py_string(field.name),
            local=f"{field.name}_",
            annotation=annotation,
            required=field.required,
            nullable=field.nullable,
            expected=py_string(_expected(field.type)),
            absent=_default_literal(field) if field.has_default else "None",
            absent_is_none=not field.required and not field.has_default,
            convert=self.input_convert(field, field.type, "value", name, nested=bool(prefix)),
        )

    def annotation(self, field: FieldIR) -> str:
        base = self.type_annotation(field.type)
        always_set = field.required or (field.has_default and field.default is not None)
        return base if always_set and not field.nullable else f"{base} | None"

    def type_annotation(self, type_ir: TypeIR) -> str:
        if type_ir.kind == "list":
            assert type_ir.items is not None
            return f"list[{self.type_annotation(type_ir.items)}]"
        if type_ir.kind == "model":
            return "dict[str, Any]"
        return _PY_TYPES[type_ir.kind]

    def nested_input(self, model: ModelIR) -> NestedInputView:
        snake = model.snake
        keys = f"_{snake.upper()}_FIELDS"
        guarded = f"_{snake.upper()}_GUARDED"
        self.input_constants[keys] = ConstantView(
            keys, "frozenset[str]", py_literal(frozenset(f.name for f in model.writable_fields))
        )
        self.input_constants[guarded] = ConstantView(
            guarded, "frozenset[str]", py_literal(frozenset(f.name for f in model.fields if f.guarded))
        )
        fields = tuple(self.input_field(f, "at") for f in model.writable_fields)
        return NestedInputView(f"parse_{snake}_fields", model.name, keys, guarded, fields)

    # --- tools -----------------------------------------------------------------------------------

    def nested_inputs(self) -> tuple[NestedInputView, ...]:
        found: list[NestedInputView] = []
        while len(found) < len(self.input_models):
            found.append(self.nested_input(self.server.model(self.input_models[len(found)])))
        return tuple(found)
