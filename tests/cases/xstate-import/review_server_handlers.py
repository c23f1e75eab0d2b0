"""Handlers of the review MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from review_server.inputs import (
        DocApproveInput,
        DocPublishInput,
        DocRejectInput,
        DocSubmitInput,
    )


LOG: list[str] = []


def doc_submit(args: DocSubmitInput) -> Any:
    """doc.submit: Submit the draft for review."""
    LOG.append("submit")


def doc_approve(args: DocApproveInput) -> Any:
    """doc.approve: Approve the document."""
    LOG.append("approve")


def doc_reject(args: DocRejectInput) -> Any:
    """doc.reject: Send the document back."""
    LOG.append(f"reject: {args.reason}")


def doc_publish(args: DocPublishInput) -> Any:
    """doc.publish: Publish an approved document."""
    LOG.append("publish")
