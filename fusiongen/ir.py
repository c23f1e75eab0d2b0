"""The intermediate representation: the spec with every reference resolved and every name checked.

Frozen dataclasses, in declaration order. By the time something is in the IR it is known to be
consistent (validation has run), and its names are valid Python, so rendering never has to decide
anything about the user's intent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCALAR_KINDS = ("string", "text", "integer", "number", "boolean", "date", "datetime", "uuid", "enum", "list", "json")
CAST_KINDS = ("string", "integer", "number", "boolean", "date", "datetime")


@dataclass(frozen=True)
class TypeIR:
    """A field's type: a scalar kind, an enum, a list of items, a map of values, or a model (declared, or
    generated for an inline object)."""

    kind: str  # one of SCALAR_KINDS, "map" or "model"
    enum_values: tuple[str, ...] = ()
    items: TypeIR | None = None
    model: str | None = None
    values: TypeIR | None = None  # a map's value type
    inline: bool = False  # a model generated for an inline object (`type = "object"`), not a declared one
    # The type could not be resolved and an error says so (FG110, or a model set aside): held as json, which
    # every later check accepts, so that one mistake is reported once and not again as the type errors a
    # stand-in type would cause (a comparison, a constraint, a default).
    unknown: bool = False

    @property
    def models(self) -> tuple[str, ...]:
        """The models this type refers to, directly or through list items or map values."""
        if self.kind == "model" and self.model:
            return (self.model,)
        inner = self.items or self.values
        return inner.models if inner else ()

    @property
    def element(self) -> TypeIR:
        """What one value inside is: a list's items, a map's values, else the type itself."""
        return self.items or self.values or self


@dataclass(frozen=True)
class ConstraintsIR:
    """What a field's value must satisfy beyond its type, already checked to make sense for that type.

    On a list field the numeric and text bounds apply to every item, the item bounds to the list.
    `python_pattern` is `pattern` translated to a Python regex that matches what ECMA-262 matches."""

    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    python_pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    examples: tuple[Any, ...] = field(default=(), compare=False)

    @property
    def numeric(self) -> bool:
        return any(v is not None for v in (self.minimum, self.maximum, self.exclusive_minimum, self.exclusive_maximum))

    @property
    def textual(self) -> bool:
        return self.min_length is not None or self.max_length is not None or self.pattern is not None

    @property
    def itemwise(self) -> bool:
        return self.min_items is not None or self.max_items is not None or self.unique_items


@dataclass(frozen=True)
class FieldIR:
    name: str
    type: TypeIR
    description: str | None = None
    required: bool = True
    nullable: bool = False
    has_default: bool = False
    default: Any = field(default=None, compare=False)
    hidden: bool = False
    guarded: bool = False
    cast: str | None = None  # read-time conversion target, one of CAST_KINDS
    constraints: ConstraintsIR = ConstraintsIR()


@dataclass(frozen=True)
class ModelIR:
    name: str
    snake: str
    description: str | None
    fields: tuple[FieldIR, ...]
    fillable: tuple[tuple[str, tuple[str, ...]], ...]  # (operation, field names)
    # An inline object's model: where it is declared ("Invoice.address", "Invoice.lines[*]"); None if declared.
    origin: str | None = None

    @property
    def label(self) -> str:
        """How reports name it: a declared model by its name, an inline object by where it is written."""
        return f"model {self.name}" if self.origin is None else f"inline object {self.origin}"

    @property
    def visible_fields(self) -> tuple[FieldIR, ...]:
        """What an agent may see: declared and not hidden."""
        return tuple(f for f in self.fields if not f.hidden)

    @property
    def writable_fields(self) -> tuple[FieldIR, ...]:
        """What an agent may send inside a nested object: declared and not guarded."""
        return tuple(f for f in self.fields if not f.guarded)

    def field(self, name: str) -> FieldIR | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class ExprIR:
    """A compiled expression: the spec's text, the Python that computes it, and the paths it reads."""

    source: str
    python: str
    paths: tuple[tuple[str, ...], ...]
    helpers: frozenset[str] = frozenset()  # the run-time helpers `python` calls (fusiongen/runtime/_expressions.py)


@dataclass(frozen=True)
class RuleIR:
    text: ExprIR  # a template
    when: ExprIR | None = None


@dataclass(frozen=True)
class SuggestionIR:
    tool: str  # the wire name of the tool suggested
    reason: ExprIR
    when: ExprIR | None = None


@dataclass(frozen=True)
class UIBlockIR:
    """One UI block. Which of the template fields are set depends on `type` (validated when lowering)."""

    type: str
    for_user: bool  # audience = "user": annotated for the human, may show real values
    when: ExprIR | None = None
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[ExprIR, ...], ...] = ()  # table: fixed rows, or the one row per item of a collection
    text: ExprIR | None = None
    items: tuple[ExprIR, ...] = ()  # list: fixed entries, or the one entry per item of a collection
    path: tuple[str, ...] = ()  # json: the field shown, () for the whole result
    language: str = ""


# A redaction path made concrete against a schema: field names, and "[*]" for every item of a list.
RedactionPath = tuple[str, ...]


@dataclass(frozen=True)
class PresenterIR:
    """What an agent perceives of a result. Implicit presenters (a model named in `returns`) have
    only a schema and the rules their field descriptions give."""

    name: str
    snake: str
    implicit: bool
    model: str | None
    description: str | None
    fields: tuple[FieldIR, ...]
    embeds: tuple[tuple[str, str], ...] = ()  # (field, child presenter)
    description_rules: tuple[str, ...] = ()
    rules: tuple[RuleIR, ...] = ()  # static (when is None) first, then conditional, in spec order
    collection_rules: tuple[RuleIR, ...] = ()
    redactions: tuple[RedactionPath, ...] = ()  # this presenter's own paths, not its children's
    censor: str = "[REDACTED]"
    limit: int | None = None
    ui: tuple[UIBlockIR, ...] = ()
    collection_ui: tuple[UIBlockIR, ...] = ()
    suggestions: tuple[SuggestionIR, ...] = ()
    model_reads: tuple[tuple[str, ...], ...] = ()  # paths its rules, suggestions and model-facing blocks read
    user_reads: tuple[tuple[str, ...], ...] = ()  # paths its audience = "user" item blocks read (() = all of it)
    send_user_blocks: bool = False  # what the spec says of its audience = "user" blocks (a server may override)

    @property
    def user_blocks(self) -> bool:
        """Whether it declares any audience = "user" block (its own, not its children's)."""
        return any(b.for_user for b in (*self.ui, *self.collection_ui))

    def embed(self, field: str) -> str | None:
        return dict(self.embeds).get(field)

    def expressions(self) -> tuple[ExprIR, ...]:
        """Every compiled expression of this presenter (its own, not its children's)."""
        found: list[ExprIR | None] = []
        for rule in (*self.rules, *self.collection_rules):
            found += [rule.text, rule.when]
        for suggestion in self.suggestions:
            found += [suggestion.reason, suggestion.when]
        for block in (*self.ui, *self.collection_ui):
            found += [block.when, block.text, *block.items, *(cell for row in block.rows for cell in row)]
        return tuple(e for e in found if e is not None)


@dataclass(frozen=True)
class ReturnsIR:
    """What a tool returns: a presenter's shape of one item or of a collection."""

    presenter: str
    collection: bool


@dataclass(frozen=True)
class WorkflowIR:
    """A finite-state machine, already checked: every name in it is a declared state or event."""

    name: str
    ident: str
    initial: str
    states: tuple[str, ...]
    finals: tuple[str, ...]
    transitions: tuple[tuple[str, str, str], ...]  # (state, event, target), in declaration order
    # The wire names of the tools fusiongen generates for it ([server] tool_names): "invoice.start" or "invoice_start".
    start_tool: str
    status_tool: str
    resolve_tool: str  # reserved even when no tool of the workflow needs it


@dataclass(frozen=True)
class BindingIR:
    workflow: str
    states: tuple[str, ...]
    transition: str | None
    retry_in_doubt: bool = True  # after an unknown outcome: run again with the same key, or refuse (IN_DOUBT)


@dataclass(frozen=True)
class RequiresIR:
    scopes: tuple[str, ...] = ()  # every one of them
    roles: tuple[str, ...] = ()  # at least one of them (none listed: any caller)


@dataclass(frozen=True)
class AuthIR:
    roles_claim: str = "roles"
    tenant_claim: str | None = None
    scopes: tuple[tuple[str, str], ...] = ()  # (scope, what it allows), in spec order


@dataclass(frozen=True)
class IconIR:
    src: str  # https: or data:image/..., checked
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None


@dataclass(frozen=True)
class EffectIR:
    """Something a tool's handler can do, found by reading the handler module (docs/spec.md §6.8).

    `access` is what a client's trust depends on: "read", "write" (files, the environment, an HTTP method that
    is not GET/HEAD/OPTIONS, a raw socket), "execute" (a process, evaluated code, native code), "dynamic" (a
    call the analysis cannot resolve by construction: `__import__`, `importlib`, `getattr` on a module with a
    computed name) or "unknown" (a call into a module the analysis does not read)."""

    category: str  # files | processes | network | code | environment | dynamic | unknown
    access: str  # read | write | execute | dynamic | unknown
    call: str  # what is called, as the analysis names it: "subprocess.run", "httpx.post", "open(mode 'w')"
    line: int  # where, in the handler module
    column: int
    via: tuple[str, ...] = ()  # the module's own functions from the handler down to the one that calls it
    # An environment variable's name, when the call names it by a literal or a module constant: `server.json`
    # lists those the handlers read (`required`: read as os.environ[...], which fails when it is unset).
    variable: str | None = None
    required: bool = False

    @property
    def refuses_query(self) -> bool:
        """Whether it contradicts `kind = "query"` (readOnlyHint): it can change something or escapes analysis."""
        return self.access in ("write", "execute", "dynamic")


@dataclass(frozen=True)
class ToolIR:
    name: str  # the spec's name, e.g. "invoice.get": diagnostics and spec lookups use it
    wire: str  # the MCP tool name the model sees ([server] tool_names): "invoice.get", or "invoice_get"
    ident: str  # a Python identifier derived from it, e.g. "invoice_get"
    handler: str  # the handler function's name in the handler module
    kind: str  # query | mutation | action
    description: str | None
    inputs: tuple[FieldIR, ...]
    guarded: tuple[str, ...]  # names refused with a "guarded" message (from input_from's model)
    returns: ReturnsIR | None
    compact_description: str | None = None
    binding: BindingIR | None = None
    returns_text: bool = False  # `returns = "text"`: a plain-text result (then `returns` is None)
    errors: tuple[tuple[str, str], ...] = ()  # (code, meaning): the domain errors its handler declares
    requires: RequiresIR | None = None
    # (role, presenter): a caller with the role gets that presenter instead of `returns` (first match wins)
    returns_for_role: tuple[tuple[str, str], ...] = ()
    title: str | None = None  # MCP Tool.title: a display name for humans
    icons: tuple[IconIR, ...] = ()
    tags: tuple[str, ...] = ()  # what `--tags` selects by
    resource: bool = False  # the read of the resource `name`, not a tool (see ResourceIR)
    # What its handler can do, read from the handler module by `api.validate` (empty: nothing found, or no
    # module to read: ServerIR.handlers_file says which).
    effects: tuple[EffectIR, ...] = ()
    # Freshness (docs/spec.md §6.9): the tools whose earlier results its success makes stale (spec names, resolved
    # from `invalidates`), the tools whose success makes its own results stale (wire names), and `immutable`.
    invalidates: tuple[str, ...] = ()
    stale_after: tuple[str, ...] = ()
    immutable: bool = False

    @property
    def label(self) -> str:
        return f'{"resource" if self.resource else "tool"} "{self.name}"'

    @property
    def presenters(self) -> tuple[str, ...]:
        """Every presenter a call of it may use: `returns` first, then those of returns_for_role, each once."""
        if self.returns is None:
            return ()
        return tuple(dict.fromkeys((self.returns.presenter, *(p for _, p in self.returns_for_role))))


@dataclass(frozen=True)
class ResourceIR:
    """A resource or resource template. Reading it runs `tool`, a query that never appears in tools/list:
    its inputs are the URI template's variables and its result is rendered by the resource's presenter, so a
    read validates, calls, shapes, redacts and annotates exactly as a tool call does."""

    name: str
    uri: str
    description: str | None
    variables: tuple[str, ...]  # in the order the template names them; () for a static resource
    tool: ToolIR


@dataclass(frozen=True)
class PromptArgumentIR:
    name: str
    description: str | None
    required: bool
    values: tuple[str, ...] = ()  # an enum's values: checked on prompts/get, offered by completion


@dataclass(frozen=True)
class PromptIR:
    name: str
    description: str | None
    arguments: tuple[PromptArgumentIR, ...]
    # The template split at build time: (text, False) is literal text, (name, True) an argument's value.
    parts: tuple[tuple[str, bool], ...]
    requires: RequiresIR | None = None  # what a caller needs to list and get it, as a tool's


@dataclass(frozen=True)
class ServerIR:
    name: str
    version: str
    package: str
    instructions: str | None
    handlers_module: str
    models: tuple[ModelIR, ...]
    presenters: tuple[PresenterIR, ...]  # explicit ones in spec order, then implicit ones
    tools: tuple[ToolIR, ...]
    workflows: tuple[WorkflowIR, ...] = ()
    state_handle_key: str = "workflow_id"
    tool_names: str = "snake"  # [server] tool_names: how spec tool names become the names the model sees
    exposition: str = "flat"  # [server] exposition: "grouped" serves one tool per group (names.group_and_action)
    auth: AuthIR | None = None
    resources: tuple[ResourceIR, ...] = ()
    prompts: tuple[PromptIR, ...] = ()
    # The handler module's path relative to the spec's folder, when `api.validate` read it for effects.
    handlers_file: str | None = None
    registry_name: str = "invalid.example/server"  # [server] registry_name: server.json's name

    @property
    def handled(self) -> tuple[ToolIR, ...]:
        """Everything that calls a handler: the tools, then each resource's read."""
        return (*self.tools, *(r.tool for r in self.resources))

    max_list_tokens: int | None = None  # [server] max_list_tokens: each tools/list entry's budget (api checks it)
    max_result_tokens: int | None = None  # [server] max_result_tokens: each tool's worst-case result (api checks it)
    output_schemas: bool = True  # [server] output_schemas = "none": tools/list carries no outputSchema
    http: bool = True  # [server] transports lists "http": the server can serve streamable HTTP (--http) and --auth

    def model(self, name: str) -> ModelIR:
        return next(m for m in self.models if m.name == name)

    def presenter(self, name: str) -> PresenterIR:
        return next(p for p in self.presenters if p.name == name)
