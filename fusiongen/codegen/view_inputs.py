"""The view of inputs.py: one typed object per tool, built only from validated arguments.

Each argument's check is a straight-line call of a runtime validator that records a `FieldError`
instead of raising, so a model learns every bad field of its call at once. Nested model arguments
get a parse function of their own; `InputViews` collects them as tools ask for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusiongen.codegen.constants import ConstantView, enum_constant
from fusiongen.ir import ConstraintsIR, FieldIR, ModelIR, ServerIR, TypeIR
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
    "json": "Any",
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
    absent: str  # literal used when an optional field is absent (its default, in a nested object too)
    absent_is_none: bool  # optional with no default: absent and null both mean None
    convert: str  # expression validating `value`, recording errors in `errors`


@dataclass(frozen=True)
class NestedInputView:
    function: str
    model: str  # what its docstring calls it: "an object of model Address", "the inline object order.place.address"
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
        "json": "a JSON value other than null, NaN or Infinity",
        "map": "an object",
    }[type_ir.kind]


def _keywords(**values: object) -> str:
    """`, name=literal` for each value that is set, in order."""
    return "".join(f", {key}={py_literal(value)}" for key, value in values.items() if value is not None)


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() and abs(value) < 1e15 else str(value)


def constraint_words(type_ir: TypeIR, c: ConstraintsIR) -> str:
    """What a constrained value must be, in words: "an integer from 1 to 100", "an array of at most 5 items"."""
    if type_ir.kind == "list":
        size = _span(c.min_items, c.max_items, "items")
        return "an array" + (f" of {size}" if size else "") + (" with no two items equal" if c.unique_items else "")
    if type_ir.kind in ("integer", "number"):
        noun = "an integer" if type_ir.kind == "integer" else "a number"
        if c.minimum is not None and c.maximum is not None and c.exclusive_minimum is None is c.exclusive_maximum:
            return f"{noun} from {_number(c.minimum)} to {_number(c.maximum)}"
        bounds = [
            f"{words} {_number(value)}"
            for words, value in (
                ("at least", c.minimum),
                ("greater than", c.exclusive_minimum),
                ("at most", c.maximum),
                ("less than", c.exclusive_maximum),
            )
            if value is not None
        ]
        return f"{noun} that is {' and '.join(bounds)}"
    size = _span(c.min_length, c.max_length, "characters")
    words = "a string" + (f" of {size}" if size else "")
    return words + (f" matching the pattern {c.pattern}" if c.pattern is not None else "")


def _span(low: int | None, high: int | None, unit: str) -> str:
    """ "3 to 20 characters", "at least 1 item"; `unit` is plural."""

    def counted(n: int) -> str:
        return f"{n} {unit[:-1] if n == 1 else unit}"

    if low is not None and high is not None:
        return f"exactly {counted(low)}" if low == high else f"{low} to {counted(high)}"
    if low is not None:
        return f"at least {counted(low)}"
    return f"at most {counted(high)}" if high is not None else ""


def _constrained(field: FieldIR) -> bool:
    c = field.constraints
    return c.numeric or c.textual or c.itemwise


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


def _keyed(name: str, hidden: bool, nested: bool) -> str:
    """The name expression of the value at `key` of the map named by `name`. The keys are part of the
    value, so inside a hidden field (statically, or `secret` at run time in a nested parser) every value
    is named by the map's name alone."""
    if hidden:
        return name
    body = name[2:-1] if name.startswith('f"') else name[1:-1]
    keyed = f'f"{body}.{{key}}"'
    return f"({name} if secret else {keyed})" if nested else keyed


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
        if kind == "map":
            assert type_ir.values is not None
            item = self.input_convert(field, type_ir.values, "item", _keyed(name, field.hidden, nested), nested)
            return f"{{key: {item} for key, item in (in_object({value}, {name}, errors{secret}) or {{}}).items()}}"
        if kind == "list":
            assert type_ir.items is not None
            item = self.input_convert(field, type_ir.items, "item", _indexed(name), nested)
            items = self.bounded(field, type_ir, f"in_list({value}, {name}, errors{secret})", name, secret)
            return f"[{item} for index, item in enumerate({items} or ())]"
        checked = f"in_{'string' if kind == 'text' else kind}({value}, {name}, errors{secret})"
        return self.bounded(field, type_ir, checked, name, secret)

    def bounded(self, field: FieldIR, type_ir: TypeIR, checked: str, name: str, secret: str) -> str:
        """`checked` (a type check's call) wrapped in the check of the field's constraints on that value."""
        c = field.constraints
        expected = py_string(constraint_words(type_ir, c))
        if type_ir.kind in ("integer", "number") and c.numeric:
            bounds = _keywords(
                minimum=c.minimum,
                maximum=c.maximum,
                exclusive_minimum=c.exclusive_minimum,
                exclusive_maximum=c.exclusive_maximum,
            )
            return f"in_range({checked}, {name}, errors, {expected}{bounds}{secret})"
        if type_ir.kind in ("string", "text") and c.textual:
            lengths = _keywords(min_length=c.min_length, max_length=c.max_length)
            pattern = f", pattern={self.pattern_constant(field)}" if c.python_pattern is not None else ""
            return f"in_text({checked}, {name}, errors, {expected}{lengths}{pattern}{secret})"
        if type_ir.kind == "list" and c.itemwise:
            sizes = _keywords(min_items=c.min_items, max_items=c.max_items, unique=c.unique_items or None)
            return f"in_items({checked}, {name}, errors, {expected}{sizes}{secret})"
        return checked

    def pattern_constant(self, field: FieldIR) -> str:
        """A module constant holding the field's compiled pattern: `_CODE_PATTERN`, `_CODE_PATTERN_2`..."""
        assert field.constraints.python_pattern is not None
        literal = f"re.compile({py_string(field.constraints.python_pattern)}, re.ASCII)"
        base = f"_{field.name.upper()}_PATTERN"
        name, number = base, 1
        while name in self.input_constants and self.input_constants[name].literal != literal:
            number += 1
            name = f"{base}_{number}"
        self.input_constants[name] = ConstantView(name, "re.Pattern[str]", literal)
        return name

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
            expected=py_string(
                constraint_words(field.type, field.constraints) if _constrained(field) else _expected(field.type)
            ),
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
        if type_ir.kind == "map":
            assert type_ir.values is not None
            return f"dict[str, {self.type_annotation(type_ir.values)}]"
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
        what = f"an object of model {model.name}" if model.origin is None else f"the inline object {model.origin}"
        return NestedInputView(f"parse_{snake}_fields", what, keys, guarded, fields)

    # --- tools -----------------------------------------------------------------------------------

    def nested_inputs(self) -> tuple[NestedInputView, ...]:
        found: list[NestedInputView] = []
        while len(found) < len(self.input_models):
            found.append(self.nested_input(self.server.model(self.input_models[len(found)])))
        return tuple(found)
