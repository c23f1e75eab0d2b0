"""`[server] exposition = "grouped"` (docs/spec.md §4.3): billing served as one tool per group, over a real client.

The billing spec with `exposition = "grouped"` serves `invoice` (get, list, create, update, the four workflow
steps and the workflow's start/status/resolve), `customer` and `billing`. Each action keeps its own validation,
presenter and gate; the `action` enum follows the session's workflow state in the handshake era (with
tools/list_changed when it changes) and lists every action on 2026-07-28, where a call in the wrong state is
refused naming the allowed actions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from fusiongen.api import budget_text, validate
from fusiongen.codegen.budget import grouped_entries
from fusiongen.diagnostics import SpecError
from tests.support.build import SPECS, GeneratedServer, build, write_spec
from tests.support.client import connect, stdio
from tests.support.processes import http_server, run_python

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LEGACY, MODERN = "legacy", "2026-07-28"
GROUPED = (
    (SPECS / "billing.toml")
    .read_text(encoding="utf-8")
    .replace('package = "billing_server"\n', 'package = "billing_server"\nexposition = "grouped"\n', 1)
)
UNGATED = ["get", "list", "create", "update"]
ALLOWED = {"draft": ["submit"], "review": ["approve", "reject"], "approved": ["discharge"], "discharged": []}
WORKFLOW = ["start", "status", "resolve"]


@pytest.fixture(scope="module")
def grouped_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    folder = tmp_path_factory.mktemp("grouped")
    handlers = (SPECS / "billing_handlers.py").read_text(encoding="utf-8")
    spec = write_spec(folder, GROUPED, handlers=handlers)
    return build(spec, folder / "out"), folder / "out"


@pytest.fixture
def billing(grouped_build: tuple[Any, Path]) -> Iterator[GeneratedServer]:
    with GeneratedServer(*grouped_build) as server:
        yield server


class Notifications:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def list_changed(self) -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in self.messages)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def tools(client: Client) -> dict[str, types.Tool]:
    return {t.name: t for t in (await client.list_tools()).tools}


def actions(tool: types.Tool) -> list[str]:
    enum = tool.input_schema["properties"]["action"]["enum"]
    assert [b["properties"]["action"]["enum"] for b in tool.input_schema["anyOf"]] == [[a] for a in enum]
    return list(enum)


def wrong_state(action: str, state: str) -> str:
    allowed = "".join(f"<action>invoice(action={a})</action>" for a in ALLOWED[state])
    return (
        f'<tool_error tool="invoice(action={action})" code="FORBIDDEN" severity="error"><message>Tool '
        f'"invoice(action={action})" is not available in the current state ("{state}") of workflow "invoice".'
        f"</message><recovery>Call one of the available actions first.</recovery><available_actions>{allowed}"
        "</available_actions>"
    )


async def test_the_list_is_one_tool_per_group_in_both_eras(billing: GeneratedServer) -> None:
    for mode in (LEGACY, MODERN):
        async with Client(billing.create_server(billing.handlers), mode=mode, cache=None) as client:
            listed = await tools(client)
            assert list(listed) == ["invoice", "customer", "billing"]
            assert actions(listed["customer"]) == ["get"] and actions(listed["billing"]) == ["remind"]
            # A session that holds no workflow state is listed stable in the handshake era too (docs/spec.md §10.6).
            gated = ["submit", "approve", "reject", "discharge"]
            assert actions(listed["invoice"]) == [*UNGATED, *gated, *WORKFLOW]
            schema = listed["invoice"].input_schema
            assert schema["required"] == ["action"] and "$ref" not in json.dumps(schema)
            get = next(b for b in schema["anyOf"] if b["properties"]["action"]["enum"] == ["get"])
            assert get["required"] == ["action", "id"] and get["additionalProperties"] is False
            assert 'action "get": Fetch one invoice by id.' in (listed["invoice"].description or "")
            annotations = listed["customer"].annotations
            assert annotations is not None and annotations.read_only_hint is True


async def test_handshake_era_walks_the_invoice_workflow_with_list_changed(billing: GeneratedServer) -> None:
    notifications = Notifications()
    server = billing.create_server(billing.handlers)
    async with Client(server, mode=LEGACY, cache=None, message_handler=notifications) as client:
        for action, after in [("submit", "review"), ("approve", "approved"), ("discharge", "discharged")]:
            before = notifications.list_changed
            result = await client.call_tool("invoice", {"action": action, "invoice_id": "inv-1"})
            assert not result.is_error, text(result)
            assert text(result) == f"invoice(action={action}): done."
            listed = await tools(client)
            assert actions(listed["invoice"]) == [*UNGATED, *ALLOWED[after], *WORKFLOW]
            assert notifications.list_changed == before + 1
            status = await client.call_tool("invoice", {"action": "status"})
            assert status.structured_content is not None and status.structured_content["state"] == after
            assert status.structured_content["allowed_tools"] == [f"invoice(action={a})" for a in ALLOWED[after]]
        again = await client.call_tool("invoice", {"action": "submit", "invoice_id": "inv-1"})
        assert again.is_error and 'tool="invoice(action=submit)" code="FORBIDDEN"' in text(again)


async def test_modern_era_walks_the_invoice_workflow_with_a_stable_list(billing: GeneratedServer) -> None:
    notifications = Notifications()
    server = billing.create_server(billing.handlers)
    async with Client(server, mode=MODERN, cache=None, message_handler=notifications) as client:
        first = await tools(client)
        started = await client.call_tool("invoice", {"action": "start"})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        for action, state, after in [
            ("submit", "draft", "review"),
            ("approve", "review", "approved"),
            ("discharge", "approved", "discharged"),
        ]:
            wrong = "discharge" if action != "discharge" else "submit"
            refused = await client.call_tool("invoice", {"action": wrong, "invoice_id": "inv-1", "workflow_id": handle})
            assert refused.is_error and text(refused).startswith(wrong_state(wrong, state)), text(refused)
            result = await client.call_tool("invoice", {"action": action, "invoice_id": "inv-1", "workflow_id": handle})
            assert not result.is_error, text(result)
            status = await client.call_tool("invoice", {"action": "status", "workflow_id": handle})
            assert status.structured_content is not None and status.structured_content["state"] == after
        assert await tools(client) == first
        no_handle = await client.call_tool("invoice", {"action": "submit", "invoice_id": "inv-1"})
        assert no_handle.is_error and 'needs a workflow handle: pass "workflow_id"' in text(no_handle)
    assert notifications.list_changed == 0


async def test_each_action_keeps_its_validation_presenter_and_suggestions(billing: GeneratedServer) -> None:
    async with Client(billing.create_server(billing.handlers), mode=MODERN, cache=None) as client:
        missing = await client.call_tool("invoice", {"action": "get"})
        assert missing.is_error and '<validation_error tool="invoice(action=get)"><field name="id">' in text(missing)
        extra = await client.call_tool("customer", {"action": "get", "id": "c-1", "invoice_id": "x"})
        assert extra.is_error and '<field name="invoice_id">' in text(extra)
        got = await client.call_tool("invoice", {"action": "get", "id": "inv-2"})
        assert not got.is_error, text(got)
        data = got.structured_content["data"]  # type: ignore[index]
        assert data["customer"]["email"] == "[REDACTED]" and "internal_notes" not in data
        blocks = " ".join(b.text for b in got.content if isinstance(b, types.TextContent))
        assert "invoice(action=update)" in blocks or "billing(action=remind)" in blocks, blocks
        unknown = await client.call_tool("invoice", {"action": "pay"})
        assert unknown.is_error and '<field name="action">unknown action; expected one of "get", ' in text(unknown)
        absent = await client.call_tool("invoice", {})
        assert absent.is_error and '<field name="action">missing; expected one of' in text(absent)
        with pytest.raises(Exception, match="Unknown tool"):  # an action by its text name is not served
            await client.call_tool("invoice(action=get)", {"id": "inv-1"})


async def test_exposure_filters_apply_to_actions(billing: GeneratedServer) -> None:
    server = billing.create_server(billing.handlers, expose="read-only")
    async with Client(server, mode=MODERN, cache=None) as client:
        listed = await tools(client)
        assert list(listed) == ["invoice", "customer"]
        assert actions(listed["invoice"]) == ["get", "list"]
        refused = await client.call_tool("invoice", {"action": "create", "customer_id": "c-1"})
        assert refused.is_error and 'unknown action; expected one of "get", "list".' in text(refused)


async def test_the_budget_folds_as_the_server_does(billing: GeneratedServer, grouped_build: tuple[Any, Path]) -> None:
    generation, _ = grouped_build
    spec_tools = {t.wire for t in generation.ir.tools}
    grouping = billing.module("_grouping").Grouping(billing.module("server").GROUPS, list(spec_tools))
    modern = [t for t in billing.module("server").MODERN_TOOLS if t.name in spec_tools]
    served = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in grouping.fold(modern)]
    assert served == grouped_entries(generation.ir)
    line = budget_text(generation.ir).splitlines()
    assert any(
        re.fullmatch(
            r"exposition \(.*grouped is served\): flat \d+ tokens in 10 tools, grouped \d+ tokens in 3 tools", x
        )
        for x in line
    ), line


def test_two_tools_one_served_name_is_fg107(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        """
[server]
name = "x"
exposition = "grouped"

[tools.invoice]
description = "d"

[tools."invoice.get"]
description = "d"

[tools."invoice.a.b"]
description = "d"

[tools."invoice.a_b"]
description = "d"
""",
    )
    with pytest.raises(SpecError) as caught:
        validate(spec)
    found = [d.format() for d in caught.value.diagnostics]
    assert any(
        'error[FG107]: tools "invoice.a.b" and "invoice.a_b" are both action "a_b" of the grouped tool "invoice"' in d
        for d in found
    ), found
    assert any('error[FG107]: tool "invoice" has the name of the grouped tool "invoice"' in d for d in found), found


@pytest.mark.timeout(600)
def test_the_grouped_server_passes_ruff_and_mypy_strict(grouped_build: tuple[Any, Path], tmp_path: Path) -> None:
    """Generated code is first-class Python in grouped servers too (_grouping.py and the wrapped handlers)."""
    generation, out = grouped_build
    assert (out / generation.ir.package / "_grouping.py").is_file()
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        linted = run_python(["-m", "ruff", *command], cwd=out)
        assert linted.returncode == 0, linted.stdout + linted.stderr
    env = {**os.environ, "MYPYPATH": str(generation.loaded.home)}
    checked = run_python(
        ["-m", "mypy", "--strict", "--cache-dir", tmp_path / "mypy", generation.ir.package],
        cwd=out,
        env=env,
        timeout=540,
    )
    assert checked.returncode == 0 and "Success" in checked.stdout, checked.stdout + checked.stderr


async def test_an_action_keeps_its_requires_over_http(grouped_build: tuple[Any, Path]) -> None:
    """Without --auth an HTTP caller has no identity: invoice.update (requires invoices:write) is left out of the
    handshake-era action enum and refused on call, naming the action; the other actions are unaffected."""
    _, out = grouped_build
    with http_server(out) as url:
        async with connect(url, LEGACY) as client:
            listed = await tools(client)
            refused = await client.call_tool("invoice", {"action": "update", "id": "inv-1", "status": "paid"})
            allowed = await client.call_tool("invoice", {"action": "get", "id": "inv-1"})
    gated = ["submit", "approve", "reject", "discharge"]  # a fresh session: the stable list (docs/spec.md §10.6)
    assert actions(listed["invoice"]) == ["get", "list", "create", *gated, "start", "status", "resolve"]
    assert refused.is_error and 'tool="invoice(action=update)" code="FORBIDDEN"' in text(refused)
    assert "without authentication" in text(refused)
    assert not allowed.is_error, text(allowed)


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_a_grouped_stdio_server_answers_actions(grouped_build: tuple[Any, Path], mode: str) -> None:
    """Over stdio (the tool-call lane and the fast path answer handshake-era calls) the action reaches its tool."""
    _, out = grouped_build
    async with stdio(out, mode) as client:
        started = await client.call_tool("invoice", {"action": "start"})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        result = await client.call_tool("invoice", {"action": "submit", "invoice_id": "inv-1", "workflow_id": handle})
        refused = await client.call_tool("invoice", {"action": "submit", "invoice_id": "inv-1", "workflow_id": handle})
    assert text(result) == "invoice(action=submit): done."
    assert refused.is_error and text(refused).startswith(wrong_state("submit", "review")), text(refused)
