"""JSON Schemas of tool inputs and outputs, computed from the IR at build time.

Models are shared through `$defs`, so recursive models and models used in several places stay small.
Output schemas describe exactly what shaping emits (visible fields, casts applied); input schemas
describe exactly what validation accepts (no guarded keys, no unknown keys).
"""

from __future__ import annotations

from typing import Any

from fusiongen.ir import FieldIR, ModelIR, ServerIR, ToolIR, TypeIR

_SCALARS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "text": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "datetime": {"type": "string", "format": "date-time"},
    "uuid": {"type": "string", "format": "uuid"},
}


class _SchemaBuilder:
    def __init__(self, server: ServerIR, *, output: bool) -> None:
        self.server = server
        self.output = output
        self.defs: dict[str, dict[str, Any]] = {}

    def model_fields(self, model: ModelIR) -> tuple[FieldIR, ...]:
        return model.visible_fields if self.output else model.writable_fields

    def type_schema(self, type_ir: TypeIR, cast: str | None = None) -> dict[str, Any]:
        if cast is not None and self.output:
            return dict(_SCALARS[cast])
        if type_ir.kind == "enum":
            return {"type": "string", "enum": list(type_ir.enum_values)}
        if type_ir.kind == "list":
            assert type_ir.items is not None
            return {"type": "array", "items": self.type_schema(type_ir.items)}
        if type_ir.kind == "model":
            assert type_ir.model is not None
            self.define(self.server.model(type_ir.model))
            return {"$ref": f"#/$defs/{type_ir.model}"}
        return dict(_SCALARS[type_ir.kind])

    def define(self, model: ModelIR) -> None:
        if model.name not in self.defs:
            self.defs[model.name] = {}  # placeholder first: a model may refer to itself
            self.defs[model.name] = self.object_schema(self.model_fields(model), model.description)

    def field_schema(self, field: FieldIR) -> dict[str, Any]:
        schema = self.type_schema(field.type, field.cast)
        if field.nullable:
            if "$ref" in schema:
                schema = {"anyOf": [schema, {"type": "null"}]}
            else:
                schema["type"] = [schema["type"], "null"]
                if "enum" in schema:
                    schema["enum"] = [*schema["enum"], None]
        if field.description:
            schema["description"] = field.description
        if field.has_default and not self.output:
            schema["default"] = field.default
        return schema

    def object_schema(self, fields: tuple[FieldIR, ...], description: str | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object"}
        if description:
            schema["description"] = description
        schema["properties"] = {f.name: self.field_schema(f) for f in fields}
        required = [f.name for f in fields if f.required]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.defs:
            schema["$defs"] = dict(sorted(self.defs.items()))
        return schema


def input_schema(server: ServerIR, tool: ToolIR) -> dict[str, Any]:
    builder = _SchemaBuilder(server, output=False)
    return builder.finish(builder.object_schema(tool.inputs))


def output_schema(server: ServerIR, tool: ToolIR) -> dict[str, Any] | None:
    if tool.returns is None:
        return None
    builder = _SchemaBuilder(server, output=True)
    model = server.model(tool.returns.model)
    if tool.returns.collection:
        item = builder.type_schema(TypeIR("model", model=model.name))
        schema = {
            "type": "object",
            "properties": {"items": {"type": "array", "items": item}},
            "required": ["items"],
            "additionalProperties": False,
        }
    else:
        schema = builder.object_schema(model.visible_fields, model.description)
    return builder.finish(schema)
