"""Drive a generated server with a client that installs only beside mcp<2, and print what it hands the model.

Run by tests/test_agent_clients.py with the python of .venv-agents-mcp1 (tests/support/agents-mcp1-requirements.txt),
so it imports nothing from the project but agent_script.py beside it:

    .venv-agents-mcp1/bin/python agents_mcp1_driver.py CLIENT PLAN_JSON stdio SERVER_PYTHON SERVER_DIR
    .venv-agents-mcp1/bin/python agents_mcp1_driver.py CLIENT PLAN_JSON http URL

CLIENT is one of (mcp 1.x speaks the handshake era only):

- `smolagents`: `ToolCollection.from_mcp(...)` (mcpadapt, its default `structured_output=False`) given to a
  `ToolCallingAgent` whose `Model` is a script. It records the tools offered, their JSON schema as smolagents
  sends it to a model (`get_tool_json_schema`), and each observation the model is handed.
- `autogen`: an `McpWorkbench` (one session; it lists again whenever the agent asks, as `AssistantAgent` does
  each step), each call's `ToolResult.to_text()` (the text `AssistantAgent` hands the model), and autogen's
  own converters: `convert_tools` (its OpenAI client's) over `mcp_server_tools(...)`'s adapters and over the
  workbench's schemas.
- `mcp-session`: the official mcp 1.x `ClientSession`: lists before every call (a program would), calls, and
  hands the text blocks on; `notifications/tools/list_changed` counted by its message handler.

Prints agent_script's report (see agents_driver.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agent_script import Script, text_blocks


def _stdio_parameters(target: list[str]) -> Any:
    from mcp import StdioServerParameters

    python, directory = target
    return StdioServerParameters(command=python, args=["-m", "billing_server"], env={"PYTHONPATH": directory})


# --- smolagents with mcpadapt ----------------------------------------------------------------------------


def _smolagents(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from smolagents import ToolCallingAgent, ToolCollection
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
        get_tool_json_schema,
    )

    schemas: dict[str, Any] = {}

    class ScriptedModel(Model):
        def __init__(self) -> None:
            super().__init__(model_id="scripted")
            self.step = 0

        def generate(
            self,
            messages: list[Any],
            stop_sequences: Any = None,
            response_format: Any = None,
            tools_to_call_from: Any = None,
            **kwargs: Any,
        ) -> Any:
            offered = [tool.name for tool in tools_to_call_from or [] if tool.name != "final_answer"]
            for tool in tools_to_call_from or []:
                schemas[tool.name] = get_tool_json_schema(tool)
            if self.step:
                script.handed(_message_text(messages[-1]))
            self.step += 1
            call = script.next_call(offered)
            name, arguments = ("final_answer", {"answer": "done"}) if call is None else (call.tool, call.arguments)
            function = ChatMessageToolCallFunction(name=name, arguments=arguments)
            tool_call = ChatMessageToolCall(function=function, id=f"call-{self.step}", type="function")
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[tool_call])

    parameters: Any = (
        {"url": target[0], "transport": "streamable-http"} if kind == "http" else _stdio_parameters(target)
    )
    with ToolCollection.from_mcp(parameters, trust_remote_code=True, structured_output=False) as collection:
        agent = ToolCallingAgent(tools=list(collection.tools), model=ScriptedModel(), max_steps=100, verbosity_level=0)
        agent.run("Look after invoice inv-1.")
    return {"schemas": schemas, "era": "handshake (mcp 1.30)"}


def _message_text(message: Any) -> str:
    content = message.content if hasattr(message, "content") else message["content"]
    if isinstance(content, str):
        return content
    return text_blocks(content)


# --- autogen ---------------------------------------------------------------------------------------------


async def _autogen(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from autogen_ext.models.openai._openai_client import convert_tools
    from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams, StreamableHttpServerParams, mcp_server_tools

    if kind == "http":
        params: Any = StreamableHttpServerParams(url=target[0], timeout=60, sse_read_timeout=60)
    else:
        stdio = _stdio_parameters(target)
        params = StdioServerParams(command=stdio.command, args=stdio.args, env=stdio.env, read_timeout_seconds=60)
    converters: dict[str, Any] = {}
    try:
        adapters = await mcp_server_tools(params)
        converters["mcp_server_tools"] = {"tools": [tool.name for tool in adapters]}
        converted = convert_tools(adapters)
        converters["mcp_server_tools"]["convert_tools"] = [tool["function"]["name"] for tool in converted]
    except Exception as error:  # the converter's refusal is what is checked
        converters.setdefault("mcp_server_tools", {})["error"] = f"{type(error).__name__}: {error}"
    schemas: dict[str, Any] = {}
    async with McpWorkbench(params) as workbench:
        listed = await workbench.list_tools()
        for schema in listed:
            schemas[schema["name"]] = dict(schema)
        try:
            converters["workbench"] = {"convert_tools": [tool["function"]["name"] for tool in convert_tools(listed)]}
        except Exception as error:
            converters["workbench"] = {"error": f"{type(error).__name__}: {error}"}
        while (call := script.next_call([tool["name"] for tool in await workbench.list_tools()])) is not None:
            result = await workbench.call_tool(call.tool, call.arguments)
            script.handed(result.to_text(), result.is_error)
    return {"schemas": schemas, "converters": converters, "era": "handshake (mcp 1.30)"}


# --- the official mcp 1.x ClientSession ------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _session(kind: str, target: list[str], handler: Any) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamablehttp_client

    if kind == "http":
        async with (
            streamablehttp_client(target[0]) as (read, write, _),
            ClientSession(read, write, message_handler=handler) as session,
        ):
            yield session
    else:
        async with (
            stdio_client(_stdio_parameters(target)) as (read, write),
            ClientSession(read, write, message_handler=handler) as session,
        ):
            yield session


async def _mcp_session(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from mcp import types

    changed = 0

    async def handler(message: Any) -> None:
        nonlocal changed
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changed += 1

    structured: list[Any] = []
    async with _session(kind, target, handler) as session:
        initialized = await session.initialize()
        schemas = {tool.name: tool.inputSchema for tool in (await session.list_tools()).tools}
        while (call := script.next_call([tool.name for tool in (await session.list_tools()).tools])) is not None:
            result = await session.call_tool(call.tool, call.arguments)
            structured.append(result.structuredContent)
            script.handed(text_blocks(result.content), result.isError)
        await asyncio.sleep(0)  # let a notification sent with the last answer be handled
    return {"schemas": schemas, "era": initialized.protocolVersion, "list_changed": changed, "structured": structured}


def main() -> None:
    client, plan, kind, *target = sys.argv[1:]
    script = Script(json.loads(plan))
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # the report alone on stdout: frameworks print there too
    if client == "smolagents":
        extra = _smolagents(script, kind, target)
    else:
        extra = asyncio.run({"autogen": _autogen, "mcp-session": _mcp_session}[client](script, kind, target))
    sys.stdout = real_stdout
    print(script.report(**extra))


if __name__ == "__main__":
    main()
