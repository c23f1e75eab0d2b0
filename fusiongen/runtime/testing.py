"""Test helpers for this server's users: call a tool in-process, read what the agent perceives.

A test calls a tool through a real MCP client connected to the server in memory (no process, no
network) and gets a `ToolOutcome`: the data, domain rules, suggestions, UI blocks and error the agent
would read, already taken apart, so that it asserts on them instead of parsing text:

    from <package>.testing import call_tool

    def test_an_unknown_invoice_is_not_found() -> None:
        outcome = call_tool("invoice.get", {"id": "inv-404"})
        assert outcome.error is not None and outcome.error.code == "NOT_FOUND"

A tool is named by its spec name or by its wire name (the name the model sees, `invoice_get` under the
default `[server] tool_names`); either works. `call_tool` opens one session per call; `tool_session()` (sync)
and `ToolSession` (async) keep one session over several calls, which a workflow needs in the handshake era.
It needs nothing the server does not already depend on.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
from mcp import Client

__all__ = [
    "LEGACY",
    "MODERN",
    "BlockingToolSession",
    "Suggestion",
    "ToolErrorInfo",
    "ToolOutcome",
    "ToolSession",
    "UiBlock",
    "call_tool",
    "outcome_of",
    "tool_session",
]

# The protocol eras a session can speak: the handshake era (up to 2025-11-25) and 2026-07-28.
LEGACY = "legacy"
MODERN = "2026-07-28"


@dataclass(frozen=True)
class UiBlock:
    type: str  # table, markdown, list, mermaid, json, code, summary
    audience: str  # "model", or "user" for a block meant for the human only
    text: str


@dataclass(frozen=True)
class Suggestion:
    tool: str  # the tool's name as the model sees it
    reason: str


@dataclass(frozen=True)
class ToolErrorInfo:
    code: str  # NOT_FOUND, VALIDATION_ERROR, FORBIDDEN, INTERNAL_ERROR...
    message: str
    recovery: str
    actions: tuple[str, ...] = ()  # the tools it suggests calling next
    details: Mapping[str, str] = field(default_factory=dict)  # retry_after, workflow, ...
    fields: Mapping[str, str] = field(default_factory=dict)  # VALIDATION_ERROR: each bad argument's message


@dataclass(frozen=True)
class ToolOutcome:
    """What the agent perceives of one call.

    `data` is the presented data (a collection's items) from structuredContent, or, for a result without any
    (a text result, "<tool>: done."), its text; None for an error. `result` is the raw CallToolResult."""

    data: Any
    rules: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]
    ui_blocks: tuple[UiBlock, ...]
    truncated: bool
    error: ToolErrorInfo | None
    result: types.CallToolResult

    @property
    def ok(self) -> bool:
        return self.error is None


# --- taking a result apart ----------------------------------------------------------------------------------

_UI = re.compile(r'<ui_passthrough type="([^"]*)">(.*)</ui_passthrough>\Z', re.DOTALL)
_ERROR = re.compile(r'<tool_error tool="[^"]*" code="([A-Z0-9_]+)"')
_ELEMENT = r"<{0}>(.*?)</{0}>"
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)
_DETAIL = re.compile(r'<detail key="([^"]*)">(.*?)</detail>', re.DOTALL)
_FIELD = re.compile(r'<field name="([^"]*)">(.*?)</field>', re.DOTALL)


def outcome_of(result: types.CallToolResult) -> ToolOutcome:
    """Take a tools/call result apart as the agent reads it: data, rules, suggestions and truncation from a
    presenter result's structured envelope, UI blocks from its text blocks."""
    texts = [block for block in result.content if isinstance(block, types.TextContent)]
    if result.is_error:
        first = texts[0].text if texts else ""
        return ToolOutcome(None, (), (), (), False, error_of(first), result)
    blocks: list[UiBlock] = []
    for block in texts[1:]:
        ui = _UI.match(block.text)
        if ui is not None:
            audience = "user" if block.annotations is not None and block.annotations.audience == ["user"] else "model"
            blocks.append(UiBlock(ui.group(1), audience, html.unescape(ui.group(2))))
    structured = result.structured_content
    if structured is None:  # a text result, or "<tool>: done."
        return ToolOutcome(texts[0].text if texts else None, (), (), tuple(blocks), False, None, result)
    if not {"data", "rules", "suggestions"} <= structured.keys():  # a workflow tool's state object
        return ToolOutcome(structured, (), (), tuple(blocks), False, None, result)
    suggestions = tuple(Suggestion(s["tool"], s["reason"]) for s in structured["suggestions"])
    truncated = bool(structured.get("truncated"))
    return ToolOutcome(
        structured["data"], tuple(structured["rules"]), suggestions, tuple(blocks), truncated, None, result
    )


def error_of(text: str) -> ToolErrorInfo:
    """A `<tool_error>` or `<validation_error>` as its parts; any other error text as an ERROR with that message."""
    if text.startswith("<validation_error"):
        fields = {html.unescape(n): html.unescape(m) for n, m in _FIELD.findall(text)}
        message = "; ".join(f"{name}: {problem}" for name, problem in fields.items())
        return ToolErrorInfo("VALIDATION_ERROR", message, _element(text, "recovery"), fields=fields)
    code = _ERROR.match(text)
    if code is None:
        return ToolErrorInfo("ERROR", text, "")
    actions = tuple(html.unescape(a) for a in _ACTION.findall(text))
    details = {html.unescape(k): html.unescape(v) for k, v in _DETAIL.findall(text)}
    return ToolErrorInfo(
        code.group(1), _element(text, "message"), _element(text, "recovery"), actions=actions, details=details
    )


def _element(text: str, name: str) -> str:
    found = re.search(_ELEMENT.format(name), text, re.DOTALL)
    return html.unescape(found.group(1)) if found else ""


# --- calling tools ----------------------------------------------------------------------------------------


def _server(handlers: ModuleType | None, options: Mapping[str, Any]) -> Any:
    """This package's server (`create_server(handlers, **options)`), imported only when a test asks for it."""
    package = __name__.rpartition(".")[0]
    return importlib.import_module(".server", package).create_server(handlers, **options)


def _wire_name(name: str) -> str:
    """The name the server serves tool `name` under: a test may name a tool by its spec name (`invoice.get`)
    or its wire name (`invoice_get`), so that it holds whatever `[server] tool_names` is."""
    package = __name__.rpartition(".")[0]
    try:
        names: Mapping[str, str] = importlib.import_module(".server", package).TOOL_NAMES
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.server":
            raise
        return name  # not inside a generated package
    return names.get(name, name)


class ToolSession:
    """One MCP session with the server, in process (async):

        async with ToolSession() as session:
            outcome = await session.call("invoice.get", {"id": "inv-1"})

    `handlers` replaces the handler module, `mode` is LEGACY or MODERN, `server` a server to use instead of
    a new `create_server(handlers, **options)`."""

    def __init__(
        self, handlers: ModuleType | None = None, *, mode: str = LEGACY, server: Any = None, **options: Any
    ) -> None:
        self._client = Client(server if server is not None else _server(handlers, options), mode=mode, cache=None)

    async def __aenter__(self) -> ToolSession:
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.__aexit__(*exc)

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutcome:
        return outcome_of(await self._client.call_tool(_wire_name(name), dict(arguments or {})))

    async def tool_names(self) -> list[str]:
        return [tool.name for tool in (await self._client.list_tools()).tools]


class BlockingToolSession:
    """A ToolSession for synchronous tests: each method runs on the session's own event loop thread."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, session: ToolSession) -> None:
        self._portal = portal
        self._session = session

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutcome:
        outcome: ToolOutcome = self._portal.call(self._session.call, name, arguments)
        return outcome

    def tool_names(self) -> list[str]:
        return self._portal.call(self._session.tool_names)


@contextlib.contextmanager
def tool_session(
    handlers: ModuleType | None = None, *, mode: str = LEGACY, server: Any = None, **options: Any
) -> Iterator[BlockingToolSession]:
    """One session over several calls, for a synchronous test: `with tool_session() as session: session.call(...)`."""
    with anyio.from_thread.start_blocking_portal() as portal:
        session = ToolSession(handlers, mode=mode, server=server, **options)
        with portal.wrap_async_context_manager(session):
            yield BlockingToolSession(portal, session)


def call_tool(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    handlers: ModuleType | None = None,
    mode: str = LEGACY,
    server: Any = None,
    **options: Any,
) -> ToolOutcome:
    """One call on a fresh session (sync): what the agent perceives of it."""
    with tool_session(handlers, mode=mode, server=server, **options) as session:
        return session.call(name, arguments)
