"""Handlers of the my-tools MCP server: sync and async, with and without the request context."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolbox.inputs import (
        ClockNowInput,
        NotesAppendInput,
        PingInput,
    )

NOTES: list[str] = []


def ping(args: PingInput) -> Any:
    """ping: Is the server alive?"""
    return "pong"


async def now(args: ClockNowInput, ctx: Any) -> Any:
    """Clock-Now: the current time (its result is not shown to the agent)."""
    return datetime.datetime.now(datetime.UTC)


def append_note(args: NotesAppendInput) -> Any:
    """notes.append: Append a note."""
    NOTES.append(args.text)
