"""`[server] tool_names = "snake"`, the default: every tool name the model sees is one LLM APIs accept as a
function name; `"dotted"`, chosen explicitly, serves the spec's names.

OpenAI's function names must match `^[a-zA-Z0-9_-]{1,64}$`, so `invoice.get` cannot be offered to it. The
spec of `tests/cases/snake-tool-names` keeps its dotted names and sets no `tool_names`; its server is walked
here through a whole workflow, in both protocol eras, by a real `mcp.Client`: tools/list, the refusals'
`<action>`s and `tool` attributes, status's `allowed_tools` and `pending.next`, IN_DOUBT's recovery and the
suggestions must all name wire names (`invoice_start`, never `invoice.start`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from tests.support.build import GeneratedServer, build

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CASE = Path(__file__).parent / "cases" / "snake-tool-names"
WIRE = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")
DOTTED = re.compile(r"\binvoice\.[a-z]")  # a spec name leaking to the model
LEGACY, MODERN = "legacy", "2026-07-28"
ALL = ["invoice_get", "invoice_submit", "invoice_approve", "invoice_start", "invoice_status", "invoice_resolve"]

# invoice.approve is a mutation that fires a transition, so in doubt it refuses (IN_DOUBT) until resolved:
# its first run fails, which leaves the transition pending.
HANDLERS = """\
from typing import Any

INVOICE: dict[str, Any] = {"id": "i-1", "status": "draft"}
APPROVALS: list[int] = []


def invoice_get(args: Any) -> Any:
    return INVOICE


def invoice_submit(args: Any) -> None:
    return None


def invoice_approve(args: Any) -> Any:
    APPROVALS.append(1)
    if len(APPROVALS) == 1:
        raise RuntimeError("the payment API timed out")
    return INVOICE
"""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[GeneratedServer]:
    spec = tmp_path / "spec" / "spec.toml"
    spec.parent.mkdir()
    shutil.copy(CASE / "spec.toml", spec)
    assert "\ntool_names" not in spec.read_text(encoding="utf-8")  # the default is what is tested
    out = tmp_path / "out"
    with GeneratedServer(build(spec, out, handlers=HANDLERS), out) as server:
        yield server


@pytest.fixture
def dotted_ledger(tmp_path: Path) -> Iterator[GeneratedServer]:
    """The same spec with `tool_names = "dotted"`."""
    text = (CASE / "spec.toml").read_text(encoding="utf-8")
    text = text.replace('name = "ledger"\n', 'name = "ledger"\ntool_names = "dotted"\n', 1)
    out = tmp_path / "out"
    with GeneratedServer(build(text, out, handlers=HANDLERS), out) as server:
        yield server


class Seen:
    """Every text and structured result the model was shown, and the tool names inside them."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.structured: list[dict[str, Any]] = []

    def result(self, result: types.CallToolResult) -> str:
        assert result.content and all(isinstance(block, types.TextContent) for block in result.content)
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        self.texts.append(text)
        if result.structured_content is not None:
            self.structured.append(dict(result.structured_content))
        return text

    @property
    def last(self) -> str:
        return self.texts[-1]

    def shown(self) -> list[str]:
        return [*self.texts, *map(json.dumps, self.structured)]

    def named_tools(self) -> list[str]:
        """The tools named where the model reads a tool name: `<action>`s, `tool="..."`, allowed_tools, pending,
        structured suggestions."""
        found: list[str] = []
        for text in self.texts:
            found += re.findall(r"<action>([^<]*)</action>", text)
            found += re.findall(r'tool="([^"]*)"', text)
        for data in self.structured:
            found += data.get("allowed_tools", [])
            found += [data["pending"]["tool"]] if data.get("pending") else []
            found += [suggestion["tool"] for suggestion in data.get("suggestions", [])]
        return found


async def call(c: Client, seen: Seen, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await c.call_tool(tool, arguments)
    seen.result(result)
    return result


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_a_snake_server_names_only_wire_names(ledger: GeneratedServer, mode: str) -> None:
    seen = Seen()
    async with Client(ledger.create_server(), mode=mode, cache=None) as c:
        listed = (await c.list_tools()).tools
        names = [t.name for t in listed]
        assert all(WIRE.match(n) for n in names), names
        assert names == ALL  # a fresh session holds no workflow state: the stable list in both eras (§10.6)
        for tool in listed:
            assert not DOTTED.search(json.dumps(tool.model_dump(mode="json"))), tool

        if mode == MODERN:  # a bound tool without a handle: FORBIDDEN, whose one way forward is invoice_start
            refused = await call(c, seen, "invoice_submit", {})
            assert refused.is_error and "<action>invoice_start</action>" in seen.last
            assert "Call invoice_start to get a workflow_id" in seen.last
            started = await call(c, seen, "invoice_start", {})
            handle: dict[str, Any] = {"workflow_id": started.structured_content["workflow_id"]}
        else:
            handle = {}
        wrong = await call(c, seen, "invoice_approve", handle)
        assert wrong.is_error and "<action>invoice_submit</action>" in seen.last
        assert not (await call(c, seen, "invoice_submit", handle)).is_error
        if mode == LEGACY:  # that call made the session hold its state: its list follows the state from now on
            assert [t.name for t in (await c.list_tools()).tools] == ["invoice_get", "invoice_approve", *ALL[3:]]
        draft_status = await call(c, seen, "invoice_status", handle)
        assert draft_status.structured_content["allowed_tools"] == ["invoice_approve"]

        failed = await call(c, seen, "invoice_approve", handle)  # the handler raised: its outcome is unknown
        assert failed.is_error
        in_doubt = await call(c, seen, "invoice_approve", handle)
        assert 'code="IN_DOUBT"' in seen.last and "<action>invoice_resolve</action>" in seen.last
        assert "call invoice_resolve with outcome" in seen.last
        assert in_doubt.is_error
        pending = (await call(c, seen, "invoice_status", handle)).structured_content["pending"]
        assert pending == {
            "tool": "invoice_approve",
            "attempts": 1,
            "next": "check whether it took effect, then call invoice_resolve",
        }
        resolved = await call(c, seen, "invoice_resolve", {**handle, "outcome": "completed"})
        assert resolved.structured_content["state"] == "approved"

        card = await call(c, seen, "invoice_get", {"id": "i-1"})
        assert not card.is_error and "invoice_get: Look at invoice i-1 again." in seen.last
        assert "invoice_start: Start another invoice." in seen.last

    named = seen.named_tools()
    assert {"invoice_approve", "invoice_submit", "invoice_resolve"} <= set(named)
    assert all(WIRE.match(n) for n in named), named
    assert not [s for s in seen.shown() if DOTTED.search(s)]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_dotted_names_are_served_as_the_spec_writes_them(dotted_ledger: GeneratedServer, mode: str) -> None:
    seen = Seen()
    async with Client(dotted_ledger.create_server(), mode=mode, cache=None) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        dotted = [n.replace("_", ".", 1) for n in ALL]
        assert names == dotted  # the stable list in both eras
        handle: dict[str, Any] = {}
        if mode == MODERN:
            started = await call(c, seen, "invoice.start", {})
            handle = {"workflow_id": started.structured_content["workflow_id"]}
        wrong = await call(c, seen, "invoice.approve", handle)
        assert wrong.is_error and "<action>invoice.submit</action>" in seen.last
        card = await call(c, seen, "invoice.get", {"id": "i-1"})
        assert not card.is_error and "invoice.get: Look at invoice i-1 again." in seen.last
    assert dotted_ledger.module("server").TOOL_NAMES["invoice.get"] == "invoice.get"


OWN_RESOLVE = Path(__file__).parent / "cases" / "workflow-own-resolve"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_a_workflow_s_own_resolve_tool_is_the_spec_s(tmp_path: Path, mode: str) -> None:
    """Workflow "ticket" generates no ticket.resolve (no tool refuses in doubt): the spec's own tool of that name
    builds and is the one served, running its handler and firing its transition (docs/spec.md §10.4)."""
    spec = tmp_path / "spec" / "spec.toml"
    spec.parent.mkdir()
    for name in ("spec.toml", "helpdesk_server_handlers.py"):
        shutil.copy(OWN_RESOLVE / name, spec.parent / name)
    out = tmp_path / "out"
    with GeneratedServer(build(spec, out), out) as desk:
        async with Client(desk.create_server(), mode=mode, cache=None) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            assert "ticket_resolve" in names or mode == LEGACY  # handshake era: listed from state triaged on
            handle: dict[str, Any] = {}
            if mode == MODERN:
                started = await c.call_tool("ticket_start", {})
                handle = {"workflow_id": started.structured_content["workflow_id"]}
            assert not (await c.call_tool("ticket_triage", {"id": "t-1", **handle})).is_error
            resolved = await c.call_tool("ticket_resolve", {"id": "t-1", **handle})
            assert not resolved.is_error and Seen().result(resolved) == "Ticket t-1 resolved."
            status = await c.call_tool("ticket_status", handle)
            assert status.structured_content["state"] == "resolved"
