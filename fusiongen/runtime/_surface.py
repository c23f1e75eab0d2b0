"""The protocol surface beside tools: resources, prompts, completion, and which tools a server exposes.

A resource read goes through the tool pipeline (`run_tool`: arguments checked, handler called, result
shaped, redacted and annotated by its presenter), with the URI template's variables as the arguments.
Its contents are one JSON text whose body is the envelope a tool result's structured content carries
(`data`, `rules`, `suggestions`): a resource has no `isError` and no content blocks of its own, and a
client that reads it must get the presenter's guidance with the data. What fails is a JSON-RPC error:
INVALID_PARAMS for a URI no resource matches, bad variables or a handler that found nothing (None),
INTERNAL_ERROR for a failed handler or data that does not fit; its message is the same text a tool
call's error would carry (never the handler's exception text).

Prompts are text: an argument's value is substituted where the template names it, never parsed,
formatted or evaluated (the template was split into parts at build time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from ._runtime import Handler, ToolError, call_outcome, settle

logger = logging.getLogger(__name__)

JSON_MIME_TYPE: Final = "application/json"
# completion/complete answers at most this many values (the protocol's limit).
MAX_COMPLETIONS: Final = 100

# --- exposure -------------------------------------------------------------------------------------

EXPOSE_MODES: Final = ("all", "read-only")


def exposed_tools(
    kinds: Mapping[str, str],
    tags: Mapping[str, frozenset[str]],
    workflow_tools: Mapping[str, Sequence[str]],
    expose: str = "all",
    only_tags: Iterable[str] | None = None,
) -> frozenset[str]:
    """The names of the tools this server serves, chosen once at start-up (`--expose`, `--tags`).

    `kinds` and `tags` describe the spec's tools; `workflow_tools` maps each generated workflow tool
    (`W.start`, `W.status`, `W.resolve`) to the tools bound to its workflow. "read-only" keeps the
    `kind = "query"` tools; `only_tags` keeps the tools with at least one of those tags; both together
    keep what both keep. Under either filter, a workflow's generated tools are served while any of its bound
    tools is: without them, a workflow handle would open nothing.
    """
    if expose not in EXPOSE_MODES:
        raise ValueError(f"expose must be one of {', '.join(EXPOSE_MODES)}, not {expose!r}")
    wanted = frozenset(only_tags) if only_tags is not None else None
    served = {
        name
        for name, kind in kinds.items()
        if (expose == "all" or kind == "query") and (wanted is None or tags.get(name, frozenset()) & wanted)
    }
    if expose == "all" and wanted is None:  # nothing is filtered: every tool, a workflow's without bound tools too
        return frozenset(served | set(workflow_tools))
    served |= {name for name, bound in workflow_tools.items() if any(b in served for b in bound)}
    return frozenset(served)


def tag_list(text: str) -> list[str]:
    """`--tags billing,write` → ["billing", "write"] (blanks dropped)."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def add_exposure_arguments(parser: argparse.ArgumentParser) -> None:
    """--expose and --tags: the served surface, chosen at start-up without a rebuild."""
    parser.add_argument(
        "--expose",
        choices=EXPOSE_MODES,
        default="all",
        help='which tools to serve: all (default) or read-only (only kind = "query" tools)',
    )
    parser.add_argument(
        "--tags",
        type=tag_list,
        default=None,
        metavar="TAG,...",
        help="serve only the tools with at least one of these tags (and the workflow tools of their workflows)",
    )


# --- resources ------------------------------------------------------------------------------------

# How the server reads one resource: (variables, request context) → the presented tool result.
ResourceRead = Callable[[Mapping[str, Any], Any], Awaitable[types.CallToolResult]]


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceRoute:
    name: str
    uri: str  # the URI, or its template
    description: str | None
    read: ResourceRead
    numeric: frozenset[str] = frozenset()  # variables whose text is a JSON number or boolean, not a string
    pattern: re.Pattern[str] = dataclasses.field(init=False)
    variables: tuple[str, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        variables = tuple(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", self.uri))
        regex = "".join(
            f"(?P<{part[1:-1]}>[^/?#]+)" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", self.uri)
            if part
        )
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "pattern", re.compile(regex + r"\Z"))

    def match(self, uri: str) -> dict[str, Any] | None:
        """The variables of `uri` if it is this resource's, percent-decoded (and numbers as numbers)."""
        found = self.pattern.match(uri)
        if found is None:
            return None
        return {name: _variable(unquote(value), name in self.numeric) for name, value in found.groupdict().items()}


def _variable(text: str, numeric: bool) -> Any:
    """A URI segment as the argument the tool pipeline checks: text, or for number and boolean variables
    the JSON value it spells (anything else stays text, which the check then refuses by name)."""
    if not numeric:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, bool | int | float) else text


class Resources:
    """The resource table: listing, reading and completing, as the server's handlers call them."""

    def __init__(self, routes: Sequence[ResourceRoute], completions: Mapping[str, Mapping[str, Sequence[str]]]):
        self.routes = tuple(routes)
        self.completions = completions  # URI template -> variable -> its enum values
        self.listing = types.ListResourcesResult(
            resources=[
                types.Resource(name=r.name, uri=r.uri, description=r.description, mime_type=JSON_MIME_TYPE)
                for r in self.routes
                if not r.variables
            ]
        )
        self.templates = types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name=r.name, uri_template=r.uri, description=r.description, mime_type=JSON_MIME_TYPE
                )
                for r in self.routes
                if r.variables
            ]
        )

    async def list(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return self.listing

    async def list_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return self.templates

    async def read(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        for route in self.routes:
            variables = route.match(params.uri)
            if variables is not None:
                result = await route.read(variables, ctx)
                return resource_result(route.name, params.uri, result)
        known = ", ".join(r.uri for r in self.routes)
        # SEP-2164: not found is -32602 with the URI in `data`.
        raise MCPError(INVALID_PARAMS, f'Unknown resource: "{params.uri}". Resources: {known}.', {"uri": params.uri})


def resource_result(name: str, uri: str, result: types.CallToolResult) -> types.ReadResourceResult:
    """A presented tool result as a resource's contents; an error result as the JSON-RPC error it is."""
    if result.is_error:
        text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        outcome = call_outcome(result)
        logger.info("resource %s: read failed (%s)", name, outcome)
        code = INVALID_PARAMS if outcome in ("VALIDATION_ERROR", "NOT_FOUND") else INTERNAL_ERROR
        raise MCPError(code, text, {"uri": uri})
    # The presenter's structured envelope (data, rules, suggestions): a resource has no isError and no
    # separate blocks a client would pass on, so the guidance travels inside the one body.
    body = json.dumps(result.structured_content, ensure_ascii=False, indent=2)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=JSON_MIME_TYPE, text=body)])


# The code a resource read answers when its handler returns None: it found nothing at the URI, which is
# not data that fails its schema. resource_result turns it into the protocol's "invalid params" error.
RESOURCE_ERRORS: Final = frozenset({"NOT_FOUND"})


def found_or_not_found(handler: Handler, name: str) -> Handler:
    """A resource's handler: None from the user's handler is NOT_FOUND, not an empty result."""

    async def read(args: Any, ctx: Any) -> object:
        raw = await settle(await handler(args, ctx))
        if raw is None:
            raise ToolError(
                "NOT_FOUND",
                f'Resource "{name}": nothing at that URI.',
                recovery="Check the URI's variables; list or search with the server's tools to find one that exists.",
            )
        return raw

    return read


# --- prompts --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PromptRoute:
    prompt: types.Prompt
    parts: tuple[tuple[str, bool], ...]  # (literal text, False) or (argument name, True)
    choices: Mapping[str, tuple[str, ...]]  # enum arguments -> their values


class Prompts:
    def __init__(self, routes: Sequence[PromptRoute]) -> None:
        self.routes = {r.prompt.name: r for r in routes}
        self.listing = types.ListPromptsResult(prompts=[r.prompt for r in routes])

    async def list(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return self.listing

    async def get(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        route = self.routes.get(params.name)
        if route is None:
            known = ", ".join(self.routes)
            raise MCPError(INVALID_PARAMS, f'Unknown prompt: "{params.name}". Prompts: {known}.')
        text = render_prompt(route, params.arguments or {})
        return types.GetPromptResult(
            description=route.prompt.description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )


def render_prompt(route: PromptRoute, arguments: Mapping[str, str]) -> str:
    """The prompt's text: each argument's value put where the template names it, as text.

    Unknown, missing required and out-of-enum arguments are refused together, by name (INVALID_PARAMS);
    an optional argument that is absent is empty text.
    """
    declared = {a.name: a for a in route.prompt.arguments or ()}
    problems = [f'unknown argument "{name}"' for name in arguments if name not in declared]
    for name, argument in declared.items():
        value = arguments.get(name)
        if value is None and argument.required:
            problems.append(f'missing required argument "{name}"')
        elif value is not None and name in route.choices and value not in route.choices[name]:
            problems.append(f'argument "{name}" must be one of ' + ", ".join(route.choices[name]))
    if problems:
        raise MCPError(INVALID_PARAMS, f'Prompt "{route.prompt.name}": ' + "; ".join(problems) + ".")
    return "".join(arguments.get(text, "") if is_argument else text for text, is_argument in route.parts)


# --- completion -----------------------------------------------------------------------------------


def completer(
    prompts: Prompts | None, resources: Resources | None
) -> Callable[[Any, types.CompleteRequestParams], Awaitable[types.CompleteResult]]:
    """completion/complete: the enum values of a prompt argument or a template variable that start with
    what was typed so far (case-insensitively). Anything else has no completions."""

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        choices: Sequence[str] = ()
        if isinstance(params.ref, types.PromptReference) and prompts is not None:
            route = prompts.routes.get(params.ref.name)
            choices = route.choices.get(params.argument.name, ()) if route is not None else ()
        elif isinstance(params.ref, types.ResourceTemplateReference) and resources is not None:
            choices = resources.completions.get(params.ref.uri, {}).get(params.argument.name, ())
        typed = params.argument.value.casefold()
        values = [v for v in choices if v.casefold().startswith(typed)]
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS
            )
        )

    return complete
