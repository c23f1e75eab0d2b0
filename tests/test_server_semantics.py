"""The generated billing server, driven in-process by a real `mcp.Client` in both protocol eras."""

from __future__ import annotations

import json
import logging
import types
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest
from mcp import Client
from pydantic import BaseModel

from tests.support.build import GeneratedServer

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
# Values in the seed that must never reach an agent: hidden fields and undeclared keys.
SECRETS = [
    "legal says hold",
    "800.5",
    "078-05-1120",
    "219-09-9999",
    "790",
    "B-17",
    "created by an agent",
    "4111111111111111",
    "5500000000000004",
    "ada@example.com",
    "alan@example.com",
]
HIDDEN_KEYS = ["internal_notes", "cost_basis", "ssn", "credit_score", "warehouse_bin"]


def everything(result: Any) -> str:
    """All the model receives from a result: content blocks not reserved for the user, structured content."""
    blocks = [b for b in result.content if not (b.annotations and b.annotations.audience == ["user"])]
    return json.dumps([b.model_dump(by_alias=True) for b in blocks]) + json.dumps(result.structured_content)


def assert_no_secrets(result: Any) -> None:
    text = everything(result)
    for secret in SECRETS:
        assert secret not in text
    for key in HIDDEN_KEYS:
        assert f'"{key}"' not in text and f'\\"{key}\\"' not in text


async def tool_schemas(client: Client) -> dict[str, Any]:
    return {t.name: t for t in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_listed_with_schemas_and_hints(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(), mode=mode, cache=None) as client:
        tools = await tool_schemas(client)
    core = ["invoice_get", "invoice_list", "invoice_create", "invoice_update", "customer_get", "billing_remind"]
    # A fresh session holds no workflow state, so both eras list every bound tool (the stable list, §10.6).
    bound = ["invoice_submit", "invoice_approve", "invoice_reject", "invoice_discharge"]
    assert list(tools) == [*core, *bound, "invoice_start", "invoice_status", "invoice_resolve"]
    handle = tools["invoice_approve"].input_schema["properties"]["workflow_id"]
    assert "workflow_id" not in tools["invoice_approve"].input_schema.get("required", [])
    # the handshake era also takes null for "no handle"; strict converters refuse the keyword in 2026-07-28
    assert handle.get("nullable") is (True if mode == "legacy" else None)
    assert tools["invoice_get"].annotations.read_only_hint is True
    assert tools["invoice_create"].annotations.destructive_hint is True
    create = tools["invoice_create"].input_schema
    assert sorted(create["properties"]) == ["amount_cents", "customer_id", "due_date"]
    assert create["additionalProperties"] is False
    output = tools["invoice_get"].output_schema
    assert "internal_notes" not in json.dumps(output) and "ssn" not in json.dumps(output)
    default = output["properties"]["data"]["anyOf"][0]  # returns_for_role: data is anyOf, `returns` first
    assert default["properties"]["amount_cents"]["type"] == "number"  # the cast decides


@pytest.mark.parametrize("mode", MODES)
async def test_get_returns_declared_visible_data_only_with_casts(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(), mode=mode, cache=None) as client:
        tools = await tool_schemas(client)
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
    assert not result.is_error
    data = result.structured_content["data"]
    # The Invoice presenter narrows the model to these fields, in this order.
    assert list(data) == ["id", "customer", "lines", "amount_cents", "status", "due_date"]
    assert data["amount_cents"] == 123400.0  # "123400" in the store, cast to number
    assert data["lines"][0]["unit_price_cents"] == 100000  # "100000", cast to integer
    assert data["lines"][0]["card_number"] == "[REDACTED]"  # lines[*].card_number
    assert data["customer"] == {"id": "c-1", "name": "Ada Lovelace", "email": "[REDACTED]"}  # embedded presenter
    assert data["due_date"] == "2026-10-01"
    assert json.JSONDecoder().raw_decode(result.content[0].text)[0] == data
    assert result.content[0].text.startswith('{\n  "id": "inv-1"')  # two-space indent, declared order
    jsonschema.validate(result.structured_content, tools["invoice_get"].output_schema)
    assert_no_secrets(result)


@pytest.mark.parametrize("mode", MODES)
async def test_list_wraps_items_and_validates(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(), mode=mode, cache=None) as client:
        tools = await tool_schemas(client)
        result = await client.call_tool("invoice_list", {})
        drafts = await client.call_tool("invoice_list", {"status": "draft", "limit": 5})
    assert [i["id"] for i in result.structured_content["data"]] == ["inv-1", "inv-2", "inv-3"]
    assert result.structured_content["truncated"] is True and result.structured_content["total"] == 5
    assert json.JSONDecoder().raw_decode(result.content[0].text)[0] == result.structured_content["data"]
    jsonschema.validate(result.structured_content, tools["invoice_list"].output_schema)
    assert [i["id"] for i in drafts.structured_content["data"]] == ["inv-2", "inv-4"]
    assert_no_secrets(result)


async def test_every_argument_is_validated_before_the_handler_runs(billing: GeneratedServer) -> None:
    calls: list[Any] = []
    original = billing.handlers.get_invoice
    billing.handlers.get_invoice = lambda args: calls.append(args) or original(args)
    async with Client(billing.create_server(), mode="legacy", cache=None) as client:
        wrong_type = await client.call_tool("invoice_get", {"id": 42})
        missing = await client.call_tool("invoice_get", {})
        unknown = await client.call_tool("invoice_get", {"id": "inv-1", "idd": "x"})
        several = await client.call_tool(
            "invoice_create",
            {"customer_id": 1, "amount_cents": "12", "due_date": "31/12/2026", "id": "mine", "created_at": "now"},
        )
    assert calls == []
    for result in (wrong_type, missing, unknown, several):
        assert result.is_error and result.structured_content is None
    assert wrong_type.content[0].text == (
        '<validation_error tool="invoice_get"><field name="id">expected a string; you sent 42.</field>'
        "<recovery>Fix the fields above and call the tool again.</recovery></validation_error>"
    )
    assert '<field name="id">this required field is missing; expected a string.</field>' in missing.content[0].text
    assert '<field name="idd">unknown field. Accepted fields: id.</field>' in unknown.content[0].text
    text = several.content[0].text
    for name in ("customer_id", "amount_cents", "due_date", "id", "created_at"):
        assert f'<field name="{name}">' in text
    assert "guarded" in text and text.count("guarded") == 2  # id and created_at
    assert "a date as YYYY-MM-DD" in text


async def test_update_is_partial_and_tells_the_handler_what_was_sent(billing: GeneratedServer) -> None:
    async with Client(billing.create_server(), mode="legacy", cache=None) as client:
        result = await client.call_tool("invoice_update", {"id": "inv-2", "status": "review"})
        refused = await client.call_tool("invoice_update", {"id": "inv-2", "amount_cents": 1})
    assert result.structured_content["data"]["status"] == "review"
    assert result.structured_content["data"]["due_date"] == "2026-12-15"  # not sent, so not changed
    assert refused.is_error and '<field name="amount_cents">unknown field' in refused.content[0].text


async def test_create_passes_typed_arguments(billing: GeneratedServer) -> None:
    seen: list[Any] = []
    original = billing.handlers.create_invoice

    async def spy(args: Any) -> Any:
        seen.append(args)
        return await original(args)

    billing.handlers.create_invoice = spy
    async with Client(billing.create_server(), mode="2026-07-28", cache=None) as client:
        result = await client.call_tool(
            "invoice_create", {"customer_id": "c-2", "amount_cents": 990, "due_date": "2027-01-31"}
        )
    assert not result.is_error, result.content[0].text
    import datetime

    assert seen[0].due_date == datetime.date(2027, 1, 31) and seen[0].amount_cents == 990
    assert seen[0].fields_set == frozenset({"customer_id", "amount_cents", "due_date"})
    assert result.structured_content["data"]["status"] == "draft"
    assert_no_secrets(result)


async def test_handler_exception_is_generic_and_not_logged_verbatim(
    billing: GeneratedServer, caplog: pytest.LogCaptureFixture
) -> None:
    def leaky(args: Any) -> Any:
        raise RuntimeError("db said: internal_notes=legal says hold")

    billing.handlers.get_invoice = leaky
    caplog.set_level(logging.DEBUG)
    async with Client(billing.create_server(), mode="legacy", cache=None) as client:
        failed = await client.call_tool("invoice_get", {"id": "inv-1"})
        after = await client.call_tool("customer_get", {"id": "c-1"})
    assert failed.is_error
    assert 'code="INTERNAL_ERROR"' in failed.content[0].text and "invoice_get" in failed.content[0].text
    assert_no_secrets(failed)
    assert "legal says hold" not in caplog.text and "RuntimeError" in caplog.text
    assert not after.is_error  # the server keeps serving


async def test_data_that_cannot_be_cast_is_an_error_without_data(billing: GeneratedServer) -> None:
    billing.handlers.INVOICES["inv-1"]["amount_cents"] = "twelve hundred"
    async with Client(billing.create_server(), mode="legacy", cache=None) as client:
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
    assert result.is_error and result.structured_content is None
    text = result.content[0].text
    assert 'code="OUTPUT_INVALID"' in text and "result.amount_cents" in text
    assert "twelve hundred" not in text and "Ada" not in text


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_a_protocol_error(billing: GeneratedServer, mode: str) -> None:
    from mcp.shared.exceptions import MCPError

    async with Client(billing.create_server(), mode=mode, cache=None) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("invoice_delete", {})
        assert raised.value.code == -32602 and "invoice_get" in raised.value.message
        assert not (await client.call_tool("customer_get", {"id": "c-1"})).is_error  # still serving


class PydanticInvoice(BaseModel):
    id: str
    customer_id: str
    lines: tuple[dict[str, Any], ...]
    amount_cents: int
    status: str
    due_date: str
    created_at: str
    internal_notes: str = "secret pydantic notes"


@dataclass
class DataclassCustomer:
    id: str
    name: str
    email: str
    ssn: str = "078-05-1120"


class PlainObject:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


@pytest.mark.parametrize("shape", ["pydantic", "dataclass-customer", "object", "mapping-subclass"])
async def test_any_handler_return_type_is_shaped_the_same(billing: GeneratedServer, shape: str) -> None:
    line = {"sku": "S", "description": "d", "quantity": 1, "unit_price_cents": 5, "card_number": "4111"}
    base = dict(
        id="inv-9",
        customer_id="c-1",
        lines=(line,),
        amount_cents=7,
        status="paid",
        due_date="2026-01-02",
        created_at="2026-01-01T00:00:00",
        internal_notes="secret pydantic notes",
        cost_basis=800.5,
    )

    class Registry(dict):  # a Mapping subclass, as ORMs return
        pass

    value: Any = {
        "pydantic": lambda: PydanticInvoice(**base),
        "dataclass-customer": lambda: {**base, "customer": DataclassCustomer("c-1", "Ada", "a@x")},
        "object": lambda: PlainObject(**base),
        "mapping-subclass": lambda: Registry(base),
    }[shape]()
    handlers = types.ModuleType("replacement_handlers")
    for name in (
        "list_invoices",
        "create_invoice",
        "update_invoice",
        "get_customer",
        "send_reminder",
        "submit_invoice",
        "approve_invoice",
        "reject_invoice",
        "discharge_invoice",
        "read_invoice",
    ):
        setattr(handlers, name, getattr(billing.handlers, name))
    handlers.get_invoice = lambda args: value
    async with Client(billing.create_server(handlers), mode="legacy", cache=None) as client:
        result = await client.call_tool("invoice_get", {"id": "inv-9"})
    assert not result.is_error, result.content[0].text
    data = result.structured_content["data"]
    assert data["id"] == "inv-9" and data["amount_cents"] == 7.0 and data["lines"][0]["sku"] == "S"
    assert data["lines"][0]["card_number"] == "[REDACTED]"
    assert "secret pydantic notes" not in everything(result) and "078-05-1120" not in everything(result)
    assert_no_secrets(result)
