"""Drive a generated server with langchain-mcp-adapters and print what LangChain would hand to the model.

Run by tests/test_client_matrix.py with the python of .venv-langchain (langchain-mcp-adapters pins mcp<2, which
the project's own virtualenv cannot hold), so this file imports nothing from the project:

    .venv-langchain/bin/python langchain_client.py CALLS_JSON stdio SERVER_PYTHON SERVER_DIR [SERVER_ARG ...]
    .venv-langchain/bin/python langchain_client.py CALLS_JSON http URL

CALLS_JSON is a list of `[tool, arguments]`. Over stdio, the server is `SERVER_PYTHON -m billing_server
SERVER_ARG...` in SERVER_DIR, with only SERVER_DIR importable; over http, the streamable HTTP server at URL.
One session (load_mcp_tools on it) serves every call, as an agent's run would. Each call is made as
LangChain's agents make it, with a ToolCall, so the result is the ToolMessage an agent appends to the
conversation: its `content` is exactly what the model is handed, its `artifact` (structuredContent) is kept
for the program and never sent to the model.

Prints one JSON object: {"tools": [names], "calls": [{"content", "status", "artifact"}, ...]}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


def _connection(kind: str, target: list[str]) -> dict[str, Any]:
    if kind == "http":
        return {"transport": "streamable_http", "url": target[0]}
    python, directory, *server_args = target
    return {
        "transport": "stdio",
        "command": python,
        "args": ["-m", "billing_server", *server_args],
        "cwd": directory,
        "env": {"PYTHONPATH": directory},
    }


def _jsonable(value: Any) -> Any:
    """The artifact is a dict subclass (MCPToolArtifact) or None; plain JSON either way."""
    return json.loads(json.dumps(value, default=dict)) if value is not None else None


async def _run(calls: list[list[Any]], connection: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient({"billing": connection})
    async with client.session("billing") as session:
        tools = {tool.name: tool for tool in await load_mcp_tools(session)}
        results = []
        for number, (name, arguments) in enumerate(calls):
            call = ToolCall(name=name, args=arguments, id=f"call-{number}", type="tool_call")
            message = await tools[name].ainvoke(call)
            assert isinstance(message, ToolMessage), type(message)
            results.append(
                {"content": message.content, "status": message.status, "artifact": _jsonable(message.artifact)}
            )
    return {"tools": list(tools), "calls": results}


def main() -> None:
    calls, kind, *target = sys.argv[1:]
    print(json.dumps(asyncio.run(_run(json.loads(calls), _connection(kind, target)))))


if __name__ == "__main__":
    main()
