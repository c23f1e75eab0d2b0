"""Run the harness's generated server with the SDK's SSE response object swapped for a minimal one.

    python bench/sdk_walls_lean_sse.py [perfbill_server arguments]

A benchmark experiment (`bench/sdk_walls.py`), never part of a generated server: it answers how much of the
SDK's SSE cost per request is sse-starlette's `EventSourceResponse` (a task group of four tasks: the stream, a
ping timer, a disconnect listener, an exit-signal watcher). The stand-in writes the same events, framed as
sse-starlette frames them, from one task beside the transport's own writer, and drops what the measurement does
not exercise (pings, disconnect handling, graceful drain): an upper bound of the saving.
"""

from __future__ import annotations

import runpy
from typing import Any

import anyio
import mcp.server.streamable_http as streamable_http


class MinimalEventSourceResponse:
    def __init__(self, content: Any, data_sender_callable: Any, headers: dict[str, str]) -> None:
        self.content = content
        self.data_sender = data_sender_callable
        self.headers = [(key.lower().encode(), value.encode()) for key, value in headers.items()]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        async with anyio.create_task_group() as group:
            group.start_soon(self.data_sender)
            async for event in self.content:
                await send({"type": "http.response.body", "body": frame(event), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def frame(event: dict[str, Any]) -> bytes:
    lines = [f"id: {event['id']}"] if "id" in event else []
    lines += [f"event: {event['event']}"] if "event" in event else []
    lines += [f"data: {line}" for line in str(event.get("data", "")).splitlines()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


if __name__ == "__main__":
    streamable_http.EventSourceResponse = MinimalEventSourceResponse  # type: ignore[misc,assignment]
    runpy.run_module("perfbill_server", run_name="__main__", alter_sys=True)
