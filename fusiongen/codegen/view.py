"""Prepare everything the templates print, so that templates only place values and never decide.

Each `*View` holds names, literals and small Python expressions computed from the IR. The code
shapes chosen here (which runtime check a field uses, how a list is walked) are the generated
server's hot path, so they are straight-line and do no work a spec could have done at build time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusiongen.codegen.constants import ConstantView
from fusiongen.codegen.jsonschema import input_schema, output_schema
from fusiongen.codegen.runtime_copy import declared_dependencies
from fusiongen.codegen.view_inputs import InputFieldView, InputViews, NestedInputView
from fusiongen.codegen.view_presenters import PresenterView, build_presenters, user_blocks_in
from fusiongen.codegen.view_shapes import ShapeView, ShapeViews
from fusiongen.codegen.view_surface import SurfaceView, surface_view
from fusiongen.codegen.view_workflows import (
    BindingView,
    WorkflowView,
    binding_views,
    handle_property,
    modern_description,
    resolve_schema,
    state_schemas,
    with_errors,
    workflow_views,
)
from fusiongen.ir import ServerIR, ToolIR
from fusiongen.names import group_and_action, pascal_case, snake_case
from fusiongen.pyliteral import PyName, comment_text, markdown_text, py_literal, py_string, toml_string


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
    input_doc: str  # its input class's docstring: 'Validated arguments of the invoice.get tool.'
    # That docstring, and each field's name and annotation, as literals: inputs.ARGUMENT_CLASSES makes the class
    input_doc_literal: str
    input_fields_literal: str
    input_schema: ConstantView
    output_schema: ConstantView | None
    present_expression: str  # run_tool's `present`: the presenter (with `user`), as_text_result, or None
    annotations: str
    kind: str
    description_text: str  # for the generated README's table
    bound: bool
    modern_description_literal: str  # 2026-07-28: the stable list says what a bound tool needs
    compact_description_literal: str | None
    errors_literal: str | None  # the codes its spec declares, for run_tool: `frozenset({...})`
    stale_literal: str | None  # the tools its success makes stale (spec names, with_stale maps them to wire names)
    title_literal: str | None = None  # MCP Tool.title
    # `fields_set` of its input object: the arguments sent, but a null for an optional field that is not
    # nullable, which is that field left out (docs/spec.md §5.3).
    fields_set: str = "frozenset(arguments)"
    icons_literal: str | None = None  # MCP Tool.icons: a list of types.Icon(...)


@dataclass(frozen=True)
class ServerView:
    name: str
    name_literal: str
    distribution: str  # the pip distribution and console script of the generated server
    distribution_literal: str  # as TOML
    distribution_py_literal: str  # as Python (server.py: open_store names the `redis` extra of it)
    description_literal: str
    version_toml: str
    instructions: str | None  # as Markdown, for the README
    handlers_module: str
    spec_path: str  # encoded for a Markdown code span
    version_literal: str
    instructions_literal: str
    package: str
    handlers_module_literal: str
    handlers_dir_literal: str
    # The handler module's file when it sits beside the package (the spec's folder is OUT, as `fusiongen init` makes
    # it): the wheel includes it, so that `pip install .` gives an installed server whose handlers import.
    bundled_handlers_file: str | None
    tools: tuple[ToolView, ...]
    parsed: tuple[ToolView, ...]  # the tools, then each resource's read: what inputs.py parses
    resource_reads: dict[str, ToolView]  # resource read ident -> its view
    surface: SurfaceView  # resources, prompts, completion, exposure
    shapes: tuple[ShapeView, ...]
    nested_inputs: tuple[NestedInputView, ...]
    output_constants: tuple[ConstantView, ...]
    input_constants: tuple[ConstantView, ...]
    output_schemas: tuple[ConstantView, ...]  # one per presenter and shape, shared by the tools returning it
    presenters: tuple[PresenterView, ...]
    presenter_constants: tuple[tuple[str, str], ...]  # (name, literal)
    uses_expressions: bool  # whether any presenter calls the expression helpers (_expressions.py)
    workflows: tuple[WorkflowView, ...]
    bindings: tuple[BindingView, ...]
    handle_key_literal: str
    state_constants: tuple[ConstantView, ...]  # schemas of the generated <workflow>.start/.status tools
    definitions: tuple[ConstantView, ...]  # model definitions the tool schemas share, by name
    # presenter name -> its spec sends its audience = "user" blocks; None when no presenter declares one
    user_blocks_literal: str | None
    tool_names_literal: str  # TOOL_NAMES: spec and wire names → wire name, for the tools a ToolError suggests
    # exposition = "grouped": GROUPS, each tool's text name → (served group, action); None when flat
    groups_literal: str | None = None
    # pyproject.toml: the requirements (TOML strings) of the project, and of each extra it declares
    dependencies_toml: tuple[str, ...] = ()
    extras_toml: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (wire name literal, scopes literal, roles literal) of each tool with `requires`, in spec order.
    requires: tuple[tuple[str, str, str], ...] = ()
    # The same of each resource (by name) and prompt (by name) with `requires`.
    resource_requires: tuple[tuple[str, str, str], ...] = ()
    prompt_requires: tuple[tuple[str, str, str], ...] = ()
    auth_scopes_literal: str | None = None  # the declared scopes, advertised in the metadata under --auth
    roles_claim_literal: str = '"roles"'
    tenant_claim_literal: str = "None"
    auth_declared: bool = False  # the spec has an [auth] table
    http: bool = True  # [server] transports lists "http": --http, its options and --auth exist

    @property
    def guarded(self) -> bool:
        """Something has `requires`: server.py imports `_auth`'s checks."""
        return bool(self.requires or self.resource_requires or self.prompt_requires)


class _ToolViews:
    """Tool views, and the model definitions their JSON schemas share."""

    def __init__(self, server: ServerIR, inputs: InputViews) -> None:
        self.server = server
        self.inputs = inputs
        self.definitions: dict[str, ConstantView] = {}  # model definitions shared by tool schemas

    def share_definitions(self, schema: dict[str, Any], mode: str) -> dict[str, Any]:
        """Each recursive model's definition once (the only models left in `$defs`, codegen/jsonschema.py), as a
        module constant the tool schemas refer to (not a copy per tool)."""
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
        guarded = f"_{upper}_GUARDED_INPUTS"  # never `_<MODEL>_GUARDED`, a nested model's (view_inputs)
        self.inputs.input_constants[keys] = ConstantView(
            keys, "frozenset[str]", py_literal(frozenset(f.name for f in tool.inputs))
        )
        self.inputs.input_constants[guarded] = ConstantView(
            guarded, "frozenset[str]", py_literal(frozenset(tool.guarded))
        )
        in_schema = input_schema(self.server, tool)
        if tool.binding is not None:
            in_schema["properties"][self.server.state_handle_key] = handle_property(self.server, tool)
        out_schema = output_schema(self.server, tool)
        in_name = f"{upper}_INPUT"
        out_name = ""
        if tool.returns is not None:  # one constant per presenter and shape: tools returning the same share it
            presenter = self.server.presenter(tool.returns.presenter)
            out_name = f"{presenter.snake.upper()}_{'COLLECTION' if tool.returns.collection else 'RESULT'}_OUTPUT"
            if len(tool.presenters) > 1:  # the union of its audiences' envelopes is the tool's own
                out_name = f"{upper}_BY_ROLE_OUTPUT"
            if tool.invalidates:  # its envelope also says what its success made stale
                out_name = f"{upper}_OUTPUT"
        in_schema = self.share_definitions(in_schema, "INPUT")
        out_schema = self.share_definitions(out_schema, "OUTPUT") if out_schema is not None else None
        kind_hints = {
            "query": "read_only_hint=True, destructive_hint=False, idempotent_hint=True",
            "mutation": "read_only_hint=False, destructive_hint=True",
            "action": "read_only_hint=False, destructive_hint=False",
        }
        what = f"the {tool.wire} {'resource' if tool.resource else 'tool'}"
        inputs = tuple(self.inputs.input_field(f, "") for f in tool.inputs)
        return ToolView(
            name=tool.wire,
            name_literal=py_string(tool.wire),
            ident=tool.ident,
            handler=tool.handler,
            input_class=f"{pascal_case(tool.ident)}Input",
            parse_function=f"parse_{tool.ident}",
            description_literal=py_string(with_errors(tool, tool.description or tool.wire)),
            keys_constant=keys,
            guarded_constant=guarded,
            inputs=inputs,
            input_doc=f"Validated arguments of {what}.",
            input_doc_literal=py_string(f"Validated arguments of {what}."),
            input_fields_literal=py_literal(tuple((f.name, f.annotation) for f in inputs)),
            fields_set=_fields_set(tool),
            input_schema=ConstantView(in_name, "dict[str, Any]", py_literal(in_schema, 0, len(in_name) + 23)),
            output_schema=ConstantView(out_name, "dict[str, Any]", py_literal(out_schema, 0, len(out_name) + 23))
            if out_schema is not None
            else None,
            present_expression=_present_expression(self.server, tool),
            annotations=kind_hints[tool.kind],
            kind=tool.kind,
            description_text=markdown_text(tool.description or tool.wire, inline=True),
            bound=tool.binding is not None,
            modern_description_literal=py_string(modern_description(self.server, tool)),
            compact_description_literal=py_string(tool.compact_description) if tool.compact_description else None,
            errors_literal=py_literal(frozenset(code for code, _ in tool.errors)) if tool.errors else None,
            stale_literal=py_literal(tool.invalidates) if tool.invalidates else None,
            title_literal=py_string(tool.title) if tool.title else None,
            icons_literal=_icons_literal(tool),
        )


def _present_expression(server: ServerIR, tool: ToolIR) -> str:
    """What server.py passes run_tool as `present`, for the tool's kind of result: with returns_for_role, the
    runtime's `by_role`, which picks one per call from the caller's roles (`returns` for everyone else)."""
    if tool.returns is None:
        return "as_text_result" if tool.returns_text else "None"
    default = _presenter_function(server, tool.returns.presenter, tool.returns.collection)
    if not tool.returns_for_role:
        return default
    table = ", ".join(
        f"({py_string(role)}, {_presenter_function(server, name, tool.returns.collection)})"
        for role, name in tool.returns_for_role
    )
    return f"by_role({default}, ({table},))"


def _presenter_function(server: ServerIR, name: str, collection: bool) -> str:
    presenter = server.presenter(name)
    function = f"presenters.present_{presenter.snake}" + ("_many" if collection else "")
    if user_blocks_in(server, presenter, collection):
        return f"partial({function}, user=user)"
    return function


def _icons_literal(tool: ToolIR) -> str | None:
    """`[types.Icon(src=..., ...), ...]`: only the keys the spec sets."""
    if not tool.icons:
        return None
    icons = []
    for icon in tool.icons:
        keys = [f"src={py_string(icon.src)}"]
        keys += [f"mime_type={py_string(icon.mime_type)}"] if icon.mime_type else []
        keys += [f"sizes={py_literal(list(icon.sizes))}"] if icon.sizes else []
        keys += [f"theme={py_string(icon.theme)}"] if icon.theme else []
        icons.append(f"types.Icon({', '.join(keys)})")
    return "[" + ", ".join(icons) + "]"


def build_view(server: ServerIR, handlers_dir: str, spec_path: str) -> ServerView:
    inputs = InputViews(server)
    shaping = ShapeViews(server)
    tool_views = _ToolViews(server, inputs)
    tools = tuple(tool_views.tool(t) for t in server.tools)
    reads = tuple(tool_views.tool(r.tool) for r in server.resources)
    presenter_constants: dict[str, str] = {}
    presenters = build_presenters(server, shaping, presenter_constants)
    shapes = shaping.shapes()
    nested = inputs.nested_inputs()
    workflows = workflow_views(server)
    state_constants: tuple[ConstantView, ...] = ()
    if workflows:
        status_input, state_output = state_schemas(server)
        state_constants = (
            ConstantView("WORKFLOW_STATUS_INPUT", "dict[str, Any]", py_literal(status_input, 0, 45)),
            ConstantView("WORKFLOW_STATE_OUTPUT", "dict[str, Any]", py_literal(state_output, 0, 45)),
        )
        if any(w.resolve_tool_literal for w in workflows):
            resolve_input = py_literal(resolve_schema(server), 0, 45)
            state_constants += (ConstantView("WORKFLOW_RESOLVE_INPUT", "dict[str, Any]", resolve_input),)
    distribution = server.package.replace("_", "-")
    required, extras = declared_dependencies(server.http)
    return ServerView(
        dependencies_toml=tuple(toml_string(r) for r in required),
        extras_toml=tuple(
            (extra, tuple(toml_string(r) for r in requirements))
            for extra, requirements in sorted(extras.items())
            if extra != "redis" or workflows  # only a server with workflows has a state store to keep in Redis
        ),
        distribution=distribution,
        distribution_literal=toml_string(distribution),
        distribution_py_literal=py_string(distribution),
        description_literal=toml_string(f"The {server.name} MCP server (generated by fusiongen)."),
        version_toml=toml_string(server.version),
        instructions=markdown_text(server.instructions) if server.instructions else None,
        handlers_module=server.handlers_module,
        spec_path=comment_text(spec_path),
        name=server.name,
        name_literal=py_string(server.name),
        version_literal=py_string(server.version),
        instructions_literal=py_string(server.instructions) if server.instructions else "None",
        package=server.package,
        handlers_module_literal=py_string(server.handlers_module),
        handlers_dir_literal=py_string(handlers_dir),
        bundled_handlers_file=toml_string(f"{server.handlers_module}.py")
        if handlers_dir == ".." and "." not in server.handlers_module
        else None,
        tools=tools,
        parsed=tools + reads,
        resource_reads={r.ident: r for r in reads},
        surface=surface_view(server),
        shapes=shapes,
        nested_inputs=nested,
        output_constants=tuple(sorted(shaping.output_constants.values(), key=lambda c: c.name)),
        input_constants=tuple(inputs.input_constants.values()),
        output_schemas=tuple({t.output_schema.name: t.output_schema for t in tools if t.output_schema}.values()),
        presenters=presenters,
        presenter_constants=tuple(presenter_constants.items()),
        uses_expressions=any(p.uses_expressions for p in presenters),
        workflows=workflows,
        bindings=binding_views(server),
        handle_key_literal=py_string(server.state_handle_key),
        state_constants=state_constants,
        definitions=tuple(sorted(tool_views.definitions.values(), key=lambda c: c.name)),
        user_blocks_literal=_user_blocks_literal(server),
        tool_names_literal=_tool_names_literal(server, workflows),
        groups_literal=_groups_literal(server, workflows),
        auth_declared=server.auth is not None,
        http=server.http,
        requires=tuple(
            (py_string(t.wire), _frozenset_literal(t.requires.scopes), _frozenset_literal(t.requires.roles))
            for t in server.tools
            if t.requires is not None
        ),
        resource_requires=tuple(
            (py_string(r.name), _frozenset_literal(r.tool.requires.scopes), _frozenset_literal(r.tool.requires.roles))
            for r in server.resources
            if r.tool.requires is not None
        ),
        prompt_requires=tuple(
            (py_string(p.name), _frozenset_literal(p.requires.scopes), _frozenset_literal(p.requires.roles))
            for p in server.prompts
            if p.requires is not None
        ),
        auth_scopes_literal=py_literal(tuple(s for s, _ in server.auth.scopes))
        if server.auth is not None and server.auth.scopes
        else None,
        roles_claim_literal=py_string(server.auth.roles_claim) if server.auth is not None else '"roles"',
        tenant_claim_literal=py_string(server.auth.tenant_claim)
        if server.auth is not None and server.auth.tenant_claim is not None
        else "None",
    )


def _fields_set(tool: ToolIR) -> str:
    """The expression `fields_set` is: every key sent, but a null for an optional field that is not nullable."""
    if all(f.required or f.nullable for f in tool.inputs):
        return "frozenset(arguments)"
    nullable = sorted(f.name for f in tool.inputs if f.nullable)
    if not nullable:
        return "frozenset(k for k, v in arguments.items() if v is not None)"
    return f"frozenset(k for k, v in arguments.items() if v is not None or k in {py_literal(tuple(nullable))})"


def _tool_names_literal(server: ServerIR, workflows: tuple[WorkflowView, ...]) -> str:
    """Every tool the server serves, by the names a handler may write in `ToolError(suggest=[...])`: its spec
    name (as presenters' suggestions use) and the wire name the model sees, both mapped to the wire name."""
    names = {t.wire: t.wire for t in server.tools}
    names |= {t.name: t.wire for t in server.tools}
    with_resolve = {w.name for w in workflows if w.resolve_tool_literal}
    for workflow in server.workflows:
        generated = {"start": workflow.start_tool, "status": workflow.status_tool}
        if workflow.name in with_resolve:
            generated["resolve"] = workflow.resolve_tool
        for suffix, wire in generated.items():
            names |= {wire: wire, f"{workflow.name}.{suffix}": wire}
    return py_literal(names, 0, 30)


def _groups_literal(server: ServerIR, workflows: tuple[WorkflowView, ...]) -> str | None:
    """GROUPS (runtime/_grouping.py): every grouped tool's text name → (the tool served, its action)."""
    if server.exposition != "grouped":
        return None
    named = [(t.wire, t.name) for t in server.tools]
    with_resolve = {w.name for w in workflows if w.resolve_tool_literal}
    for workflow in server.workflows:
        named += [(workflow.start_tool, f"{workflow.name}.start"), (workflow.status_tool, f"{workflow.name}.status")]
        if workflow.name in with_resolve:
            named.append((workflow.resolve_tool, f"{workflow.name}.resolve"))
    groups = {wire: grouped for wire, name in named if (grouped := group_and_action(name, server.tool_names))}
    return py_literal(groups, 0, 30)


def _frozenset_literal(names: tuple[str, ...]) -> str:
    return f"frozenset({{{', '.join(py_string(n) for n in names)}}})" if names else "frozenset()"


def _user_blocks_literal(server: ServerIR) -> str | None:
    declared = {p.name: p.send_user_blocks for p in server.presenters if p.user_blocks}
    return py_literal(declared) if declared else None
