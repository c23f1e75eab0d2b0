"""Resources, prompts, completion and exposure (--expose, --tags), through a real `mcp.Client` in both eras.

The shop case (tests/cases/resources-and-prompts) has a static resource, templates with an integer and an
enum variable, and a prompt with an enum argument; the billing spec has a resource, a prompt, tags and a
workflow whose generated tools follow its bound tools in and out of the served surface.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from tests.support.build import GeneratedServer, build
from tests.support.client import MODES, connect, stdio

pytestmark = pytest.mark.anyio

CASE = Path(__file__).parent / "cases" / "resources-and-prompts"


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[GeneratedServer]:
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    for name in ("spec.toml", "shop_server_handlers.py"):
        (spec_dir / name).write_bytes((CASE / name).read_bytes())
    out = tmp_path / "out"
    with GeneratedServer(build(spec_dir / "spec.toml", out), out) as server:
        yield server


def body(result: Any) -> dict[str, Any]:
    """A resource's one content: JSON text, whose body is the structured envelope."""
    (content,) = result.contents
    assert content.mime_type == "application/json"
    parsed: dict[str, Any] = json.loads(content.text)
    return parsed


@pytest.mark.parametrize("mode", MODES)
async def test_capabilities_are_advertised_only_when_declared(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), "legacy") as client:
        capabilities = client.server_capabilities
        assert capabilities.resources is not None and capabilities.prompts is not None
        assert capabilities.completions is not None
    # A spec without resources or prompts has neither capability nor methods.
    out = shop.out.parent / "plain" / "out"
    with GeneratedServer(build('[server]\nname = "plain"\n', out, handlers=""), out) as server:
        async with connect(server.create_server(), mode) as client:
            if mode == "legacy":
                capabilities = client.server_capabilities
                assert capabilities.resources is None and capabilities.prompts is None
                assert capabilities.completions is None
            for call in (client.list_resources, client.list_prompts, client.list_resource_templates):
                with pytest.raises(MCPError, match=r"[Mm]ethod not found"):
                    await call()


@pytest.mark.parametrize("mode", MODES)
async def test_static_resources_and_templates_are_listed_apart(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
    assert [(r.name, r.uri, r.mime_type) for r in listed] == [("catalog", "shop://catalog", "application/json")]
    assert [(t.name, t.uri_template, t.description) for t in templates] == [
        ("item", "item://{sku}/v{version}", "One version of an item."),
        ("by_color", "items://color/{color}", None),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_is_presented_like_a_tool_result(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        item = body(await client.read_resource("item://s-1/v2"))
        by_color = body(await client.read_resource("items://color/red"))
        catalog = body(await client.read_resource("shop://catalog"))
    # Hidden `cost` gone; the presenter's rules and suggestions in the envelope.
    expected_item = {"sku": "s-1", "version": 2, "color": "red"}
    assert item == {
        "data": expected_item,
        "rules": ["Quote prices from the price list, never from memory."],
        "suggestions": [{"tool": "item_get", "reason": "Fetch s-1 again after a change"}],
    }
    assert by_color["data"] == expected_item
    assert catalog == {"data": {"items": 1, "updated": "2026-11-30"}, "rules": [], "suggestions": []}
    assert "9.5" not in json.dumps([item, by_color])


@pytest.mark.parametrize("mode", MODES)
async def test_reading_what_is_not_there_is_a_protocol_error(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("nope://x")
        with pytest.raises(MCPError) as missing:
            await client.read_resource("item://s-9/v2")  # the handler returns None
        with pytest.raises(MCPError) as invalid:
            await client.read_resource("item://s-1/vtwo")  # not an integer
        with pytest.raises(MCPError) as enum:
            await client.read_resource("items://color/blue")
    assert unknown.value.error.code == INVALID_PARAMS
    assert "shop://catalog" in unknown.value.error.message
    assert unknown.value.error.data == {"uri": "nope://x"}  # SEP-2164
    assert missing.value.error.data == {"uri": "item://s-9/v2"}
    assert missing.value.error.code == INVALID_PARAMS and 'code="NOT_FOUND"' in missing.value.error.message
    assert invalid.value.error.code == INVALID_PARAMS
    assert '<field name="version">' in invalid.value.error.message
    assert enum.value.error.code == INVALID_PARAMS and "'red', 'green'" in enum.value.error.message


async def test_a_failing_resource_handler_says_nothing_of_its_exception(shop: GeneratedServer) -> None:
    def read_catalog(args: Any) -> Any:
        raise RuntimeError("secret-connection-string")

    shop.handlers.read_catalog = read_catalog
    async with connect(shop.create_server()) as client:
        with pytest.raises(MCPError) as failed:
            await client.read_resource("shop://catalog")
    assert failed.value.error.code == INTERNAL_ERROR
    assert 'code="INTERNAL_ERROR"' in failed.value.error.message
    assert "secret" not in failed.value.error.message


async def test_template_variables_are_percent_decoded(shop: GeneratedServer) -> None:
    seen: list[str] = []

    def read_item(args: Any) -> Any:
        seen.append(args.sku)
        return {"sku": args.sku, "version": args.version, "color": "green", "cost": 1}

    shop.handlers.read_item = read_item
    async with connect(shop.create_server()) as client:
        result = body(await client.read_resource("item://a%20b%2Fc/v7"))
    assert seen == ["a b/c"] and result["data"]["version"] == 7


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_substitute_arguments_as_text(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        (prompt,) = (await client.list_prompts()).prompts
        got = await client.get_prompt("restock_plan", {"sku": "{urgency} __import__('os')", "urgency": "high"})
    assert prompt.name == "restock_plan" and prompt.description == "Plan a restock."
    assert [(a.name, a.required) for a in prompt.arguments or ()] == [
        ("sku", True),
        ("urgency", False),
        ("note", False),
    ]
    (message,) = got.messages
    assert message.role == "user"
    # The value is text: its braces are not placeholders, nothing in it runs; {{ }} in the template are braces.
    assert message.content.text == (  # type: ignore[union-attr]
        "Plan a high-urgency restock of {urgency} __import__('os'); answer as JSON {\"sku\": ...}."
    )


@pytest.mark.parametrize("mode", MODES)
async def test_bad_prompt_arguments_are_refused_by_name(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("restock_plan", {"urgency": "urgent", "extra": "x"})
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("nope")
    message = refused.value.error.message
    assert refused.value.error.code == INVALID_PARAMS
    assert 'unknown argument "extra"' in message and 'missing required argument "sku"' in message
    assert 'argument "urgency" must be one of low, high' in message
    assert unknown.value.error.code == INVALID_PARAMS and "restock_plan" in unknown.value.error.message


@pytest.mark.parametrize("mode", MODES)
async def test_completion_offers_enum_values(shop: GeneratedServer, mode: str) -> None:
    async with connect(shop.create_server(), mode) as client:
        urgency = await client.complete(PromptReference(name="restock_plan"), {"name": "urgency", "value": "H"})
        free_text = await client.complete(PromptReference(name="restock_plan"), {"name": "sku", "value": ""})
        color = await client.complete(
            ResourceTemplateReference(uri="items://color/{color}"), {"name": "color", "value": ""}
        )
    assert urgency.completion.values == ["high"]
    assert free_text.completion.values == []
    assert color.completion.values == ["red", "green"] and color.completion.total == 2


# --- exposure -------------------------------------------------------------------------------------

CORE_QUERIES = ["invoice_get", "invoice_list", "customer_get"]


async def listed(server: Any, mode: str) -> list[str]:
    async with connect(server, mode) as client:
        return [t.name for t in (await client.list_tools()).tools]


@pytest.mark.parametrize("mode", MODES)
async def test_read_only_serves_only_queries_and_drops_the_workflow(billing: GeneratedServer, mode: str) -> None:
    server = billing.create_server(expose="read-only")
    assert await listed(server, mode) == CORE_QUERIES
    async with connect(server, mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool(
                "invoice_create", {"customer_id": "c-1", "amount_cents": 1, "due_date": "2026-01-01"}
            )
        assert (await client.call_tool("invoice_get", {"id": "inv-1"})).is_error is False
    assert refused.value.error.code == INVALID_PARAMS


@pytest.mark.parametrize("mode", MODES)
async def test_tags_select_tools(billing: GeneratedServer, mode: str) -> None:
    assert await listed(billing.create_server(tags=["invoices"]), mode) == [
        "invoice_get",
        "invoice_list",
        "billing_remind",
    ]
    assert await listed(billing.create_server(tags=["invoices"], expose="read-only"), mode) == [
        "invoice_get",
        "invoice_list",
    ]
    assert await listed(billing.create_server(tags=["nothing"]), mode) == []


async def test_workflow_tools_stay_while_a_bound_tool_is_served(billing: GeneratedServer) -> None:
    # Only invoice.discharge is a mutation of the workflow; the queries and it keep the workflow tools.
    kinds = dict(billing.module("server").TOOL_KINDS)
    served = billing.module("_surface").exposed_tools(
        kinds, {"invoice_discharge": frozenset({"x"})}, billing.module("server").WORKFLOW_TOOLS, "all", ["x"]
    )
    assert served == {"invoice_discharge", "invoice_start", "invoice_status", "invoice_resolve"}
    modern = await listed(billing.create_server(expose="all"), "2026-07-28")
    assert {"invoice_start", "invoice_status", "invoice_resolve"} <= set(modern)


async def test_the_command_line_chooses_the_surface_over_stdio(billing: GeneratedServer) -> None:
    async with stdio(billing.out, "legacy", "--expose", "read-only", "--tags", "invoices,customers") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        templates = (await client.list_resource_templates()).resource_templates
        read = body(await client.read_resource("invoice://inv-1"))
        prompt = await client.get_prompt("collect_overdue", {"customer_id": "c-1", "tone": "firm"})
    assert names == CORE_QUERIES
    assert [t.uri_template for t in templates] == ["invoice://{id}"]
    # ENVELOPE: these asserts read the resource body, which is the structured envelope either way.
    assert read["data"]["id"] == "inv-1" and read["data"]["customer"]["email"] == "[REDACTED]"
    assert "CRITICAL: amount_cents is in CENTS. Divide by 100." in read["rules"]
    assert {"tool": "billing_remind", "reason": "Send a payment reminder for inv-1"} in read["suggestions"]
    assert "internal_notes" not in json.dumps(read) and "legal says hold" not in json.dumps(read)
    assert "customer c-1" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_an_unknown_exposure_is_refused(billing: GeneratedServer) -> None:
    with pytest.raises(ValueError, match="read-only"):
        billing.create_server(expose="everything")
