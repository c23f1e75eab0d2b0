"""Strict-mode nulls (issue 23 #5; docs/spec.md §5.3, §5.7).

Strict function calling (OpenAI's `strict: true`, the Agents SDK's default) makes every property required, so
the model sends `null` for an optional argument it means to leave out. A real `mcp.Client` checks against a
generated server that an explicit null for an optional, non-nullable argument is that argument left out, at
any depth (its default or None, and not in `fields_set`), while a null for a required one is still refused
and a nullable one still takes null as a value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest

from tests.support.build import GeneratedServer, built_server
from tests.support.client import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SPEC = """\
[server]
name = "desk"

[models.Requester]
description = "Who asked."
[models.Requester.fields]
name = "string"
email = { type = "string", required = false }
team = { type = "string", required = false, default = "support" }

[models.Ticket]
[models.Ticket.fields]
id = "string"

[tools."ticket.open"]
kind = "action"
description = "Open a ticket."
returns = "Ticket"
[tools."ticket.open".input]
title = "string"
requester = { type = "Requester" }
cc = { type = "Requester", required = false, nullable = true }
priority = { type = "enum", values = ["low", "high"], required = false, default = "low" }
due = { type = "date", required = false }
note = { type = "string", required = false, nullable = true }
level = { type = "enum", values = ["one", "two"], required = false, nullable = true }
extra = { type = "json", required = false, nullable = true }
"""

HANDLERS = """\
from typing import Any

SEEN: list[Any] = []


def ticket_open(args: Any) -> Any:
    SEEN.append(args)
    return {"id": "t-1"}
"""


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[GeneratedServer]:
    with built_server(SPEC, tmp_path / "out", handlers=HANDLERS) as server:
        yield server


def sent(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_an_explicit_null_for_an_optional_argument_is_the_argument_left_out(
    desk: GeneratedServer, mode: str
) -> None:
    strict = {  # what strict function calling sends: every property, null for the ones the model leaves out
        "title": "Printer",
        "requester": {"name": "Ada", "email": None, "team": None},
        "cc": None,
        "priority": None,
        "due": None,
        "note": None,
        "level": None,
        "extra": None,
    }
    async with connect(desk.create_server(), mode) as client:
        result = await client.call_tool(desk.wire("ticket.open"), strict)
        assert result.is_error is False, sent(result)
        (args,) = desk.handlers.SEEN
        # Left out: the default, or None; not among the fields sent.
        assert (args.priority, args.due) == ("low", None)
        assert args.requester == {"name": "Ada", "team": "support"}
        # Nullable: null is a value, and it was sent.
        assert (args.cc, args.note, args.level, args.extra) == (None, None, None, None)
        assert args.fields_set == {"title", "requester", "cc", "note", "level", "extra"}

        refused = await client.call_tool(desk.wire("ticket.open"), {**strict, "title": None})
        assert refused.is_error and '<field name="title">expected a string; you sent null.</field>' in sent(refused)
        nested = await client.call_tool(desk.wire("ticket.open"), {**strict, "requester": {"name": None}})
        assert nested.is_error and '<field name="requester.name">' in sent(nested)
