"""Handlers of the types MCP server: echo the arguments back as a record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types_server.inputs import (
        RecordEchoInput,
        RecordListInput,
    )


def record_echo(args: RecordEchoInput) -> Any:
    """record.echo: Build a record from the arguments (every one has a default)."""
    return {
        "id": args.id,
        "label": args.label,
        "notes": args.notes,
        "count": args.count,
        "ratio": args.ratio,
        "active": args.active,
        "day": args.day,
        "at": args.at,
        "level": args.level,
        "maybe_level": None,
        "scores": args.scores,
        "days": args.days,
        "address": args.address,
        "previous": args.previous or [],
        "parent": None,
    }


def record_list(args: RecordListInput) -> Any:
    """record.list: Every record."""
    return []
