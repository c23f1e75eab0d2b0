"""The client matrix: the reference billing server driven by the MCP clients agents are built on.

What the presenter shapes must survive every client, so each check is made on *what the client hands to the
model* where the client has a model (pydantic-ai, langchain), and on what the client returns to its program
otherwise (fastmcp `Client`, the TypeScript SDK's client):

- pydantic-ai (an Agent with a FunctionModel, no LLM: it records the ToolReturnParts it is handed), over stdio
  and streamable HTTP, in both protocol eras (its MCPToolset runs on a fastmcp `Client`, whose `mode=` picks
  the era);
- the fastmcp `Client`, over stdio and HTTP, in both eras;
- langchain-mcp-adapters 0.3.2, which pins mcp<2, from its own virtualenv (.venv-langchain, `make langchain`),
  over stdio and HTTP: handshake era only (mcp 1.x has no other);
- the official TypeScript SDK's client (tooling/, `make tooling`), over HTTP and stdio: handshake era only.

The checks, and which do not apply to which client (and why), are tabled in docs/spec.md §9.4. A missing client
fails these tests, never skips them: `make test` installs every one.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import ClientTransport, StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp import types
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.build import ROOT, SPECS, build
from tests.support.processes import http_server, server_env
from tests.test_official_tooling import INSTALL_HINT, NODE_MODULES, node_env, tooling

pytestmark = pytest.mark.timeout(180)

LEGACY, MODERN = "legacy", "2026-07-28"
ERAS = [LEGACY, MODERN]
OWN_CLIENT = "own"  # pydantic-ai's MCPToolset given the transport: the client it builds negotiates the era
TRANSPORTS = ["stdio", "http"]
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

# --- what every client must show the model, and what it must never show it -------------------------------

# Values of hidden fields (`hidden = [...]`) in the seeded data, and the hidden fields' names.
HIDDEN = ("078-05-1120", "legal says hold", "800.5", "internal_notes", "cost_basis", "credit_score", '"ssn"')
# Values redact_pii masks: the customer's email, the invoices' card numbers.
PII = ("ada@example.com", "alan@example.com", "4111111111111111", "5500000000000004", "4000056655665556")
RULES = (
    "CRITICAL: amount_cents is in CENTS. Divide by 100.",
    "Address customers by name; never ask them for their email here.",
    "Invoice inv-1 is overdue: offer a reminder before anything else.",
)
SUGGESTION = ("billing_remind", "Send a payment reminder for inv-1")
NOTICE = "Dataset truncated. 3 shown, 2 hidden. Use filters to narrow results."
VALIDATION_ERROR = '<validation_error tool="invoice_get"><field name="idx">unknown field.'
# The workflow's draft state allows invoice.submit; its transition (SUBMIT) leads to review.
DRAFT_ONLY, REVIEW_ONLY = "invoice_submit", "invoice_approve"


def assert_perceived(handed: str, *, collection: bool = False) -> None:
    """`handed` (what a client passes on, as text) carries the presenter's guidance and nothing it hides."""
    for secret in (*HIDDEN, *PII):
        assert secret not in handed, f"{secret!r} reached the model:\n{handed}"
    assert "[REDACTED]" in handed
    for rule in RULES:
        assert rule in handed, f"rule {rule!r} did not reach the model:\n{handed}"
    for part in SUGGESTION:
        assert part in handed, f"suggestion {part!r} did not reach the model:\n{handed}"
    assert (NOTICE in handed) is collection, handed


def assert_envelope(structured: dict[str, Any], schema: dict[str, Any]) -> None:
    """structuredContent is the documented envelope and validates, formats included, against outputSchema."""
    validator = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    assert not list(validator.iter_errors(structured)), [e.message for e in validator.iter_errors(structured)]
    # Not vacuous: the schema checks the date format of the data it describes.
    malformed = {**structured, "data": {**structured["data"], "due_date": "1 Oct 2026"}}
    assert list(validator.iter_errors(malformed))
    assert set(structured) == {"data", "rules", "suggestions"}
    assert structured["data"]["id"] == "inv-1" and structured["data"]["due_date"] == "2026-10-01"
    assert set(RULES) <= set(structured["rules"])
    assert {"tool": SUGGESTION[0], "reason": SUGGESTION[1]} in structured["suggestions"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("client-matrix") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture(scope="module")
def http_url(built: Path) -> Iterator[str]:
    """One HTTP server for the module: every client session has its own workflow state in the handshake era,
    and the calls below leave the seeded data as the checks expect it (inv-2's status is not checked)."""
    with http_server(built, log=built.parent / "http-server.log") as url:
        yield url


@pytest.fixture(scope="module")
def output_schemas(built: Path) -> dict[str, Any]:
    """Every tool's outputSchema, as tools/list advertises it (2026-07-28 lists every tool), to validate what
    clients that do not validate pass on."""

    async def listed() -> dict[str, Any]:
        async with FastMCPClient(fastmcp_transport("stdio", built, ""), mode=MODERN) as client:
            return {tool.name: tool.output_schema for tool in await client.list_tools()}

    schemas = anyio.run(listed)
    assert schemas["invoice_get"] and schemas["invoice_list"]
    return schemas


def assert_valid(structured: Any, schema: dict[str, Any]) -> None:
    errors = [
        e.message for e in jsonschema.Draft202012Validator(schema, format_checker=CHECKER).iter_errors(structured)
    ]
    assert not errors, errors


def fastmcp_transport(kind: str, built: Path, url: str) -> ClientTransport:
    if kind == "http":
        return StreamableHttpTransport(url)
    return StdioTransport(command=sys.executable, args=["-m", "billing_server"], cwd=str(built), env=server_env(built))


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, built: Path) -> Iterator[ClientTransport]:
    """A fresh fastmcp transport per test: stdio starts its own server, http uses the module's (started only
    for http, so a stdio-only run never waits for it)."""
    url = request.getfixturevalue("http_url") if request.param == "http" else ""
    yield fastmcp_transport(request.param, built, url)


# --- pydantic-ai: an Agent whose model is a script ----------------------------------------------------------


class ScriptedModel:
    """A FunctionModel's function: step N makes the tool calls `steps[N]`, then the run ends. Records, per
    step, the tools the model is offered and the ToolReturnParts it is handed (what a provider would send)."""

    def __init__(self, steps: list[list[tuple[str, dict[str, Any]]]]) -> None:
        self.steps = steps
        self.offered: list[list[str]] = []
        self.handed: list[list[ToolReturnPart]] = []
        self.protocol_version: str | None = None  # what the toolset's client negotiated

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len(self.offered)
        self.offered.append([tool.name for tool in info.function_tools])
        last = messages[-1]
        if step and isinstance(last, ModelRequest):
            # pydantic-ai runs a step's calls concurrently: in call order (by the ids given below), whatever
            # order they finished in.
            returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
            self.handed.append(sorted(returns, key=lambda part: part.tool_call_id))
        if step < len(self.steps):
            calls = [
                ToolCallPart(name, args, tool_call_id=f"{step}-{n}") for n, (name, args) in enumerate(self.steps[step])
            ]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("done")])


async def run_agent(
    transport: ClientTransport,
    mode: str,
    steps: list[list[tuple[str, dict[str, Any]]]],
    *,
    cache_tools: bool = True,
) -> ScriptedModel:
    """One agent run on an MCPToolset over a fastmcp `Client` in `mode`: a pre-built client is pydantic-ai's
    only way to choose the era; OWN_CLIENT lets MCPToolset build its own, as its users usually do."""
    model = ScriptedModel(steps)
    client = transport if mode == OWN_CLIENT else FastMCPClient(transport, mode=mode)
    toolset = MCPToolset(client, cache_tools=cache_tools)
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        result = await agent.run("Look after invoice inv-1.")
        model.protocol_version = toolset.client.protocol_version
    assert result.output == "done"
    return model


def handed_text(part: ToolReturnPart) -> str:
    """What a provider puts in the tool message for `part` (pydantic-ai's own serialization of it)."""
    return part.model_response_str()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [*ERAS, OWN_CLIENT])
async def test_pydantic_ai_hands_the_model_the_presented_result(
    transport: ClientTransport, mode: str, output_schemas: dict[str, Any]
) -> None:
    steps = [[("invoice_get", {"id": "inv-1"}), ("invoice_list", {}), ("invoice_get", {"idx": "inv-1"})]]
    model = await run_agent(transport, mode, steps)
    # pydantic-ai's own client negotiates 2026-07-28 with a generated server.
    assert (model.protocol_version == MODERN) is (mode != LEGACY), model.protocol_version
    assert {"invoice_get", "invoice_list", "customer_get", "billing_remind"} <= set(model.offered[0])
    # A session that holds no workflow state is listed every tool, in both eras (docs/spec.md §10.6).
    assert DRAFT_ONLY in model.offered[0] and REVIEW_ONLY in model.offered[0]
    get, listed, invalid = model.handed[0]
    assert get.outcome == "success" and listed.outcome == "success"
    # pydantic-ai hands the model structuredContent when every block is text: the envelope carries the guidance.
    assert get.content["rules"] and get.content["data"]["customer"]["email"] == "[REDACTED]"
    assert_valid(get.content, output_schemas["invoice_get"])
    assert_valid(listed.content, output_schemas["invoice_list"])
    assert_perceived(handed_text(get))
    assert_perceived(handed_text(listed), collection=True)
    assert listed.content["truncated"] is True and listed.content["shown"] == 3 and listed.content["total"] == 5
    # isError reaches the model as a retry carrying the server's field-level explanation.
    assert invalid.outcome == "retried", invalid
    assert invalid.content.startswith(VALIDATION_ERROR)
    assert json.loads(handed_text(invalid)) == {"error": invalid.content}


@pytest.mark.anyio
async def test_pydantic_ai_offers_the_new_list_after_a_transition(transport: ClientTransport) -> None:
    """Handshake era: the step after the transition offers the review state's tools (2026-07-28 lists every
    tool and never changes). pydantic-ai drops its cached list on notifications/tools/list_changed only for a
    client it builds itself, which negotiates 2026-07-28; on a pre-built handshake-era client (as here) it
    never installs that handler, so `cache_tools=False` is what makes it list again each step (docs/spec.md
    §9.4)."""
    steps = [[(DRAFT_ONLY, {"invoice_id": "inv-2"})]]
    model = await run_agent(transport, LEGACY, steps, cache_tools=False)
    assert model.handed[0][0].outcome == "success", model.handed[0]
    # Before its first session-mode call the session holds no state: every tool (docs/spec.md §10.6).
    assert DRAFT_ONLY in model.offered[0] and REVIEW_ONLY in model.offered[0]
    assert REVIEW_ONLY in model.offered[1] and DRAFT_ONLY not in model.offered[1]


# --- freshness: what a successful mutation made stale (docs/spec.md §6.9) -----------------------------------

# billing's invoice.update invalidates these; its call below sets inv-2's due date to the seeded one, so the data
# the other checks read stays as seeded. Over stdio: over HTTP without --auth no caller has its scope (§14.2).
STALE_AFTER_UPDATE = ("invoice.get", "invoice.list")
UPDATE_ARGS = {"id": "inv-2", "due_date": "2026-12-15"}


def wire_names(built: Path) -> dict[str, str]:
    """The generated server's TOOL_NAMES (spec name → the name clients call), read from its source: the names
    a client sees, whichever naming the spec uses."""
    tree = ast.parse((built / "billing_server" / "server.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "TOOL_NAMES" for t in targets) and node.value is not None:
                names = ast.literal_eval(node.value)
                assert isinstance(names, dict)
                return names
    raise AssertionError("server.py defines no TOOL_NAMES")


def assert_told_stale(names: dict[str, str], structured: dict[str, Any], handed: str) -> None:
    """The update's result names, in wire names, the reads it made stale: under `stale`, as its last rule, and in
    what the client hands on."""
    stale = [names[n] for n in STALE_AFTER_UPDATE]
    assert structured["stale"] == stale
    notice = structured["rules"][-1]
    assert notice.startswith("Stale now:") and all(name in notice for name in stale), notice
    assert notice in handed, handed


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_pydantic_ai_hands_the_model_what_an_update_made_stale(
    mode: str, built: Path, output_schemas: dict[str, Any]
) -> None:
    names = wire_names(built)
    update = names["invoice.update"]
    model = await run_agent(fastmcp_transport("stdio", built, ""), mode, [[(update, UPDATE_ARGS)]])
    (part,) = model.handed[0]
    assert part.outcome == "success", part
    assert_valid(part.content, output_schemas[update])
    assert_told_stale(names, part.content, handed_text(part))


# --- fastmcp Client ----------------------------------------------------------------------------------------


class ListChanged:
    """A fastmcp message_handler that signals notifications/tools/list_changed."""

    def __init__(self) -> None:
        self.received = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.received.set()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_fastmcp_client_calls_and_validates(transport: ClientTransport, mode: str) -> None:
    async with FastMCPClient(transport, mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert REVIEW_ONLY in tools  # a fresh session holds no state: every tool, in both eras (§10.6)
        listed = json.dumps([tool.model_dump(mode="json") for tool in tools.values()])
        for secret in HIDDEN:  # hidden fields are in no schema either
            assert secret not in listed
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
        assert result.is_error is False
        assert_envelope(result.structured_content, tools["invoice_get"].output_schema)
        # `.data` is the structured content parsed into the type fastmcp builds from the outputSchema.
        assert result.data is not None and result.data.data.customer.email == "[REDACTED]"
        assert list(result.data.rules) == result.structured_content["rules"]
        assert_perceived(json.dumps(result.structured_content))
        assert_perceived("\n".join(block.text for block in result.content if isinstance(block, types.TextContent)))
        collection = await client.call_tool("invoice_list", {})
        validator = jsonschema.Draft202012Validator(tools["invoice_list"].output_schema, format_checker=CHECKER)
        validator.validate(collection.structured_content)
        assert_perceived(json.dumps(collection.structured_content), collection=True)
        # isError: raised as ToolError by default, returned with raise_on_error=False.
        with pytest.raises(ToolError, match="validation_error"):
            await client.call_tool("invoice_get", {"idx": "inv-1"})
        failed = await client.call_tool("invoice_get", {"idx": "inv-1"}, raise_on_error=False)
        assert failed.is_error is True and failed.content[0].text.startswith(VALIDATION_ERROR)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_fastmcp_client_shows_what_an_update_made_stale(mode: str, built: Path) -> None:
    names = wire_names(built)
    update = names["invoice.update"]
    async with FastMCPClient(fastmcp_transport("stdio", built, ""), mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        for read in STALE_AFTER_UPDATE:  # the reads' descriptions say what makes them volatile
            assert f"Volatile: a successful {update} changes what it returns" in (tools[names[read]].description or "")
        result = await client.call_tool(update, UPDATE_ARGS)
        assert result.is_error is False
        jsonschema.Draft202012Validator(tools[update].output_schema, format_checker=CHECKER).validate(
            result.structured_content
        )
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        assert_told_stale(names, result.structured_content, text)
        # A read's own result says nothing is stale: only the mutation's success does.
        read = await client.call_tool(names["invoice.get"], {"id": "inv-1"})
        assert "stale" not in read.structured_content


@pytest.mark.anyio
async def test_fastmcp_client_receives_list_changed(transport: ClientTransport) -> None:
    notes = ListChanged()
    async with FastMCPClient(transport, mode=LEGACY, message_handler=notes) as client:
        assert REVIEW_ONLY in {tool.name for tool in await client.list_tools()}  # no state yet: every tool
        await client.call_tool(DRAFT_ONLY, {"invoice_id": "inv-2"})
        with anyio.fail_after(30):  # generous; only a missing notification waits this long
            await notes.received.wait()
        after = {tool.name for tool in await client.list_tools()}
        assert REVIEW_ONLY in after and DRAFT_ONLY not in after  # the session's own state now


# --- langchain-mcp-adapters, from its own virtualenv -------------------------------------------------------

LANGCHAIN_PYTHON = ROOT / ".venv-langchain" / "bin" / "python"
LANGCHAIN_HINT = "run `make langchain` (a virtualenv with tests/support/langchain-requirements.txt)"


def langchain(target: list[str], calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """tests/support/langchain_client.py's report (`target`: `stdio PYTHON DIR ARGS...` or `http URL`): the
    tools, and per call the ToolMessage's content (what the model is handed), status and artifact."""
    if not LANGCHAIN_PYTHON.is_file():
        pytest.fail(f"{LANGCHAIN_PYTHON} is missing: {LANGCHAIN_HINT}", pytrace=False)
    script = ROOT / "tests" / "support" / "langchain_client.py"
    command = [str(LANGCHAIN_PYTHON), str(script), json.dumps(calls), *target]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"the langchain client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def content_text(content: str | list[Any]) -> str:
    """A ToolMessage's content as the text a model reads: its text blocks, in order."""
    if isinstance(content, str):
        return content
    return "\n".join(block["text"] if isinstance(block, dict) else str(block) for block in content)


def langchain_stdio(built: Path, *server_args: str) -> list[str]:
    return ["stdio", sys.executable, str(built), *server_args]


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_langchain_hands_the_model_the_text_blocks(
    request: pytest.FixtureRequest, built: Path, kind: str, output_schemas: dict[str, Any]
) -> None:
    target = ["http", request.getfixturevalue("http_url")] if kind == "http" else langchain_stdio(built)
    calls = [("invoice_get", {"id": "inv-1"}), ("invoice_list", {}), ("invoice_get", {"idx": "inv-1"})]
    report = langchain(target, calls)
    assert {"invoice_get", "invoice_list", DRAFT_ONLY} <= set(report["tools"])
    assert REVIEW_ONLY in report["tools"]  # mcp 1.x, the handshake era: a fresh session lists every tool (§10.6)
    get, listed, invalid = report["calls"]
    # langchain hands the model every content block (the artifact, structuredContent, stays with the program).
    assert get["status"] == "success" and listed["status"] == "success"
    assert_perceived(content_text(get["content"]))
    assert_perceived(content_text(listed["content"]), collection=True)
    assert get["artifact"]["structured_content"]["data"]["id"] == "inv-1"
    assert_valid(get["artifact"]["structured_content"], output_schemas["invoice_get"])
    assert_valid(listed["artifact"]["structured_content"], output_schemas["invoice_list"])
    # isError: a ToolMessage with status "error" and the server's explanation, which the agent can act on.
    assert invalid["status"] == "error" and content_text(invalid["content"]).startswith(VALIDATION_ERROR)


@pytest.fixture(scope="module")
def langchain_stdio_report(built: Path) -> dict[str, Any]:
    """One langchain run over stdio with the defaults, for the checks below: a read, then invoice.update."""
    return langchain(
        langchain_stdio(built), [("invoice_get", {"id": "inv-1"}), (wire_names(built)["invoice.update"], UPDATE_ARGS)]
    )


def test_langchain_hands_the_model_user_only_blocks_when_sent(
    built: Path, langchain_stdio_report: dict[str, Any]
) -> None:
    """Why `user_blocks = "omit"` is the default: langchain ignores `annotations.audience`, so a user-only block
    that is sent reaches the model, real email included (billing's `audience = "user"` list)."""
    omitted = langchain_stdio_report["calls"][0]
    assert "ada@example.com" not in content_text(omitted["content"])
    sent = langchain(langchain_stdio(built, "--user-blocks", "send"), [("invoice_get", {"id": "inv-1"})])["calls"][0]
    handed = content_text(sent["content"])
    assert "Contact: ada@example.com" in handed
    assert len(sent["content"]) == len(omitted["content"]) + 1


def test_langchain_hands_the_model_what_an_update_made_stale(
    built: Path, langchain_stdio_report: dict[str, Any], output_schemas: dict[str, Any]
) -> None:
    """The ToolMessage's content (what the model reads) carries the "Stale now" rule; the artifact keeps
    structuredContent's `stale` for the program."""
    names = wire_names(built)
    update = langchain_stdio_report["calls"][1]
    assert update["status"] == "success", update
    structured = update["artifact"]["structured_content"]
    assert_valid(structured, output_schemas[names["invoice.update"]])
    assert_told_stale(names, structured, content_text(update["content"]))


# --- the official TypeScript SDK's client ------------------------------------------------------------------


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_ts_sdk_client(request: pytest.FixtureRequest, built: Path, kind: str, tmp_path: Path) -> None:
    """tests/support/ts_client.mjs: the SDK validates every structuredContent against the outputSchema with Ajv
    (formats included) and throws if it does not; the handshake era's list_changed reaches its handler."""
    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    names = wire_names(built)
    # Over stdio, last, invoice.update (over HTTP without --auth no caller has its scope).
    update = [json.dumps([names["invoice.update"], UPDATE_ARGS])]
    target = [request.getfixturevalue("http_url")] if kind == "http" else [sys.executable, str(built), *update]
    command = [str(tools.node), str(ROOT / "tests" / "support" / "ts_client.mjs"), sdk.as_uri(), kind, *target]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    output = json.loads(done.stdout)
    assert output["server"] == {"name": "billing", "version": "1.0.0"}
    assert output["validator"] == {"acceptsResult": True, "refusesMalformedDate": True}
    get, listed, invalid = output["get"], output["list"], output["invalid"]
    assert get["isError"] is False and listed["isError"] is False
    assert get["structuredContent"]["data"]["customer"]["email"] == "[REDACTED]"
    assert_perceived(json.dumps(get["structuredContent"]))
    assert_perceived(json.dumps(listed["structuredContent"]), collection=True)
    assert_perceived("\n".join(block["text"] for block in get["content"]))
    assert invalid["isError"] is True and invalid["content"][0]["text"].startswith(VALIDATION_ERROR)
    assert output["submit"]["isError"] is False
    assert output["listChangedReceived"] is True
    # A fresh session holds no workflow state: every tool (docs/spec.md §10.6); after its first session-mode
    # call, what its state allows.
    assert DRAFT_ONLY in output["before"] and REVIEW_ONLY in output["before"]
    assert REVIEW_ONLY in output["after"] and DRAFT_ONLY not in output["after"]
    if kind == "stdio":  # the SDK validated structuredContent (stale included) against the outputSchema
        assert output["update"]["isError"] is False, output["update"]
        text = "\n".join(block["text"] for block in output["update"]["content"] if block["type"] == "text")
        assert_told_stale(names, output["update"]["structuredContent"], text)
    else:
        assert output["update"] is None
