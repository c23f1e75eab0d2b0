"""Prepare everything the templates print, so that templates only place values and never decide.

Each `*View` holds names, literals and small Python expressions computed from the IR. The code
shapes chosen here (which runtime check a field uses, how a list is walked) are the generated
server's hot path, so they are straight-line and do no work a spec could have done at build time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusiongen.codegen.jsonschema import input_schema, output_schema
from fusiongen.codegen.runtime_copy import exports
from fusiongen.codegen.view_presenters import PresenterView, build_presenters
from fusiongen.codegen.view_workflows import (
    BindingView,
    WorkflowView,
    binding_views,
    handle_property,
    modern_description,
    state_schemas,
    workflow_views,
)
from fusiongen.ir import FieldIR, ModelIR, ServerIR, ToolIR, TypeIR
from fusiongen.names import pascal_case, snake_case
from fusiongen.pyliteral import PyName, docstring_text, py_literal, py_string, toml_string

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
class ConstantView:
    name: str
    annotation: str
    literal: str


@dataclass(frozen=True)
class OutputFieldView:
    key: str  # the field name as a Python string literal
    required: bool
    nullable: bool
    convert: str  # expression converting `value`; may raise OutputError


@dataclass(frozen=True)
class ShapeView:
    function: str
    model: str
    description: str
    fields: tuple[OutputFieldView, ...]


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
    convert: str  # expression validating `value`, recording errors in `errors`


@dataclass(frozen=True)
class NestedInputView:
    function: str
    model: str
    keys_constant: str
    guarded_constant: str
    fields: tuple[InputFieldView, ...]


@dataclass(frozen=True)
class ToolView:
    name: str
    name_literal: str
    ident: str
    handler: str
    input_class: str
    parse_function: str
    description_literal: str
    keys_constant: str
    guarded_constant: str
    inputs: tuple[InputFieldView, ...]
    input_schema: ConstantView
    output_schema: ConstantView | None
    present_function: str | None  # in presenters.py
    annotations: str
    kind: str
    description_text: str  # for the generated README's table
    bound: bool
    modern_description_literal: str  # 2026-07-28: the stable list says what a bound tool needs
    compact_description_literal: str | None


@dataclass(frozen=True)
class ServerView:
    name: str
    name_literal: str
    distribution: str  # the pip distribution and console script of the generated server
    distribution_literal: str
    description_literal: str
    version_toml: str
    instructions: str | None
    handlers_module: str
    spec_path: str
    version_literal: str
    instructions_literal: str
    package: str
    handlers_module_literal: str
    handlers_dir_literal: str
    tools: tuple[ToolView, ...]
    shapes: tuple[ShapeView, ...]
    nested_inputs: tuple[NestedInputView, ...]
    output_constants: tuple[ConstantView, ...]
    input_constants: tuple[ConstantView, ...]
    output_schemas: tuple[ConstantView, ...]  # one per presenter and shape, shared by the tools returning it
    presenters: tuple[PresenterView, ...]
    presenter_constants: tuple[tuple[str, str], ...]  # (name, literal)
    uses_expressions: bool  # whether any presenter calls the expression helpers (_expressions.py)
    # Every name each runtime module offers: templates import them all, the pinned ruff drops the unused.
    runtime_exports: tuple[str, ...]
    expression_exports: tuple[str, ...]
    gate_exports: tuple[str, ...]
    store_exports: tuple[str, ...]
    workflows: tuple[WorkflowView, ...]
    bindings: tuple[BindingView, ...]
    handle_key_literal: str
    state_constants: tuple[ConstantView, ...]  # schemas of the generated <workflow>.start/.status tools
    definitions: tuple[ConstantView, ...]  # model definitions the tool schemas share, by name


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


class _Builder:
    def __init__(self, server: ServerIR) -> None:
        self.server = server
        self.output_constants: dict[str, ConstantView] = {}
        self.input_constants: dict[str, ConstantView] = {}
        self.shape_models: list[str] = []
        self.definitions: dict[str, ConstantView] = {}  # model definitions shared by tool schemas
        self.input_models: list[str] = []

    # --- output ----------------------------------------------------------------------------------
    def enum_constant(
        self, table: dict[str, ConstantView], field: str, values: tuple[str, ...], *, as_set: bool
    ) -> str:
        """One constant per field name and value set: `STATUS_VALUES`, then `STATUS_VALUES_2`..."""
        literal = py_literal(frozenset(values)) if as_set else py_literal(values)
        base = f"{field.upper()}_VALUES" if as_set else f"_{field.upper()}_VALUES"
        name, number = base, 1
        while name in table and table[name].literal != literal:
            number += 1
            name = f"{base}_{number}"
        table[name] = ConstantView(name, "frozenset[str]" if as_set else "tuple[str, ...]", literal)
        return name

    def want_shape(self, model: str) -> str:
        if model not in self.shape_models:
            self.shape_models.append(model)
        return f"shape_{self.server.model(model).snake}"

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
            constant = self.enum_constant(self.output_constants, field.name, type_ir.enum_values, as_set=True)
            return f"out_enum({value}, {prefix}{constant}, at, {name})"
        if kind == "model":
            assert type_ir.model is not None
            path = f'at + ".{field.name}"' if name.startswith('"') else f'f"{{at}}.{field.name}[{{index}}]"'
            if embed is not None:
                return f"shape_{self.server.presenter(embed).snake}({value}, {path})"
            return f"{prefix}{self.want_shape(type_ir.model)}({value}, {path})"
        if kind == "list":
            assert type_ir.items is not None
            items = f"items_of({value}, at, {name})"
            if type_ir.items.kind == "model":  # the item path is built only if an item fails (shape_items)
                assert type_ir.items.model is not None
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
            f"shape_{model.snake}", model.name, docstring_text(model.description or f"A {model.name}."), fields
        )

    # --- input -----------------------------------------------------------------------------------
    def want_nested_input(self, model: str) -> str:
        if model not in self.input_models:
            self.input_models.append(model)
        return f"parse_{self.server.model(model).snake}_fields"

    def input_convert(self, field: FieldIR, type_ir: TypeIR, value: str, name: str) -> str:
        secret = ", secret=True" if field.hidden else ""
        kind = type_ir.kind
        if kind == "enum":
            constant = self.enum_constant(self.input_constants, field.name, type_ir.enum_values, as_set=False)
            return f"in_enum({value}, {constant}, {name}, errors{secret})"
        if kind == "model":
            assert type_ir.model is not None
            return f"{self.want_nested_input(type_ir.model)}({value}, {name}, errors)"
        if kind == "list":
            assert type_ir.items is not None
            item = self.input_convert(field, type_ir.items, "item", _indexed(name))
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
            convert=self.input_convert(field, field.type, "value", name),
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
    def share_definitions(self, schema: dict[str, Any], mode: str) -> dict[str, Any]:
        """Each model's definition once, as a module constant the tool schemas refer to (not a copy per tool)."""
        definitions = schema.get("$defs")
        if not definitions:
            return schema
        shared: dict[str, Any] = {}
        for model, definition in definitions.items():
            name = f"{snake_case(model).upper()}_{mode}_DEFINITION"
            literal = py_literal(definition, 0, len(name) + 23)
            known = self.definitions.setdefault(name, ConstantView(name, "dict[str, Any]", literal))
            if known.literal != literal:
                raise AssertionError(f"model {model} has two {mode.lower()} definitions")
            shared[model] = PyName(name)
        return {**schema, "$defs": shared}

    def tool(self, tool: ToolIR) -> ToolView:
        upper = tool.ident.upper()
        keys = f"_{upper}_KEYS"
        guarded = f"_{upper}_GUARDED"
        self.input_constants[keys] = ConstantView(
            keys, "frozenset[str]", py_literal(frozenset(f.name for f in tool.inputs))
        )
        self.input_constants[guarded] = ConstantView(guarded, "frozenset[str]", py_literal(frozenset(tool.guarded)))
        in_schema = input_schema(self.server, tool)
        if tool.binding is not None:
            in_schema["properties"][self.server.state_handle_key] = handle_property(self.server, tool)
        out_schema = output_schema(self.server, tool)
        in_name = f"{upper}_INPUT"
        out_name = ""
        if tool.returns is not None:  # one constant per presenter and shape: tools returning the same share it
            presenter = self.server.presenter(tool.returns.presenter)
            out_name = f"{presenter.snake.upper()}_{'COLLECTION' if tool.returns.collection else 'RESULT'}_OUTPUT"
        in_schema = self.share_definitions(in_schema, "INPUT")
        out_schema = self.share_definitions(out_schema, "OUTPUT") if out_schema is not None else None
        kind_hints = {
            "query": "read_only_hint=True, destructive_hint=False, idempotent_hint=True",
            "mutation": "read_only_hint=False, destructive_hint=True",
            "action": "read_only_hint=False, destructive_hint=False",
        }
        return ToolView(
            name=tool.name,
            name_literal=py_string(tool.name),
            ident=tool.ident,
            handler=tool.handler,
            input_class=f"{pascal_case(tool.ident)}Input",
            parse_function=f"parse_{tool.ident}",
            description_literal=py_string(tool.description or tool.name),
            keys_constant=keys,
            guarded_constant=guarded,
            inputs=tuple(self.input_field(f, "") for f in tool.inputs),
            input_schema=ConstantView(in_name, "dict[str, Any]", py_literal(in_schema, 0, len(in_name) + 23)),
            output_schema=ConstantView(out_name, "dict[str, Any]", py_literal(out_schema, 0, len(out_name) + 23))
            if out_schema is not None
            else None,
            present_function=None
            if tool.returns is None
            else (
                f"present_{self.server.presenter(tool.returns.presenter).snake}"
                + ("_many" if tool.returns.collection else "")
            ),
            annotations=kind_hints[tool.kind],
            kind=tool.kind,
            description_text=(tool.description or tool.name).replace("|", "\\|").replace("\n", " "),
            bound=tool.binding is not None,
            modern_description_literal=py_string(modern_description(tool, self.server.state_handle_key)),
            compact_description_literal=py_string(tool.compact_description) if tool.compact_description else None,
        )


def build_view(server: ServerIR, handlers_dir: str, spec_path: str) -> ServerView:
    builder = _Builder(server)
    tools = tuple(builder.tool(t) for t in server.tools)
    presenter_constants: dict[str, str] = {}
    presenters = build_presenters(server, builder, presenter_constants)
    shapes: list[ShapeView] = []
    while len(shapes) < len(builder.shape_models):  # shaping a model may ask for the shapes it nests
        shapes.append(builder.shape(server.model(builder.shape_models[len(shapes)])))
    nested: list[NestedInputView] = []
    while len(nested) < len(builder.input_models):
        nested.append(builder.nested_input(server.model(builder.input_models[len(nested)])))
    workflows = workflow_views(server)
    state_constants: tuple[ConstantView, ...] = ()
    if workflows:
        status_input, state_output = state_schemas(server)
        state_constants = (
            ConstantView("WORKFLOW_STATUS_INPUT", "dict[str, Any]", py_literal(status_input, 0, 45)),
            ConstantView("WORKFLOW_STATE_OUTPUT", "dict[str, Any]", py_literal(state_output, 0, 45)),
        )
    distribution = server.package.replace("_", "-")
    return ServerView(
        distribution=distribution,
        distribution_literal=toml_string(distribution),
        description_literal=toml_string(f"The {server.name} MCP server (generated by fusiongen)."),
        version_toml=toml_string(server.version),
        instructions=server.instructions,
        handlers_module=server.handlers_module,
        spec_path=spec_path,
        name=server.name,
        name_literal=py_string(server.name),
        version_literal=py_string(server.version),
        instructions_literal=py_string(server.instructions) if server.instructions else "None",
        package=server.package,
        handlers_module_literal=py_string(server.handlers_module),
        handlers_dir_literal=py_string(handlers_dir),
        tools=tools,
        shapes=tuple(shapes),
        nested_inputs=tuple(nested),
        output_constants=tuple(sorted(builder.output_constants.values(), key=lambda c: c.name)),
        input_constants=tuple(builder.input_constants.values()),
        output_schemas=tuple({t.output_schema.name: t.output_schema for t in tools if t.output_schema}.values()),
        presenters=presenters,
        presenter_constants=tuple(presenter_constants.items()),
        uses_expressions=any(p.uses_expressions for p in presenters),
        runtime_exports=exports("_runtime"),
        expression_exports=exports("_expressions"),
        gate_exports=exports("_gate"),
        store_exports=exports("state_store"),
        workflows=workflows,
        bindings=binding_views(server),
        handle_key_literal=py_string(server.state_handle_key),
        state_constants=state_constants,
        definitions=tuple(sorted(builder.definitions.values(), key=lambda c: c.name)),
    )
