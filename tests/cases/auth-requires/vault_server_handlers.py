"""Handlers of the vault MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vault_server.inputs import NoteCountInput, NoteDeleteInput, NoteGetInput

NOTES = {"n-1": {"id": "n-1", "text": "buy milk", "owner": "alice"}}


def note_get(args: NoteGetInput) -> Any:
    return NOTES[args.id]


def note_delete(args: NoteDeleteInput) -> None:
    NOTES.pop(args.id, None)


def note_count(args: NoteCountInput) -> int:
    return len(NOTES)
