"""The protocol surface beside tools: resources, prompts and completion (copied only into servers whose spec has
resources or prompts; the exposure filter is `_surface.py`).

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

Every way in passes the same path as a tool call: the caller's identity, the `requires` of what it reads
(a `Refusal`, checked before any handler or template runs: refused FORBIDDEN, -32003, naming what is missing),
and the audit line (`audited`). A resource or prompt the caller may not use is not listed in the handshake era;
in 2026-07-28 the lists are the same for everyone and the refusal comes on read, get or complete.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final
from urllib.parse import unquote

import mcp_types as types
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._results import ToolError, tool_error
from ._runtime import Handler, SurfaceError, audited, call_outcome, settle

logger = logging.getLogger(__name__)

JSON_MIME_TYPE: Final = "application/json"
# The JSON-RPC error of a request the caller lacks the scopes or roles for (the implementation-defined server
# error range: JSON-RPC has no "forbidden"; the message is the <tool_error code="FORBIDDEN"> a tool call gets).
FORBIDDEN_ERROR: Final = -32003
FORBIDDEN_RECOVERY: Final = "Do not retry with the same credentials; tell the user which permission is missing."

# Why the caller of `ctx` may not use the resource or prompt `name` (a sentence), or None: the spec's
# `requires`, checked by the generated server through `_auth` (so a server without requires imports no auth).
Refusal = Callable[[str, Any], "str | None"]


def stable_lists(ctx: Any) -> bool:
    """2026-07-28: lists must not vary per caller (every entry is listed; a refusal comes on use)."""
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def forbidden(kind: str, name: str, reason: str, data: Any = None) -> SurfaceError:
    """The refusal of a read, get or completion the caller lacks the scopes or roles for: no data, no values."""
    result = tool_error(name, "FORBIDDEN", f'You may not use {kind} "{name}": {reason}.', FORBIDDEN_RECOVERY)
    text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return SurfaceError(FORBIDDEN_ERROR, text, data, outcome="FORBIDDEN")


# completion/complete answers at most this many values (the protocol's limit).
MAX_COMPLETIONS: Final = 100

# --- resources ------------------------------------------------------------------------------------

# How the server reads one resource: (variables, request context) → the presented tool result.
ResourceRead = Callable[[Mapping[str, Any], Any], Awaitable[types.CallToolResult]]


_SEGMENT_ENDS: Final = re.compile(r"[/?#]")


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceRoute:
    name: str
    uri: str  # the URI, or its template
    description: str | None
    read: ResourceRead
    numeric: frozenset[str] = frozenset()  # variables whose text is a JSON number or boolean, not a string
    # The template as literal text (False) and variable names (True), in order; no two variables are adjacent.
    parts: tuple[tuple[str, bool], ...] = dataclasses.field(init=False)
    variables: tuple[str, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        pieces = re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", self.uri)
        parts = tuple((p[1:-1], True) if p.startswith("{") else (p, False) for p in pieces if p)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "variables", tuple(text for text, variable in parts if variable))

    def match(self, uri: str) -> dict[str, Any] | None:
        """The variables of `uri` if it is this resource's, percent-decoded (and numbers as numbers).

        One pass, left to right, in time linear in the URI (a regular expression with several variables
        backtracks: quadratic on a long URI, and the event loop stalls meanwhile): each variable's value runs to
        the first occurrence of the literal text that follows it in the template (to the end for the last one),
        must not be empty, and holds no `/`, `?` or `#`. So a value never contains the text that follows it."""
        found: dict[str, str] = {}
        at, parts = 0, self.parts
        for i, (text, variable) in enumerate(parts):
            if not variable:
                if not uri.startswith(text, at):
                    return None
                at += len(text)
                continue
            end = uri.find(parts[i + 1][0], at) if i + 1 < len(parts) else len(uri)
            if end <= at or _SEGMENT_ENDS.search(uri, at, end):
                return None
            found[text] = uri[at:end]
            at = end
        if at != len(uri):
            return None
        return {name: _variable(unquote(value), name in self.numeric) for name, value in found.items()}


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

    def __init__(
        self,
        routes: Sequence[ResourceRoute],
        completions: Mapping[str, Mapping[str, Sequence[str]]],
        refusal: Refusal | None = None,
    ):
        self.routes = tuple(routes)
        self.completions = completions  # URI template -> variable -> its enum values
        self.refusal = refusal  # None: no resource has requires
        self.by_uri = {r.uri: r for r in self.routes}
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

    def refused(self, route: ResourceRoute, ctx: Any) -> str | None:
        return self.refusal(route.name, ctx) if self.refusal is not None else None

    def visible(self, ctx: Any) -> set[str] | None:
        """The names of the resources listed to this caller; None: all of them."""
        if self.refusal is None or stable_lists(ctx):
            return None
        return {r.name for r in self.routes if self.refused(r, ctx) is None}

    async def list(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        shown = self.visible(ctx)
        if shown is None:
            return self.listing
        return types.ListResourcesResult(resources=[r for r in self.listing.resources if r.name in shown])

    async def list_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        shown = self.visible(ctx)
        if shown is None:
            return self.templates
        templates = [t for t in self.templates.resource_templates if t.name in shown]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        route = next((r for r in self.routes if r.match(params.uri) is not None), None)
        return await audited(
            "resources/read",
            route.name if route else None,
            {"uri": params.uri},
            ctx,
            partial(self._read, route, ctx, params.uri),
        )

    async def _read(self, route: ResourceRoute | None, ctx: Any, uri: str) -> types.ReadResourceResult:
        if route is None:
            known = ", ".join(r.uri for r in self.routes)
            # SEP-2164: not found is -32602 with the URI in `data`.
            raise SurfaceError(
                INVALID_PARAMS, f'Unknown resource: "{uri}". Resources: {known}.', {"uri": uri}, outcome="NOT_FOUND"
            )
        reason = self.refused(route, ctx)
        if reason is not None:  # before the handler, and before the variables are checked: nothing is learned
            logger.info("resource %s: read refused (FORBIDDEN)", route.name)
            raise forbidden("resource", route.name, reason, {"uri": uri})
        variables = route.match(uri)
        assert variables is not None  # it matched above
        result = await route.read(variables, ctx)
        return resource_result(route.name, uri, result)


def resource_result(name: str, uri: str, result: types.CallToolResult) -> types.ReadResourceResult:
    """A presented tool result as a resource's contents; an error result as the JSON-RPC error it is."""
    if result.is_error:
        text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        outcome = call_outcome(result)
        logger.info("resource %s: read failed (%s)", name, outcome)
        code = INVALID_PARAMS if outcome in ("VALIDATION_ERROR", "NOT_FOUND") else INTERNAL_ERROR
        raise SurfaceError(code, text, {"uri": uri}, outcome=outcome)
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
    def __init__(self, routes: Sequence[PromptRoute], refusal: Refusal | None = None) -> None:
        self.routes = {r.prompt.name: r for r in routes}
        self.refusal = refusal  # None: no prompt has requires
        self.listing = types.ListPromptsResult(prompts=[r.prompt for r in routes])

    def refused(self, name: str, ctx: Any) -> str | None:
        return self.refusal(name, ctx) if self.refusal is not None else None

    async def list(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        if self.refusal is None or stable_lists(ctx):
            return self.listing
        return types.ListPromptsResult(prompts=[p for p in self.listing.prompts if self.refused(p.name, ctx) is None])

    async def get(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        name = params.name if params.name in self.routes else None
        return await audited("prompts/get", name, params.arguments or {}, ctx, partial(self._get, ctx, params))

    async def _get(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        route = self.routes.get(params.name)
        if route is None:
            known = ", ".join(self.routes)
            raise SurfaceError(
                INVALID_PARAMS, f'Unknown prompt: "{params.name}". Prompts: {known}.', outcome="NOT_FOUND"
            )
        reason = self.refused(route.prompt.name, ctx)
        if reason is not None:
            logger.info("prompt %s: get refused (FORBIDDEN)", route.prompt.name)
            raise forbidden("prompt", route.prompt.name, reason)
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
        raise SurfaceError(
            INVALID_PARAMS, f'Prompt "{route.prompt.name}": ' + "; ".join(problems) + ".", outcome="VALIDATION_ERROR"
        )
    return "".join(arguments.get(text, "") if is_argument else text for text, is_argument in route.parts)


# --- completion -----------------------------------------------------------------------------------


def completer(
    prompts: Prompts | None, resources: Resources | None
) -> Callable[[Any, types.CompleteRequestParams], Awaitable[types.CompleteResult]]:
    """completion/complete: the enum values of a prompt argument or a template variable that start with
    what was typed so far (case-insensitively). Anything else has no completions."""

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        name: str | None = None
        if isinstance(params.ref, types.PromptReference) and prompts is not None and params.ref.name in prompts.routes:
            name = params.ref.name
        elif (
            isinstance(params.ref, types.ResourceTemplateReference)
            and resources is not None
            and params.ref.uri in resources.by_uri
        ):
            name = params.ref.uri
        arguments = {
            "ref": params.ref.model_dump(mode="json", by_alias=True, exclude_none=True),
            "argument": {"name": params.argument.name, "value": params.argument.value},
        }
        return await audited("completion/complete", name, arguments, ctx, partial(complete_values, ctx, params))

    async def complete_values(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        choices: Sequence[str] = ()
        if isinstance(params.ref, types.PromptReference) and prompts is not None:
            route = prompts.routes.get(params.ref.name)
            reason = prompts.refused(params.ref.name, ctx) if route is not None else None
            if reason is not None:
                raise forbidden("prompt", params.ref.name, reason)
            choices = route.choices.get(params.argument.name, ()) if route is not None else ()
        elif isinstance(params.ref, types.ResourceTemplateReference) and resources is not None:
            template = resources.by_uri.get(params.ref.uri)
            reason = resources.refused(template, ctx) if template is not None else None
            if reason is not None and template is not None:
                raise forbidden("resource", template.name, reason)
            choices = resources.completions.get(params.ref.uri, {}).get(params.argument.name, ())
        typed = params.argument.value.casefold()
        values = [v for v in choices if v.casefold().startswith(typed)]
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS
            )
        )

    return complete
