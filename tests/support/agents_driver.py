"""Drive a generated server with an agent framework on mcp 2.x, and print what the framework hands the model.

Run by tests/test_agent_clients.py with the python of .venv-agents (tests/support/agents-requirements.txt),
so it imports nothing from the project but agent_script.py beside it:

    .venv-agents/bin/python agents_driver.py CLIENT PLAN_JSON stdio SERVER_PYTHON SERVER_DIR
    .venv-agents/bin/python agents_driver.py CLIENT PLAN_JSON http URL

CLIENT is one of:

- `openai-agents`: an `Agent` with the server in `mcp_servers` (strict schemas on, as OpenAI's strict
  function calling needs) whose `Model` is a script (no LLM, no network, tracing off). It records the tools
  each step offers, their strict parameter schemas, and each `function_call_output` the model is handed.
- `google-adk`: an `LlmAgent` with an `McpToolset` and a `BaseLlm` that is a script, run by a `Runner` on an
  in-memory session service. It records the function declarations ADK builds (its schema converter) and each
  `function_response` the model is handed. The era: ADK's handshake by default, 2026-07-28 with
  `ADK_ENABLE_MCP_MODERN_PROTOCOL=1` (set by the caller).
- `llama-index`: `McpToolSpec(BasicMCPClient(...)).to_tool_list_async()`, the `FunctionTool`s an agent is
  given (listed once; each call opens its own session, as BasicMCPClient does), their OpenAI tool form
  (`metadata.to_openai_tool()`), and per call the `ToolOutput` text an agent puts in the tool message.

Prints agent_script's report: the calls (what the model was handed, per call), the tools offered per step,
and per client `schemas` (tool → the converted schema, or the converter's error) and `era`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agent_script import Script, text_blocks

SCRIPTED_MODEL = "scripted"


def _stdio(target: list[str]) -> tuple[str, list[str], dict[str, str]]:
    python, directory = target
    return python, ["-m", "billing_server"], {"PYTHONPATH": directory}


# --- openai-agents ---------------------------------------------------------------------------------------


async def _openai_agents(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    schemas: dict[str, Any] = {}

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.step = 0

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            **_: Any,
        ) -> ModelResponse:
            offered = {tool.name: tool for tool in tools}
            for tool in tools:
                schemas[tool.name] = {"strict": tool.strict_json_schema, "parameters": tool.params_json_schema}
            if self.step:
                outputs = [
                    item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"
                ]
                output = outputs[-1]["output"]
                script.handed(output if isinstance(output, str) else text_blocks(output))
            self.step += 1
            call = script.next_call(list(offered))
            if call is None:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                message = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
                return ModelResponse(output=[message], usage=Usage(), response_id=None)
            arguments = dict(call.arguments)
            parameters = offered[call.tool].params_json_schema
            if offered[call.tool].strict_json_schema:
                # Strict function calling: every property is required, and the model sends null for the ones
                # it means to leave out.
                for name in parameters.get("properties", {}):
                    arguments.setdefault(name, None)
            call.arguments = arguments
            item = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call-{self.step}",
                name=call.tool,
                arguments=json.dumps(arguments),
                id=f"fc-{self.step}",
                status="completed",
            )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    if kind == "http":
        server: Any = MCPServerStreamableHttp(
            params={"url": target[0]}, name="billing", client_session_timeout_seconds=60
        )
    else:
        command, args, env = _stdio(target)
        server = MCPServerStdio(
            params={"command": command, "args": args, "env": env}, name="billing", client_session_timeout_seconds=60
        )
    async with server:
        agent = Agent(
            name="billing",
            instructions="Look after the invoices.",
            model=ScriptedModel(),
            mcp_servers=[server],
            mcp_config={"convert_schemas_to_strict": True},
            model_settings=ModelSettings(),
        )
        result = await Runner.run(agent, "Look after invoice inv-1.", max_turns=100)
        era = getattr(server.session, "protocol_version", None)
        if era is None and server.server_initialize_result is not None:
            era = server.server_initialize_result.protocol_version
    return {"schemas": schemas, "era": str(era), "final": str(result.final_output)}


# --- google-adk ------------------------------------------------------------------------------------------


async def _google_adk(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams, StreamableHTTPConnectionParams
    from google.genai import types
    from mcp import StdioServerParameters

    schemas: dict[str, Any] = {}

    class ScriptedLlm(BaseLlm):
        step: int = 0

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            declarations = [d for tool in (llm_request.config.tools or []) for d in (tool.function_declarations or [])]
            for declaration in declarations:
                schemas[declaration.name] = declaration.model_dump(mode="json", exclude_none=True)
            if self.step:
                parts = llm_request.contents[-1].parts or []
                responses = [part.function_response for part in parts if part.function_response is not None]
                script.handed(json.dumps(responses[-1].response, default=str))
            self.step += 1
            call = script.next_call([d.name for d in declarations])
            if call is None:
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))
                return
            function_call = types.FunctionCall(id=f"call-{self.step}", name=call.tool, args=call.arguments)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=function_call)]))

    if kind == "http":
        connection: Any = StreamableHTTPConnectionParams(url=target[0], timeout=60)
    else:
        command, args, env = _stdio(target)
        connection = StdioConnectionParams(
            server_params=StdioServerParameters(command=command, args=args, env=env), timeout=60
        )
    toolset = McpToolset(connection_params=connection)
    agent = LlmAgent(
        name="billing", model=ScriptedLlm(model=SCRIPTED_MODEL), instruction="Look after the invoices.", tools=[toolset]
    )
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name="billing", session_service=sessions)
    session = await sessions.create_session(app_name="billing", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="Look after invoice inv-1.")])
    from google.adk.agents.run_config import RunConfig

    async for _event in runner.run_async(
        user_id="u", session_id=session.id, new_message=message, run_config=RunConfig(max_llm_calls=200)
    ):
        pass
    era = None
    manager = toolset._mcp_session_manager
    for entry in getattr(manager, "_sessions", {}).values():
        era = getattr(entry[0], "protocol_version", None) or era
    await toolset.close()
    return {"schemas": schemas, "era": str(era)}


# --- llama-index -----------------------------------------------------------------------------------------


async def _llama_index(script: Script, kind: str, target: list[str]) -> dict[str, Any]:
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    if kind == "http":
        client = BasicMCPClient(target[0], timeout=60)
    else:
        command, args, env = _stdio(target)
        client = BasicMCPClient(command, args=args, env=env, timeout=60)
    tools = {tool.metadata.name: tool for tool in await McpToolSpec(client=client).to_tool_list_async()}
    schemas: dict[str, Any] = {}
    for name, tool in tools.items():
        try:
            schemas[name] = tool.metadata.to_openai_tool()
        except Exception as error:  # the converter's refusal is what is checked
            schemas[name] = {"error": f"{type(error).__name__}: {error}"}
    while (call := script.next_call(list(tools))) is not None:
        output = await tools[call.tool].acall(**call.arguments)
        script.handed(str(output.content), bool(output.is_error))
    return {"schemas": schemas, "era": "handshake (ClientSession.initialize per call)"}


CLIENTS = {"openai-agents": _openai_agents, "google-adk": _google_adk, "llama-index": _llama_index}


def main() -> None:
    client, plan, kind, *target = sys.argv[1:]
    script = Script(json.loads(plan))
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # the report alone on stdout: frameworks print there too
    extra = asyncio.run(CLIENTS[client](script, kind, target))
    sys.stdout = real_stdout
    print(script.report(**extra))


if __name__ == "__main__":
    main()
