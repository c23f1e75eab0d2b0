"""The spec language as pydantic models: the single source of truth for which keys exist.

Every model forbids extra keys, so a typo is a diagnostic (with a "did you mean"), never silently ignored.
Only the *shape* of the document is checked here; references between names are resolved when lowering
to the IR (`fusiongen.lower`), where every problem is collected with its source position.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _field_short_form(value: Any) -> Any:
    """`id = "string"` is the short form of `id = { type = "string" }`."""
    return {"type": value} if isinstance(value, str) else value


class FieldSpec(_Strict):
    """One field of a model, of a tool's input, or (later) of a presenter's inline schema."""

    type: str = Field(description="string text integer number boolean date datetime uuid enum list, or a model name")
    description: str | None = Field(default=None, description="Shown to the agent in schemas.")
    required: bool = Field(default=True, description="The field must be present.")
    nullable: bool = Field(default=False, description="The field may be null.")
    values: list[str] | None = Field(default=None, description="The allowed values of an enum.")
    items: str | None = Field(default=None, description="The item type of a list: a scalar type or a model name.")
    default: Any = Field(default=None, description="The value used when an optional input field is absent.")


FieldDecl = Annotated[FieldSpec, BeforeValidator(_field_short_form)]


class ServerSpec(_Strict):
    name: str = Field(description="The server's name, [a-z][a-z0-9_-]*.")
    version: str = "0.1.0"
    package: str | None = Field(default=None, description="The generated package; default <name>_server.")
    instructions: str | None = Field(default=None, description="Sent to clients as server instructions.")
    handlers: str | None = Field(default=None, description="The handler module; default <package>_handlers.")


class ModelSpec(_Strict):
    description: str | None = None
    fields: dict[str, FieldDecl] = Field(default_factory=dict)
    casts: dict[str, str] = Field(default_factory=dict, description="field → type, converted on read.")
    hidden: list[str] = Field(default_factory=list, description="Fields that never leave the server.")
    guarded: list[str] = Field(default_factory=list, description="Fields the agent can never write.")
    fillable: dict[str, list[str]] = Field(
        default_factory=dict, description="operation → the fields that operation accepts."
    )


class ToolSpec(_Strict):
    kind: Literal["query", "mutation", "action"] = "action"
    description: str | None = None
    returns: str | None = Field(default=None, description='A model name, or "Model[]" for a list.')
    handler: str | None = Field(default=None, description="The handler function; default: the tool name.")
    input: dict[str, FieldDecl] = Field(default_factory=dict)
    input_from: str | None = Field(default=None, description='"Model.operation": its fillable fields.')


class Spec(_Strict):
    server: ServerSpec
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    tools: dict[str, ToolSpec] = Field(default_factory=dict)
