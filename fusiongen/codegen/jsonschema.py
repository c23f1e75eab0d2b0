"""JSON Schemas of tool inputs and outputs, computed from the IR at build time.

Schemas are self-contained and written in the form every client's converter accepts (docs/spec.md §9.2):
each model's schema is inlined where it is used, and a nullable value is `anyOf: [T, {"type": "null"}]`, never
a `type` array (autogen refuses a server over one, and its workbench drops `$defs`, leaving a dangling `$ref`).
Only a model that can contain itself (recursive through its fields) cannot be inlined: it alone is shared
through `$defs`, and its uses are `$ref`s to it.
Output schemas describe exactly what shaping emits (visible fields, casts applied); input schemas
describe exactly what validation accepts (no guarded keys, no unknown keys).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from fusiongen.ir import FieldIR, ModelIR, PresenterIR, RedactionPath, ServerIR, ToolIR, TypeIR

Censored = tuple[RedactionPath, str]  # a concrete path and the censor that replaces its value

_SCALARS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "text": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "datetime": {"type": "string", "format": "date-time"},
    "uuid": {"type": "string", "format": "uuid"},
    # Any JSON value: stated as every JSON type, each a branch of an `anyOf` (never a `type` array, which
    # converters refuse), so `nullable` adds the null branch to the same list.
    "json": {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean")]},
}


class _SchemaBuilder:
    def __init__(self, server: ServerIR, *, output: bool) -> None:
        self.server = server
        self.output = output
        self.defs: dict[str, dict[str, Any]] = {}
        self.pending: list[ModelIR] = []
        self.recursive: dict[str, bool] = {}  # model name -> it can contain itself (through the fields read)

    def model_fields(self, model: ModelIR) -> tuple[FieldIR, ...]:
        return model.visible_fields if self.output else model.writable_fields

    def type_schema(self, type_ir: TypeIR, cast: str | None = None) -> dict[str, Any]:
        if cast is not None and self.output:
            return _copy(_SCALARS[cast])
        if type_ir.kind == "enum":
            return {"type": "string", "enum": list(type_ir.enum_values)}
        if type_ir.kind == "list":
            assert type_ir.items is not None
            return {"type": "array", "items": self.type_schema(type_ir.items)}
        if type_ir.kind == "map":
            assert type_ir.values is not None
            return {"type": "object", "additionalProperties": self.type_schema(type_ir.values)}
        if type_ir.kind == "model":
            assert type_ir.model is not None
            model = self.server.model(type_ir.model)
            if model.origin is not None:  # an inline object: written where it is used (see the module docstring)
                return self.object_schema(self.model_fields(model))
            if not self.contains_itself(model):  # inlined, so the schema is self-contained
                return self.object_schema(self.model_fields(model), model.description)
            self.define(model)
            return {"$ref": f"#/$defs/{type_ir.model}"}
        return _copy(_SCALARS[type_ir.kind])

    def contains_itself(self, model: ModelIR) -> bool:
        """Whether the model reaches itself through the fields this schema reads (visible ones on output,
        writable ones on input): such a model cannot be inlined, and is the only one shared through `$defs`.
        Walked with a stack, so long chains of models cost no recursion."""
        known = self.recursive.get(model.name)
        if known is not None:
            return known
        seen: set[str] = set()
        stack = [model]
        found = False
        while stack and not found:
            for field in self.model_fields(stack.pop()):
                for name in field.type.models:
                    if name == model.name:
                        found = True
                    elif name not in seen:
                        seen.add(name)
                        stack.append(self.server.model(name))
        self.recursive[model.name] = found
        return found

    def define(self, model: ModelIR) -> None:
        """Queue a model's definition; `finish` builds the queue iteratively, so chains of models nested
        hundreds deep cost no recursion."""
        if model.name not in self.defs:
            self.defs[model.name] = {}  # a placeholder until finish() builds it
            self.pending.append(model)

    def constrained(self, schema: dict[str, Any], field: FieldIR) -> dict[str, Any]:
        """The field's constraints written into its type's schema, on inputs only: outputs are not checked
        against them, so an output schema carrying them would promise what the server does not enforce."""
        if self.output:
            return schema
        c = field.constraints
        if field.type.items is not None and schema.get("type") == "array":
            schema["items"] = self.constrained(dict(schema["items"]), dataclasses.replace(field, type=field.type.items))
            for key, value in (("minItems", c.min_items), ("maxItems", c.max_items)):
                if value is not None:
                    schema[key] = value
            if c.unique_items:
                schema["uniqueItems"] = True
            return schema
        keywords = (
            ("minimum", c.minimum),
            ("maximum", c.maximum),
            ("exclusiveMinimum", c.exclusive_minimum),
            ("exclusiveMaximum", c.exclusive_maximum),
            ("minLength", c.min_length),
            ("maxLength", c.max_length),
            ("pattern", c.pattern),
        )
        schema.update((key, value) for key, value in keywords if value is not None)
        return schema

    def field_schema(self, field: FieldIR) -> dict[str, Any]:
        schema = self.constrained(self.type_schema(field.type, field.cast), field)
        if field.nullable:
            schema = nullable(schema)
        if field.description:
            schema["description"] = field.description
        if field.has_default and not self.output:
            schema["default"] = field.default
        if field.constraints.examples and not (self.output and field.cast):  # a cast changes the type shown
            schema["examples"] = list(field.constraints.examples)
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

    def presenter_schema(self, presenter: PresenterIR, redactions: tuple[Censored, ...] = ()) -> dict[str, Any]:
        """A presenter's output: its fields, embedded presenters inline, redacted paths admitting only the censor
        (each path its own presenter's censor: a parent's path into an embed keeps the parent's)."""
        paths = (*((p, presenter.censor) for p in presenter.redactions), *redactions)
        return self.redacted_object(presenter.fields, presenter.description, paths, presenter)

    def redacted_object(
        self,
        fields: tuple[FieldIR, ...],
        description: str | None,
        paths: tuple[Censored, ...],
        presenter: PresenterIR | None,
    ) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object"}
        if description:
            schema["description"] = description
        properties: dict[str, Any] = {}
        for field in fields:
            below = tuple((p[1:], c) for p, c in paths if p[0] == field.name)
            embed = presenter.embed(field.name) if presenter is not None else None
            whole = next((c for p, c in reversed(below) if p == ()), None)  # the outermost presenter masks last
            if whole is not None:  # the whole field is masked
                properties[field.name] = self.censored(field, whole)
            elif embed is not None or below:
                properties[field.name] = self.redacted_field(field, below, embed)
            else:
                properties[field.name] = self.field_schema(field)
        schema["properties"] = properties
        required = [f.name for f in fields if f.required]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema

    def censored(self, field: FieldIR, censor: str) -> dict[str, Any]:
        schema: dict[str, Any] = {"const": censor}
        if field.nullable:
            schema = {"anyOf": [schema, {"type": "null"}]}
        if field.description:
            schema["description"] = field.description
        return schema

    def redacted_field(self, field: FieldIR, below: tuple[Censored, ...], embed: str | None) -> dict[str, Any]:
        is_list = field.type.kind == "list"
        item_paths = tuple((p[1:], c) for p, c in below if p[:1] == ("[*]",)) if is_list else below
        target = field.type.items if is_list else field.type
        assert target is not None
        whole = next((c for p, c in reversed(item_paths) if p == ()), None)
        if whole is not None:
            item: dict[str, Any] = {"const": whole}
        elif embed is not None:
            item = self.presenter_schema(self.server.presenter(embed), item_paths)
        else:
            assert target.model is not None
            model = self.server.model(target.model)
            item = self.redacted_object(model.visible_fields, model.description, item_paths, None)
        schema: dict[str, Any] = {"type": "array", "items": item} if is_list else item
        if field.nullable:
            schema = {"anyOf": [schema, {"type": "null"}]}
        if field.description and "description" not in schema:
            schema["description"] = field.description
        return schema

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        while self.pending:
            model = self.pending.pop()
            self.defs[model.name] = self.object_schema(self.model_fields(model), model.description)
        if self.defs:
            schema["$defs"] = dict(sorted(self.defs.items()))
        return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema admitting null too, in the one form every converter reads: `anyOf: [T, {"type": "null"}]`
    (a bare `anyOf`, as json's, takes the null branch into its own list)."""
    if set(schema) == {"anyOf"}:
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    """A scalar's schema, fresh (json's holds a list of dicts, which a shallow copy would share)."""
    return {key: [dict(item) for item in value] if key == "anyOf" else value for key, value in schema.items()}


def input_schema(server: ServerIR, tool: ToolIR) -> dict[str, Any]:
    builder = _SchemaBuilder(server, output=False)
    return builder.finish(builder.object_schema(tool.inputs))


# What a presenter result carries beside its data (docs/spec.md §9.2): the same rules and suggestions as its
# text blocks, so that clients which hand the model only structuredContent still pass them on.
_RULES: Final = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Domain rules: how to read and use data. Follow them.",
}
_SUGGESTIONS: Final = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"tool": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["tool", "reason"],
        "additionalProperties": False,
    },
    "description": "Tools worth calling next, and why.",
}


_STALE: Final = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Tools whose earlier results this change made stale: call them again before relying on them.",
}


def output_schema(server: ServerIR, tool: ToolIR) -> dict[str, Any] | None:
    """The envelope a presenter result's structuredContent is: `data`, then for a collection its counts, then
    the guidance. Every key is always present but `notice`, which a collection has only when truncated.
    None without `returns`, or with `[server] output_schemas = "none"` (nothing advertised, nothing else changes)."""
    if tool.returns is None or not server.output_schemas:
        return None
    builder = _SchemaBuilder(server, output=True)
    audiences = [builder.presenter_schema(server.presenter(name)) for name in tool.presenters]
    # returns_for_role: the caller gets one of them, and a validator does not know which: `data` is their union.
    item = audiences[0] if len(audiences) == 1 else {"anyOf": audiences}
    properties: dict[str, Any]
    if tool.returns.collection:
        properties = {
            "data": {"type": "array", "items": item},
            "total": {"type": "integer", "description": "How many items the tool found."},
            "shown": {"type": "integer", "description": "How many items are in data."},
            "truncated": {"type": "boolean", "description": "True when items were left out (see notice)."},
            "notice": {"type": "string", "description": "Present when truncated: what was left out and what to do."},
        }
    else:
        properties = {"data": item}
    properties |= {"rules": dict(_RULES), "suggestions": dict(_SUGGESTIONS)}
    if tool.invalidates:
        properties["stale"] = dict(_STALE)
    required = [key for key in properties if key != "notice"]
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return builder.finish(schema)
