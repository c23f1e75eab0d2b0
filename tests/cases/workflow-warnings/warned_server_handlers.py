"""Handlers of the warned MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from warned_server.inputs import (
        FinishInput,
        GoInput,
    )


def go(args: GoInput) -> Any:
    """go: go"""
    return None


def finish(args: FinishInput) -> Any:
    """finish: finish"""
    return None
