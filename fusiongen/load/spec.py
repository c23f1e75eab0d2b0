"""The spec language as pydantic models: the single source of truth for which keys exist.

Every model forbids extra keys, so a typo is a diagnostic (with a "did you mean"), never silently ignored.
Only the *shape* of the document is checked here; references between names are resolved when lowering
to the IR (`fusiongen.lower.server`), where every problem is collected with its source position.
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
    """One field of a model, of a tool's input, of a presenter's inline schema, or of an inline object."""

    type: str = Field(
        description="string text integer number boolean date datetime uuid enum list map json object, or a model name"
    )
    description: str | None = Field(default=None, description="Shown to the agent in schemas.")
    required: bool = Field(default=True, description="The field must be present.")
    nullable: bool = Field(default=False, description="The field may be null.")
    # Any, not a union: its two forms are told apart (and misuse reported, FG112) when lowering.
    values: Any = Field(
        default=None,
        description="enum: the allowed values; map: the type of its values (a scalar type, json or a model).",
        json_schema_extra={"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
    )
    items: FieldDecl | None = Field(
        default=None,
        description="The item type of a list: a scalar type or a model name, or an inline object "
        '`{ type = "object", fields = { ... } }`.',
    )
    fields: dict[str, FieldDecl] | None = Field(
        default=None, description="object: its fields, declared as a model's are (an inline, anonymous model)."
    )
    # Inside an inline object's `fields` only: what a model says with its hidden/guarded/casts lists.
    hidden: bool | None = Field(
        default=None, description="A field of an inline object: it never leaves the server (a model's `hidden`)."
    )
    guarded: bool | None = Field(
        default=None, description="A field of an inline object: the agent can never write it (a model's `guarded`)."
    )
    cast: str | None = Field(
        default=None,
        description="A field of an inline object: the type it is converted to on read (a model's `casts`).",
    )
    default: Any = Field(default=None, description="The value used when an optional input field is absent.")
    # Constraints: checked on input, advertised in input schemas. On a list they bound its items.
    # The bounds are floats (strict mode still takes a TOML integer); lowering gives integral ones back as int.
    minimum: float | None = Field(default=None, description="integer, number: the least value allowed.")
    maximum: float | None = Field(default=None, description="integer, number: the greatest value allowed.")
    exclusive_minimum: float | None = Field(
        default=None, description="integer, number: values must be greater than this."
    )
    exclusive_maximum: float | None = Field(default=None, description="integer, number: values must be less than this.")
    min_length: int | None = Field(default=None, description="string, text: the fewest characters allowed.")
    max_length: int | None = Field(default=None, description="string, text: the most characters allowed.")
    pattern: str | None = Field(
        default=None, description="string, text: a regular expression the value must contain a match of."
    )
    min_items: int | None = Field(default=None, description="list: the fewest items allowed.")
    max_items: int | None = Field(default=None, description="list: the most items allowed.")
    unique_items: bool | None = Field(default=None, description="list: no two items may be equal.")
    examples: list[Any] | None = Field(default=None, description="Example values, shown to the agent in schemas.")


# The JSON Schema admits both forms, so editors complete `id = "string"` as well as the table.
FieldDecl = Annotated[FieldSpec, BeforeValidator(_field_short_form, json_schema_input_type=str | FieldSpec)]
FieldSpec.model_rebuild()  # `items` and `fields` are FieldDecls: the model refers to itself


Transport = Literal["stdio", "http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http")  # [server] transports' default: both


class ServerSpec(_Strict):
    name: str = Field(description="The server's name, [a-z][a-z0-9_-]*.")
    state_handle_key: str = Field(default="workflow_id", description="The workflow state-handle argument.")
    version: str = "0.1.0"
    package: str | None = Field(default=None, description="The generated package; default <name>_server.")
    instructions: str | None = Field(default=None, description="Sent to clients as server instructions.")
    handlers: str | None = Field(default=None, description="The handler module; default <package>_handlers.")
    registry_name: str | None = Field(
        default=None,
        description='The name in the MCP registry\'s server.json, "namespace/name" in reverse-DNS form '
        '("io.github.acme/billing"); default "invalid.example/<name>", which the registry refuses.',
    )
    tool_names: Literal["snake", "dotted"] = Field(
        default="snake",
        description='The tool names the model sees: with every "." as "_" ("snake", the default: what LLM APIs '
        'accept as function names, ^[a-zA-Z0-9_-]{1,64}$), or the spec\'s own ("dotted").',
    )
    exposition: Literal["flat", "grouped"] = Field(
        default="flat",
        description='How tools are served: one MCP tool each ("flat"), or one tool per group (the part of the tool '
        'name before the first ".") whose "action" argument picks the operation ("grouped"), for a shorter tools/list.',
    )
    user_blocks: Literal["omit", "send"] = Field(
        default="omit",
        description='UI blocks with audience = "user": "omit" (the default: clients may hand every block to the '
        'model, audience is only a hint) or "send". A presenter\'s own user_blocks overrides it.',
    )
    max_list_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Budget for each tool's tools/list entry, in tokens estimated as bytes / 4: an entry over it is "
        "a build error (FG500).",
    )
    max_result_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Budget for each tool's worst-case result, in tokens estimated as bytes / 4: a bounded result "
        "over it is a build error (FG501); a result with no bound (a string without max_length, a list without "
        "max_items...) is a warning naming what to bound (FG502).",
    )
    transports: list[Transport] = Field(
        default_factory=lambda: list(TRANSPORTS),
        description='What the server can serve: stdio (always) and streamable HTTP ("http", with --http). ["stdio"] '
        "ships a server without the HTTP transport, its options and --auth: smaller, for local hosts only.",
    )
    output_schemas: Literal["full", "none"] = Field(
        default="full",
        description='Each tool\'s outputSchema in tools/list: "full" (the default), or "none" to keep a large API\'s '
        "listing small (results keep their envelope and presenters; clients just cannot validate them).",
    )


class ModelSpec(_Strict):
    description: str | None = None
    fields: dict[str, FieldDecl] = Field(default_factory=dict)
    casts: dict[str, str] = Field(default_factory=dict, description="field → type, converted on read.")
    hidden: list[str] = Field(default_factory=list, description="Fields that never leave the server.")
    guarded: list[str] = Field(default_factory=list, description="Fields the agent can never write.")
    fillable: dict[str, list[str]] = Field(
        default_factory=dict, description="operation → the fields that operation accepts."
    )


class BindStateSpec(_Strict):
    workflow: str | None = Field(default=None, description="May be omitted when the spec has one workflow.")
    states: list[str] = Field(description="The states in which the tool may run.")
    transition: str | None = Field(default=None, description="The event a successful call fires.")
    in_doubt: Literal["retry", "refuse"] | None = Field(
        default=None,
        description="After a run whose outcome is unknown: run again with the same idempotency key, or refuse "
        "until <workflow>.resolve; default refuse for mutations, retry otherwise.",
    )


class AuthSpec(_Strict):
    """Who callers are, for servers run with --auth (HTTP): where tokens keep roles and tenant, which scopes exist."""

    roles_claim: str = Field(
        default="roles", description="The token claim holding the caller's roles (a list, or a space-separated string)."
    )
    tenant_claim: str | None = Field(
        default=None,
        description="The token claim naming the caller's tenant; when set, a token without it is refused and "
        "workflow handles and session state are scoped per tenant.",
    )
    scopes: dict[str, str] = Field(
        default_factory=dict,
        description="scope → what it allows; advertised in /.well-known/oauth-protected-resource, named in requires.",
    )


class RequiresSpec(_Strict):
    scopes: list[str] = Field(default_factory=list, description="Scopes the caller's token must all have.")
    roles: list[str] = Field(default_factory=list, description="Roles of which the caller must have at least one.")


class IconSpec(_Strict):
    """An MCP icon a client may show beside the tool (MCP `Icon`)."""

    src: str = Field(description="An https: URL or a data:image/... URI.")
    mime_type: str | None = Field(default=None, description='An image type, e.g. "image/png".')
    sizes: list[str] | None = Field(default=None, description='e.g. ["48x48"], or ["any"] for SVG.')
    theme: Literal["light", "dark"] | None = Field(default=None, description="The background it is designed for.")


class ToolSpec(_Strict):
    kind: Literal["query", "mutation", "action"] = "action"
    title: str | None = Field(default=None, description="A human-readable name clients may show (MCP Tool.title).")
    icons: list[IconSpec] = Field(default_factory=list, description="Icons clients may show (MCP Tool.icons).")
    description: str | None = None
    compact_description: str | None = Field(
        default=None, description="Shown while its workflow is in its initial state."
    )
    bind_state: BindStateSpec | None = None
    returns: str | None = Field(
        default=None, description='A presenter or model name, "Model[]" for a list, or "text" for plain text.'
    )
    returns_for_role: dict[str, str] = Field(
        default_factory=dict,
        description="role → presenter (or model) of the same model as `returns`: a caller with that role (the first "
        "matching, in this order) gets it instead; `returns` is for everyone else and for callers without identity.",
    )
    handler: str | None = Field(default=None, description="The handler function; default: the tool name.")
    input: dict[str, FieldDecl] = Field(default_factory=dict)
    input_from: str | None = Field(default=None, description='"Model.operation": its fillable fields.')
    errors: dict[str, str] = Field(
        default_factory=dict,
        description="The error codes (UPPER_SNAKE_CASE) its handler may raise as ToolError, and what each means.",
    )
    requires: RequiresSpec | None = Field(
        default=None,
        description="What a caller needs to see and call it (HTTP with --auth): every scope listed, and one of the "
        "roles listed; a caller without is refused FORBIDDEN.",
    )
    tags: list[str] = Field(
        default_factory=list, description="Labels for `--tags`: a server started with --tags serves only tagged tools."
    )
    invalidates: list[str] = Field(
        default_factory=list,
        description='Tools (names or globs such as "invoice.*") whose earlier results are stale once this mutation '
        "or action succeeds: its result tells the agent to read them again.",
    )
    immutable: bool = Field(
        default=False,
        description="A query whose result for the same arguments never changes (reference data): reusable.",
    )


UI_TYPES = ("table", "markdown", "list", "mermaid", "json", "code", "summary")


class UIBlockSpec(_Strict):
    """A block shown with a result: for the model by default, or only for the human (`audience = "user"`)."""

    type: Literal["table", "markdown", "list", "mermaid", "json", "code", "summary"]
    audience: Literal["model", "user"] = "model"
    when: str | None = Field(default=None, description="Show the block only when this condition holds.")
    columns: list[str] | None = Field(default=None, description="table: the header cells.")
    rows: list[list[str]] | None = Field(default=None, description="table (one item): rows of cell templates.")
    row: list[str] | None = Field(default=None, description="table (collection): one row of cells per item.")
    text: str | None = Field(default=None, description="markdown, mermaid, code, summary: a template.")
    items: list[str] | None = Field(default=None, description="list (one item): entry templates.")
    item: str | None = Field(default=None, description="list (collection): one entry template per item.")
    path: str | None = Field(default=None, description="json: the field shown (default: the whole result).")
    language: str | None = Field(default=None, description="code: the fence's language.")


class ConditionalRuleSpec(_Strict):
    when: str
    rule: str


class SuggestionSpec(_Strict):
    tool: str
    reason: str
    when: str | None = None


class PresenterSpec(_Strict):
    model: str | None = Field(default=None, description="The model whose non-hidden fields form the schema.")
    fields: list[str] | None = Field(default=None, description="Narrow the model's fields to these.")
    schema_: dict[str, FieldDecl] | None = Field(
        default=None, alias="schema", description="An inline schema instead of model/fields."
    )
    rules: list[str] = Field(default_factory=list)
    collection_rules: list[str] = Field(default_factory=list)
    rules_when: list[ConditionalRuleSpec] = Field(default_factory=list)
    redact_pii: list[str] = Field(default_factory=list, description="Paths masked before serialization.")
    censor: str = "[REDACTED]"
    limit: int | None = Field(default=None, description="Collections: at most this many items.")
    embed: dict[str, str] = Field(default_factory=dict, description="field → the child presenter that shapes it.")
    ui: list[UIBlockSpec] = Field(default_factory=list)
    collection_ui: list[UIBlockSpec] = Field(default_factory=list)
    suggest: list[SuggestionSpec] = Field(default_factory=list)
    user_blocks: Literal["omit", "send"] | None = Field(
        default=None, description='Its audience = "user" blocks: "omit" or "send"; default: [server] user_blocks.'
    )


class TransitionSpec(_Strict):
    """`{ target = "..." }`; XState's guard/actions/reenter are accepted only to be reported as unsupported."""

    target: str
    guard: Any = None
    cond: Any = None
    actions: Any = None
    reenter: Any = None
    description: str | None = None


class StateSpec(_Strict):
    """One state. XState keys we do not compile are accepted here only so they can be named precisely."""

    on: dict[str, str | TransitionSpec | list[Any]] = Field(default_factory=dict)
    type: str | None = Field(default=None, description='"final" (XState\'s "atomic" is the default).')
    description: str | None = None
    tags: list[str] | None = None
    meta: dict[str, Any] | None = None
    # Unsupported XState features: reported, never ignored.
    always: Any = None
    after: Any = None
    invoke: Any = None
    entry: Any = None
    exit: Any = None
    states: Any = None
    initial: Any = None
    history: Any = None


class WorkflowSpec(_Strict):
    initial: str | None = None
    states: dict[str, StateSpec] | None = None
    machine: str | None = Field(default=None, description="An XState v5 machine config exported as JSON.")


class ResourceSpec(_Strict):
    """A resource (`uri` without variables) or a resource template (`uri = "invoice://{id}"`)."""

    uri: str = Field(description='The URI, or an RFC 6570 level-1 template such as "invoice://{id}".')
    presenter: str = Field(description="The presenter (or model) that renders what the handler returns.")
    description: str | None = None
    handler: str | None = Field(default=None, description="The handler function; default: read_<name>.")
    input: dict[str, FieldDecl] = Field(
        default_factory=dict, description="The template variables' types (default: required strings)."
    )
    requires: RequiresSpec | None = Field(
        default=None,
        description="What a caller needs to see and read it (HTTP with --auth), as a tool's requires; "
        "`requires = {}` says it is open on purpose where a tool with requires reads the same model.",
    )


class PromptArgumentSpec(_Strict):
    type: Literal["string", "enum"] = "string"
    description: str | None = None
    required: bool = True
    values: list[str] | None = Field(default=None, description="enum: the allowed values (offered as completions).")


class PromptSpec(_Strict):
    description: str | None = None
    arguments: dict[str, PromptArgumentSpec] = Field(default_factory=dict)
    template: str = Field(
        description="The message text; {name} is replaced by that argument's text, {{ and }} are braces."
    )
    requires: RequiresSpec | None = Field(
        default=None, description="What a caller needs to see and get it (HTTP with --auth), as a tool's requires."
    )


class MountSpec(_Strict):
    """Another spec served by this one (docs/spec.md §3.2), its tools, resources and prompts renamed."""

    spec: str = Field(
        description="The spec file or folder to serve, relative to the file naming it, inside its folder."
    )
    prefix: str = Field(
        description='Put before the names of its tools, resources and prompts with a ".": prefix "support" serves '
        'its tool "ticket.get" as "support.ticket.get".'
    )


class Spec(_Strict):
    """A fusiongen spec: models, presenters, workflows and tools, compiled into an MCP server."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="fusiongen spec")

    server: ServerSpec
    auth: AuthSpec | None = None
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    presenters: dict[str, PresenterSpec] = Field(default_factory=dict)
    workflows: dict[str, WorkflowSpec] = Field(default_factory=dict)
    tools: dict[str, ToolSpec] = Field(default_factory=dict)
    resources: dict[str, ResourceSpec] = Field(default_factory=dict)
    prompts: dict[str, PromptSpec] = Field(default_factory=dict)
    mounts: list[MountSpec] = Field(
        default_factory=list,
        description="Other specs served as part of this server, each under a name prefix (docs/spec.md §3.2).",
    )


def json_schema(*, part: bool = False) -> dict[str, Any]:
    """The JSON Schema of the spec language, generated from the models above (never written by hand).

    `part`: the schema of one file of a folder spec (docs/spec.md §3.1), in which `[server]` is optional (one
    file of the folder holds it); everything else is checked as in a one-file spec."""
    schema = Spec.model_json_schema(by_alias=True, mode="validation")
    if part:
        schema["required"] = [key for key in schema.get("required", []) if key != "server"]
        schema["title"] = "fusiongen spec file (part of a folder spec)"
        if not schema["required"]:
            del schema["required"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
