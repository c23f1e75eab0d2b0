"""Domain errors (`ToolError`, a tool's `errors`) and text results, through a real `mcp.Client` in both eras.

The server under test uses `tool_names = "snake"`, so that a suggestion written with a spec name must reach the
model under its wire name; its workflow shows that a ToolError fires no transition and leaves nothing pending.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fusiongen import names
from fusiongen.runtime import _results
from tests.support.build import GeneratedServer, build
from tests.support.client import MODERN, MODES, connect, stdio_params

pytestmark = pytest.mark.anyio

SPEC = """
[server]
name = "desk"
tool_names = "snake"

[models.Ticket]
[models.Ticket.fields]
id = "string"
title = "string"

[workflows.ticket]
initial = "open"
[workflows.ticket.states]
open = { on = { CLOSE = "closed" } }
closed = { type = "final" }

[tools."ticket.get"]
kind = "query"
description = "Read a ticket."
returns = "Ticket"
errors = { NOT_FOUND = "No ticket has that id", ARCHIVED = "" }
[tools."ticket.get".input]
id = "string"

[tools."ticket.list"]
kind = "query"
returns = "Ticket[]"

[tools."ticket.summary"]
kind = "query"
description = "A ticket in one sentence."
returns = "text"
[tools."ticket.summary".input]
id = "string"

[tools."ticket.note"]
description = "Note something on a ticket."

[tools."ticket.close"]
description = "Close the ticket."
bind_state = { workflow = "ticket", states = ["open"], transition = "CLOSE" }
errors = { LOCKED = "Someone else is editing the ticket" }
"""

HANDLERS = """
from __future__ import annotations

from typing import Any

from desk_server import ToolError

TICKETS = {"t-1": {"id": "t-1", "title": "Printer out of toner"}}
# What each handler does next: return this value, or raise it when it is an exception.
NEXT: dict[str, Any] = {}


def _next(tool: str, default: Any) -> Any:
    outcome = NEXT.get(tool, default)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def ticket_get(args: Any) -> Any:
    if args.id not in TICKETS:
        raise ToolError(
            "NOT_FOUND",
            f"No ticket {args.id} <here> & there.",
            recovery="List the tickets to find the right id.",
            suggest=["ticket.list", "ticket_list", "ticket.start", "no.such.tool"],
        )
    return _next("ticket.get", TICKETS[args.id])


def ticket_list(args: Any) -> Any:
    return list(TICKETS.values())


def ticket_summary(args: Any) -> Any:
    return _next("ticket.summary", f"Ticket {args.id}: printer out of toner.")


def ticket_note(args: Any) -> Any:
    return _next("ticket.note", None)


def ticket_close(args: Any) -> Any:
    return _next("ticket.close", "Closed.")
"""

NOT_FOUND = (
    '<tool_error tool="ticket_get" code="NOT_FOUND" severity="error"><message>No ticket t-9 &lt;here> &amp; '
    "there.</message><recovery>List the tickets to find the right id.</recovery><available_actions>"
    "<action>ticket_list</action><action>ticket_start</action></available_actions></tool_error>"
)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[GeneratedServer]:
    out = tmp_path / "out"
    with GeneratedServer(build(SPEC, out, handlers=HANDLERS), out) as server:
        yield server


def text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def raising(desk: GeneratedServer, tool: str, outcome: object) -> None:
    desk.handlers.NEXT[tool] = outcome


# --- the runtime's checks ---------------------------------------------------------------------------------


def test_the_generator_checks_codes_as_the_runtime_does() -> None:
    assert names.ERROR_CODE.pattern == _results.ERROR_CODE.pattern
    assert names.RESERVED_ERROR_CODES == _results.RESERVED_ERROR_CODES
    assert names.ERROR_CODE_MAX_LENGTH == _results.ERROR_CODE_MAX_LENGTH


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (("not_found", "m"), ValueError),
        (("NOT__FOUND", "m"), ValueError),
        (("_NOT_FOUND", "m"), ValueError),
        (("N" * 65, "m"), ValueError),
        (("INTERNAL_ERROR", "m"), ValueError),
        (("VALIDATION_ERROR", "m"), ValueError),
        ((7, "m"), ValueError),
        (("NOT_FOUND", b"m"), TypeError),
    ],
)
def test_a_malformed_tool_error_is_refused_when_raised(arguments: tuple[Any, Any], problem: type[Exception]) -> None:
    with pytest.raises(problem):
        _results.ToolError(*arguments)


@pytest.mark.parametrize("retry_after", [-1, float("nan"), float("inf"), True, "3"])
def test_retry_after_must_be_seconds(retry_after: Any) -> None:
    with pytest.raises(ValueError, match="retry_after"):
        _results.ToolError("BUSY_NOW", "m", retry_after=retry_after)


def test_suggest_must_be_a_list_of_names() -> None:
    with pytest.raises(TypeError, match="suggest"):
        _results.ToolError("GONE", "m", suggest="ticket.list")  # type: ignore[arg-type]


def test_the_exception_itself_shows_only_the_code() -> None:
    error = _results.ToolError("NOT_FOUND", "No ticket for ada@example.com.")
    assert (str(error), repr(error)) == ("NOT_FOUND", "ToolError('NOT_FOUND')")


# --- domain errors through a client -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_declared_tool_error_reaches_the_agent_as_the_servers_errors_do(
    desk: GeneratedServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool("ticket_get", {"id": "t-9"})
    assert (result.is_error, result.structured_content, len(result.content)) == (True, None, 1)
    assert text(result) == NOT_FOUND  # spec names mapped to wire names, once each; the unknown tool left out
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "desk_server"]
    assert ("WARNING", "tool ticket_get: its error suggests a tool the server does not have; left out") in logged
    assert not [m for _, m in logged if "undeclared" in m]
    assert "t-9" not in caplog.text and "here" not in caplog.text  # the handler's words are never logged


@pytest.mark.parametrize("mode", MODES)
async def test_an_undeclared_code_is_delivered_and_logged_as_undeclared(
    desk: GeneratedServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    raising(desk, "ticket.get", desk.package.ToolError("QUOTA_EXCEEDED", "Too many reads today.", retry_after=1.2))
    caplog.set_level(logging.INFO)
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool("ticket_get", {"id": "t-1"})
    assert result.is_error and text(result) == (
        '<tool_error tool="ticket_get" code="QUOTA_EXCEEDED" severity="error"><message>Too many reads today.'
        f"</message><recovery>{_results.DEFAULT_RECOVERY}</recovery>"
        '<details><detail key="retry_after">2</detail></details></tool_error>'
    )
    messages = [r.getMessage() for r in caplog.records if r.name == "desk_server"]
    assert "tool ticket_get: handler raised undeclared error code QUOTA_EXCEEDED" in messages
    assert any(re.search(r"call tool=ticket_get outcome=QUOTA_EXCEEDED ", m) for m in messages)
    assert "Too many reads" not in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_error_built_wrong_is_an_internal_error(desk: GeneratedServer, mode: str) -> None:
    class Raises:
        def __init__(self, code: str) -> None:
            self.code = code

        def __call__(self, args: Any) -> Any:
            raise desk.package.ToolError(self.code, "secret detail")

    desk.handlers.ticket_get = Raises("INTERNAL_ERROR")  # the server's own code: a handler cannot claim it
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool("ticket_get", {"id": "t-1"})
    assert result.is_error and 'code="INTERNAL_ERROR"' in text(result) and "secret" not in text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_declared_codes_are_listed_in_the_tool_descriptions(desk: GeneratedServer, mode: str) -> None:
    async with connect(desk.create_server(), mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["ticket_get"].description == (
        "Read a ticket.\n\nErrors it may return (tool_error codes):\n- NOT_FOUND: No ticket has that id\n- ARCHIVED"
    )
    close = tools["ticket_close"].description
    assert close is not None and close.endswith(
        "\n\nErrors it may return (tool_error codes):\n- LOCKED: Someone else is editing the ticket"
    )
    # a fresh session holds no state: both eras list ticket_close stable, with the states it runs in (§10.6)
    assert "runs only in state open" in close
    assert "Errors" not in (tools["ticket_list"].description or "")


async def _handle(client: Any, mode: str) -> dict[str, str]:
    if mode != MODERN:
        return {}
    started = await client.call_tool("ticket_start", {})
    return {"workflow_id": started.structured_content["workflow_id"]}


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_error_fires_no_transition_and_leaves_nothing_pending(desk: GeneratedServer, mode: str) -> None:
    async with connect(desk.create_server(), mode) as client:
        handle = await _handle(client, mode)
        raising(desk, "ticket.close", desk.package.ToolError("LOCKED", "Ada is editing it."))
        refused = await client.call_tool("ticket_close", handle)
        after_error = (await client.call_tool("ticket_status", handle)).structured_content
        raising(desk, "ticket.close", RuntimeError("the database went away"))
        failed = await client.call_tool("ticket_close", handle)
        after_crash = (await client.call_tool("ticket_status", handle)).structured_content
        del desk.handlers.NEXT["ticket.close"]
        closed = await client.call_tool("ticket_close", handle)
        final = (await client.call_tool("ticket_status", handle)).structured_content
    assert refused.is_error and 'code="LOCKED"' in text(refused)
    assert (after_error["state"], after_error["pending"]) == ("open", None)
    # The contrast that makes the assertion above mean something: a handler that crashed may have had effects.
    assert failed.is_error and 'code="INTERNAL_ERROR"' in text(failed)
    assert after_crash["state"] == "open" and after_crash["pending"]["tool"] == "ticket_close"
    assert (closed.is_error, text(closed), final["state"]) == (False, "Closed.", "closed")


# --- results without a presenter, and a missing result -------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "returned", "expected"),
    [
        ("ticket.note", None, "ticket_note: done."),
        ("ticket.note", "Noted on t-1.", "Noted on t-1."),
        ("ticket.note", {"title": "an object is never shown"}, "ticket_note: done."),
        ("ticket.summary", "Ticket t-1: printer out of toner.", "Ticket t-1: printer out of toner."),
    ],
)
async def test_text_results(desk: GeneratedServer, mode: str, tool: str, returned: object, expected: str) -> None:
    raising(desk, tool, returned)
    async with connect(desk.create_server(), mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool(tool.replace(".", "_"), {"id": "t-1"} if tool == "ticket.summary" else {})
    assert (result.is_error, text(result), result.structured_content) == (False, expected, None)
    assert listed[tool.replace(".", "_")].output_schema is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("returned", [{"text": "an object"}, 42, b"bytes"])
async def test_a_text_tool_returning_anything_but_a_string_fails_closed(
    desk: GeneratedServer, mode: str, returned: object
) -> None:
    raising(desk, "ticket.summary", returned)
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool("ticket_summary", {"id": "t-1"})
    assert result.is_error and text(result) == (
        '<tool_error tool="ticket_summary" code="OUTPUT_INVALID" severity="error"><message>Tool "ticket_summary" '
        "produced data that does not fit its schema at result (expected a string); nothing was returned."
        "</message><recovery>Do not retry with the same arguments; tell the user the tool returned data its "
        "schema does not allow.</recovery></tool_error>"
    )
    assert "an object" not in text(result) and "42" not in text(result)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["ticket.get", "ticket.summary"])
async def test_none_from_a_tool_with_a_result_says_what_happened(
    desk: GeneratedServer, mode: str, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    raising(desk, tool, None)
    wire = tool.replace(".", "_")
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool(wire, {"id": "t-1"})
    assert result.is_error and text(result) == (
        f'<tool_error tool="{wire}" code="OUTPUT_INVALID" severity="error"><message>Tool "{wire}" returned no '
        "result: its handler returned nothing; nothing was shown.</message><recovery>Check the arguments you "
        "sent (an id that does not exist?); if they are right, tell the user the tool returned nothing."
        "</recovery></tool_error>"
    )
    assert "inconsistent" not in text(result)
    assert f"tool {wire}: handler returned None, but the tool declares a result" in caplog.text


# --- over stdio -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_error_over_stdio(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    build(SPEC, out, handlers=HANDLERS)
    async with connect(stdio_params(out, package="desk_server"), mode) as client:
        missing = await client.call_tool("ticket_get", {"id": "t-9"})
        summary = await client.call_tool("ticket_summary", {"id": "t-1"})
    assert (missing.is_error, text(missing)) == (True, NOT_FOUND)
    assert (summary.is_error, text(summary)) == (False, "Ticket t-1: printer out of toner.")
