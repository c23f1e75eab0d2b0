"""Handlers of the inbox MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inbox_server.inputs import (
        MessageDeleteInput,
        MessageListInput,
        MessageReadInput,
    )


MESSAGES = {
    f"m-{n}": {"id": f"m-{n}", "subject": f"Subject {n}", "unread": n % 2 == 0, "spam_score": n / 4}
    for n in range(1, 5)
}


def message_list(args: MessageListInput) -> Any:
    """message.list: The messages, newest first."""
    return list(MESSAGES.values())


def message_read(args: MessageReadInput) -> Any:
    """message.read: Read one message."""
    return MESSAGES[args.id]


def message_delete(args: MessageDeleteInput) -> Any:
    """message.delete: Delete a message."""
    MESSAGES.pop(args.id, None)
