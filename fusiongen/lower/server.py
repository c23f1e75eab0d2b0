"""Lower a loaded spec to the IR: the server table, then each concept in dependency order.

models → presenters (they show models) → workflows → tools (they read models' fillable fields, return
presenters and bind to workflows) → the checks across them. Every diagnostic is collected on the way;
if any error was recorded, the caller gets a `SpecError` instead of an IR.
"""

from __future__ import annotations

import keyword
import re

from fusiongen.diagnostics import Diagnostic, SpecError, has_errors
from fusiongen.ir import ServerIR
from fusiongen.load.loader import LoadedSpec
from fusiongen.lower.audiences import check_audience_models, with_audiences
from fusiongen.lower.auth import check_resource_guards, lower_auth, with_requires, with_surface_requires
from fusiongen.lower.context import LowerContext
from fusiongen.lower.exposition import check_groups
from fusiongen.lower.freshness import with_freshness
from fusiongen.lower.generated_names import check_generated_names
from fusiongen.lower.models import lower_models
from fusiongen.lower.presenters import lower_presenters, with_implicit_presenters
from fusiongen.lower.surface import check_tags, lower_prompts, lower_resources
from fusiongen.lower.tools import check_collisions, check_wire_names, check_workflow_names, lower_tool
from fusiongen.lower.workflows import lower_workflows
from fusiongen.names import MODULE, RESERVED_PACKAGES, SERVER_NAME, STDLIB_MODULES, snake_case

# The registry's pattern for a server's name (server.schema.json, ServerDetail.name), with its length bounds.
REGISTRY_NAME = re.compile(r"(?=.{3,200}\Z)[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+\Z")


def lower(loaded: LoadedSpec) -> tuple[ServerIR, list[Diagnostic]]:
    """The IR and the warnings found on the way; any error raises SpecError with every diagnostic."""
    ctx = LowerContext(loaded, list(loaded.problems))
    ir = _lower_server(ctx)
    if has_errors(ctx.diagnostics):
        raise SpecError(ctx.diagnostics)
    return ir, ctx.diagnostics


def _lower_server(ctx: LowerContext) -> ServerIR:
    server = ctx.spec.server
    name_ok = bool(SERVER_NAME.match(server.name))
    if not name_ok:
        ctx.error("FG104", f'server name "{server.name}" must match [a-z][a-z0-9_-]*', ("server", "name"), value=True)
    package = server.package or snake_case(server.name).replace("-", "_") + "_server"
    package_ok = name_ok
    if server.package is not None:
        package_ok = ctx.check_identifier(package, ("server", "package"), "package name")
        if package_ok and package in RESERVED_PACKAGES:
            ctx.error(
                "FG141",
                f'package name "{package}" would shadow "{package}", which generated servers import',
                ("server", "package"),
                value=True,
            )
        elif package_ok and package in STDLIB_MODULES:
            package_ok = False
            ctx.error(
                "FG141",
                f'package name "{package}" is the name of a standard-library module: one would shadow the other',
                ("server", "package"),
                value=True,
                hint="rename it, e.g. with a _server suffix",
            )
    handlers = server.handlers or f"{package}_handlers"
    registry_name = server.registry_name or f"invalid.example/{server.name}"
    if server.registry_name is not None and not REGISTRY_NAME.match(server.registry_name):
        ctx.error(
            "FG202",
            f'registry_name "{server.registry_name}" is not "namespace/name" (the MCP registry\'s server name)',
            ("server", "registry_name"),
            value=True,
            hint='reverse-DNS namespace, one slash, then the name: "io.github.acme/billing"',
        )
    http = _lower_transports(ctx)
    # A default derived from a name already reported as invalid would only repeat that mistake.
    if (server.handlers is not None or package_ok) and (
        not MODULE.match(handlers) or any(keyword.iskeyword(p) for p in handlers.split("."))
    ):
        ctx.error(
            "FG140",
            f'handler module "{handlers}" is not an importable Python module name',
            ("server", "handlers"),
            value=True,
        )
    elif handlers.split(".")[0] in RESERVED_PACKAGES:
        ctx.error(
            "FG141",
            f'handler module "{handlers}" would shadow "{handlers.split(".")[0]}", which generated servers import',
            ("server", "handlers"),
            value=True,
        )
    elif handlers.split(".")[0] in STDLIB_MODULES:
        ctx.error(
            "FG141",
            f'handler module "{handlers}" would shadow or be shadowed by the standard-library module '
            f'"{handlers.split(".")[0]}"',
            ("server", "handlers"),
            value=True,
            hint="give the handler module its own name",
        )
    elif handlers.split(".")[0] == package:
        ctx.error(
            "FG143",
            f'handler module "{handlers}" and the generated package "{package}" share an import name',
            ("server", "handlers") if server.handlers else ("server", "package"),
            value=True,
            hint="give the handler module its own name",
        )
    models = lower_models(ctx)
    presenters, _ = lower_presenters(ctx, models)
    workflows, binding = lower_workflows(ctx)
    auth = lower_auth(ctx)
    lowered = (
        lower_tool(ctx, name, spec, binding.binding(name, spec, workflows)) for name, spec in ctx.spec.tools.items()
    )
    tools = with_freshness(ctx, tuple(with_audiences(ctx, with_requires(ctx, tool, auth)) for tool in lowered))
    for workflow in workflows.values():
        binding.check_fireable(workflow, [t.binding for t in tools if t.binding])
        binding.check_model(workflow, tools)
    binding.check_suggestions(presenters, tools, workflows)
    check_workflow_names(ctx, server.state_handle_key, tools)
    resources, prompts = with_surface_requires(ctx, lower_resources(ctx, tools), lower_prompts(ctx), auth)
    check_tags(ctx)
    presenters = with_implicit_presenters(ctx, presenters, models, (*tools, *(r.tool for r in resources)))
    check_audience_models(ctx, tools, presenters)
    check_resource_guards(ctx, tools, resources, presenters, models)
    check_collisions(ctx, models, tools)
    check_wire_names(ctx, tools)
    check_groups(ctx, tools)
    check_generated_names(ctx, models, presenters, (*tools, *(r.tool for r in resources)), tuple(workflows.values()))
    return ServerIR(
        name=server.name,
        version=server.version,
        package=package,
        instructions=server.instructions,
        handlers_module=handlers,
        registry_name=registry_name,
        models=models,
        presenters=tuple(presenters),
        tools=tools,
        workflows=tuple(workflows.values()),
        state_handle_key=server.state_handle_key,
        tool_names=server.tool_names,
        exposition=server.exposition,
        auth=auth,
        resources=resources,
        prompts=prompts,
        max_list_tokens=server.max_list_tokens,
        max_result_tokens=server.max_result_tokens,
        output_schemas=server.output_schemas == "full",
        http=http,
    )


def _lower_transports(ctx: LowerContext) -> bool:
    """Whether the server serves streamable HTTP too: `[server] transports`. stdio is always served (local hosts,
    `fusiongen inspect` and the user's tests reach every server through it), and `[auth]` describes the bearer
    tokens only HTTP carries, so a server without HTTP has no use for it."""
    transports = ctx.spec.server.transports
    for i, transport in enumerate(transports):
        if transport in transports[:i]:
            ctx.error(
                "FG203",
                f'transport "{transport}" is listed twice',
                ("server", "transports", i),
                value=True,
                hint="list each transport once",
            )
    if "stdio" not in transports:
        ctx.error(
            "FG203",
            "transports leaves out stdio, which every server serves",
            ("server", "transports"),
            value=True,
            hint='list it: transports = ["stdio", "http"], or ["stdio"] for a server without HTTP',
        )
    http = "http" in transports
    if not http and ctx.spec.auth is not None:
        ctx.error(
            "FG204",
            "[auth] describes bearer tokens, which only HTTP carries, and this server serves stdio only",
            ("auth",),
            hint='add "http" to [server] transports, or remove [auth] (stdio is the local user\'s own process)',
        )
    return http
