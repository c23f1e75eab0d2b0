"""Presenters, end to end: small dedicated specs built into temp dirs, driven by a real `mcp.Client`.

Each spec here exercises one part of the presenter contract (UI blocks, rules, suggestions,
truncation, embeds, redaction, audiences, handler return types) and the billing reference server is
checked as documented in `specs/billing.toml`. What an agent perceives is pinned exactly: the text
of every content block, the order of blocks, rules and suggestions, and the structured content,
which must also validate against the tool's advertised `outputSchema`.

Tests marked `xfail(strict=True)` pin what fusiongen should do but does not yet (each reason names
the bug); they start failing (XPASS) the day the bug is fixed.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from fusiongen.diagnostics import SpecError
from tests.support.build import GeneratedServer, build
from tests.support.containers import Plain, ReadOnly, Registry

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]


# --- helpers ---------------------------------------------------------------------------------------


def server_header(name: str) -> str:
    """A `[server]` table whose package and handler module are unique to one spec."""
    server = name.replace("_", "-")
    return f'[server]\nname = "{server}"\npackage = "{name}_server"\nhandlers = "{name}_handlers"\n'


def build_spec(directory: Path, name: str, body: str) -> GeneratedServer:
    """Write a spec (and an empty handler module beside it) and build it; use as a context manager."""
    directory.mkdir(parents=True, exist_ok=True)
    spec = directory / f"{name}.toml"
    spec.write_text(server_header(name) + body, encoding="utf-8")
    handlers = directory / f"{name}_handlers.py"
    handlers.write_text('"""Handlers are replaced by each test."""\n', encoding="utf-8")
    out = directory / "out"
    return GeneratedServer(build(spec, out), out)


def returning(server: GeneratedServer, payload: object) -> types.ModuleType:
    """A handler module whose every handler returns `payload`."""
    module = types.ModuleType(f"{server.package_name}_test_handlers")

    def constant(args: Any) -> object:
        return payload

    for tool in server.generation.ir.handled:
        setattr(module, tool.handler, constant)
    return module


async def call(server: GeneratedServer, tool: str, payload: object, mode: str = "legacy") -> Any:
    """Call `tool` through a real client, its handler returning `payload`; check the advertised schema."""
    async with Client(server.create_server(returning(server, payload)), mode=mode, cache=None) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool(tool, {})
    if not result.is_error:
        assert listed[tool].output_schema is not None
        jsonschema.validate(result.structured_content, listed[tool].output_schema)
    return result


async def output_schema(server: GeneratedServer, tool: str) -> dict[str, Any]:
    async with Client(server.create_server(returning(server, None)), mode="legacy", cache=None) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    return listed[tool].output_schema


def for_user(block: Any) -> bool:
    return bool(block.annotations and block.annotations.audience == ["user"])


def model_view(result: Any) -> str:
    """Everything the model receives: content blocks not reserved for the user, and structured content."""
    blocks = [b.model_dump(by_alias=True) for b in result.content if not for_user(b)]
    return json.dumps(blocks, ensure_ascii=False) + json.dumps(result.structured_content, ensure_ascii=False)


def texts(result: Any) -> list[str]:
    return [b.text for b in result.content]


def sections(result: Any) -> list[str]:
    """The text blocks, the first split into its parts (docs/spec.md §9.1): the data as JSON, then the truncation
    notice, the domain rules and the action suggestions, each after a blank line; then the UI blocks."""
    first, *rest = texts(result)
    return [*re.split(r"\n\n(?=<(?:truncation_notice|domain_rules|action_suggestions)>\n?)", first), *rest]


def tagged(result: Any, tag: str) -> list[str]:
    return [text for text in sections(result) if text.startswith(f"<{tag}")]


def ui(block_type: str, text: str) -> str:
    return f'<ui_passthrough type="{block_type}">{text}</ui_passthrough>'


def rules_block(*rules: str) -> str:
    return "<domain_rules>\n" + "".join(f"- {r}\n" for r in rules) + "</domain_rules>"


def suggestions_block(*suggestions: str) -> str:
    return "<action_suggestions>\n" + "".join(f"- {s}\n" for s in suggestions) + "</action_suggestions>"


def dumped(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


# --- UI blocks -------------------------------------------------------------------------------------

BLOCKS = """
[models.Ticket]
description = "A support ticket."
[models.Ticket.fields]
id = "string"
title = "string"
priority = "integer"
status = "string"
owner = { type = "string", required = false, nullable = true }
tags = { type = "list", items = "string" }

[presenters.TicketCard]
model = "Ticket"
limit = 2

[[presenters.TicketCard.ui]]
type = "table"
columns = ["Field", "Value"]
rows = [["Ticket", "{id}"], ["Priority", "{priority * 10}%"], ["Tags", "{tags}"]]

[[presenters.TicketCard.ui]]
type = "markdown"
text = "**{upper(status)}**: {title}"

[[presenters.TicketCard.ui]]
type = "list"
items = ["Owner: {owner}", "{owner}", "Tags: {len(tags)}"]

[[presenters.TicketCard.ui]]
type = "mermaid"
text = "graph LR; open-->closed"
when = "status == 'open'"

[[presenters.TicketCard.ui]]
type = "json"
path = "tags"

[[presenters.TicketCard.ui]]
type = "code"
language = "sql"
text = "SELECT * FROM t WHERE id = '{id}' -- {{literal braces}}"

[[presenters.TicketCard.ui]]
type = "summary"
text = "{id} is urgent."
when = "priority >= 5"

[[presenters.TicketCard.ui]]
type = "json"

[[presenters.TicketCard.collection_ui]]
type = "table"
columns = ["Ticket", "Status"]
row = ["{id}", "{status}"]

[[presenters.TicketCard.collection_ui]]
type = "list"
item = "{id}: {title}"

[[presenters.TicketCard.collection_ui]]
type = "markdown"
text = "**{count()} tickets** found."

[[presenters.TicketCard.collection_ui]]
type = "summary"
text = "Many tickets."
when = "count() > 3"

[tools."ticket.get"]
kind = "query"
returns = "TicketCard"
handler = "get_ticket"

[tools."ticket.list"]
kind = "query"
returns = "TicketCard[]"
handler = "list_tickets"
"""


def ticket(number: int, **changes: Any) -> dict[str, Any]:
    base = {
        "id": f"T-{number}",
        "title": f"Printer {number} on fire",
        "priority": 7,
        "status": "open",
        "owner": None,
        "tags": ["hw", "urgent"],
        "sla_breached_by": "undeclared",
    }
    return {**base, **changes}


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("blocks"), "pt_blocks", BLOCKS) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
async def test_each_block_type_renders_exactly(blocks: GeneratedServer, mode: str) -> None:
    result = await call(blocks, "ticket_get", ticket(1), mode)
    assert not result.is_error, result.content[0].text
    shaped = {
        "id": "T-1",
        "title": "Printer 1 on fire",
        "priority": 7,
        "status": "open",
        "owner": None,
        "tags": ["hw", "urgent"],
    }
    assert result.structured_content["data"] == shaped
    assert texts(result) == [
        dumped(shaped),
        ui("table", "| Field | Value |\n| --- | --- |\n| Ticket | T-1 |\n| Priority | 70% |\n| Tags | hw, urgent |"),
        ui("markdown", "**OPEN**: Printer 1 on fire"),
        ui("list", "- Owner: \n- Tags: 2"),  # an entry that renders empty ("{owner}" of null) is left out
        ui("mermaid", "```mermaid\ngraph LR; open-->closed\n```"),
        ui("json", '```json\n[\n  "hw",\n  "urgent"\n]\n```'),
        ui("code", "```sql\nSELECT * FROM t WHERE id = 'T-1' -- {literal braces}\n```"),
        ui("summary", "📊 **Summary**: T-1 is urgent."),
        ui("json", "```json\n" + dumped(shaped) + "\n```"),
    ]
    assert not any(for_user(b) for b in result.content)


async def test_blocks_whose_when_is_false_are_left_out(blocks: GeneratedServer) -> None:
    result = await call(blocks, "ticket_get", ticket(2, status="closed", priority=1, owner="ana", tags=[]))
    types_shown = [b.text.split('"')[1] for b in result.content[1:]]
    assert types_shown == ["table", "markdown", "list", "json", "code", "json"]  # no mermaid, no summary
    assert ui("list", "- Owner: ana\n- ana\n- Tags: 0") in texts(result)
    assert ui("table", "| Field | Value |\n| --- | --- |\n| Ticket | T-2 |\n| Priority | 10% |\n| Tags |  |") in texts(
        result
    )


async def test_table_cells_escape_pipes_and_newlines(blocks: GeneratedServer) -> None:
    result = await call(blocks, "ticket_get", ticket(3, tags=["a|b", "c\nd"]))
    assert texts(result)[1] == ui(
        "table", "| Field | Value |\n| --- | --- |\n| Ticket | T-3 |\n| Priority | 70% |\n| Tags | a\\|b, c d |"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_collection_blocks_render_one_row_or_entry_per_shown_item(blocks: GeneratedServer, mode: str) -> None:
    result = await call(blocks, "ticket_list", [ticket(1), ticket(2, status="closed")], mode)
    assert result.structured_content == {
        "data": [
            {
                "id": "T-1",
                "title": "Printer 1 on fire",
                "priority": 7,
                "status": "open",
                "owner": None,
                "tags": ["hw", "urgent"],
            },
            {
                "id": "T-2",
                "title": "Printer 2 on fire",
                "priority": 7,
                "status": "closed",
                "owner": None,
                "tags": ["hw", "urgent"],
            },
        ],
        "total": 2,
        "shown": 2,
        "truncated": False,
        "rules": [],  # the presenter has none: the keys are there all the same
        "suggestions": [],
    }
    assert texts(result) == [
        dumped(result.structured_content["data"]),
        ui("table", "| Ticket | Status |\n| --- | --- |\n| T-1 | open |\n| T-2 | closed |"),
        ui("list", "- T-1: Printer 1 on fire\n- T-2: Printer 2 on fire"),
        ui("markdown", "**2 tickets** found."),  # count() > 3 is false: no summary
    ]


# --- truncation --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("container", [list, tuple])
async def test_truncation_notice_facts_and_limit(blocks: GeneratedServer, mode: str, container: type) -> None:
    found = container(ticket(n) for n in range(1, 6))
    result = await call(blocks, "ticket_list", found, mode)
    data = result.structured_content
    assert [i["id"] for i in data["data"]] == ["T-1", "T-2"]  # limit = 2, never exceeded
    assert (data["total"], data["shown"], data["truncated"]) == (5, 2, True)  # total counts every item found
    assert json.loads(sections(result)[0]) == data["data"]
    # In the first block, right after the data: a client that hands the model only that block passes it on.
    assert sections(result)[1] == (
        "<truncation_notice>Dataset truncated. 2 shown, 3 hidden. Use filters to narrow results.</truncation_notice>"
    )
    assert texts(result)[1:] == [
        ui("table", "| Ticket | Status |\n| --- | --- |\n| T-1 | open |\n| T-2 | open |"),
        ui("list", "- T-1: Printer 1 on fire\n- T-2: Printer 2 on fire"),
        ui("markdown", "**5 tickets** found."),  # count() is the total found
        ui("summary", "📊 **Summary**: Many tickets."),
    ]


async def test_items_beyond_the_limit_are_never_read(blocks: GeneratedServer) -> None:
    # Truncation comes first: a malformed item after the limit is counted but never shaped.
    result = await call(blocks, "ticket_list", [ticket(1), ticket(2), {"id": 3}, "not even an object"])
    assert not result.is_error, result.content[0].text
    assert (result.structured_content["total"], result.structured_content["shown"]) == (4, 2)


@pytest.mark.parametrize("size", [0, 1, 2])
async def test_no_truncation_up_to_the_limit(blocks: GeneratedServer, size: int) -> None:
    result = await call(blocks, "ticket_list", [ticket(n) for n in range(size)])
    assert {k: v for k, v in result.structured_content.items() if k not in ("data", "rules", "suggestions")} == {
        "total": size,
        "shown": size,
        "truncated": False,
    }
    assert len(result.structured_content["data"]) == size
    assert not any("Dataset truncated" in t for t in texts(result))


# --- rules and suggestions ---------------------------------------------------------------------------

RULES = """
[models.Receiver]
[models.Receiver.fields]
name = { type = "string", description = "Receiver's name" }
city = "string"

[models.Shipment]
[models.Shipment.fields]
id = "string"
carrier = { type = "string", description = "Carrier <code> & name" }
weight_kg = { type = "number", description = "Kilograms" }
status = "string"
fragile = "boolean"
receiver = { type = "Receiver", required = false }

[presenters.ReceiverCard]
model = "Receiver"
rules = ["Never call the receiver.", "Shipments are insured."]

[presenters.Shipment]
model = "Shipment"
embed = { receiver = "ReceiverCard" }
rules = [
  "Weights are in kg & <never> pounds.",
  "Shipments are insured.",
  "Weights are in kg & <never> pounds.",
]
collection_rules = ["{count()} shipments & counting.", "Shipments are insured."]

[[presenters.Shipment.rules_when]]
when = "fragile"
rule = "Shipment {id} is fragile: carry < {round(weight_kg / 2, 1)} kg at a time."

[[presenters.Shipment.rules_when]]
when = "status == 'late'"
rule = "Shipment {id} is late."

[[presenters.Shipment.suggest]]
tool = "ship.track"
reason = "Track {id} with {carrier}"
when = "status == 'late'"

[[presenters.Shipment.suggest]]
tool = "ship.list"
reason = "See all <open> & late shipments"

[[presenters.Shipment.suggest]]
tool = "ship.track"
reason = "Track {id} with {carrier}"
when = "fragile"

[[presenters.Shipment.ui]]
type = "markdown"
text = "{carrier} <{status}> & co"

[tools."ship.get"]
kind = "query"
returns = "Shipment"
handler = "get_shipment"

[tools."ship.list"]
kind = "query"
returns = "Shipment[]"
handler = "list_shipments"

[tools."ship.track"]
handler = "track"
"""


def shipment(number: int, **changes: Any) -> dict[str, Any]:
    base = {
        "id": f"S-{number}",
        "carrier": "DHL",
        "weight_kg": 5,
        "status": "late",
        "fragile": True,
        "receiver": {"name": "Bo", "city": "Oslo", "phone": "undeclared"},
    }
    return {**base, **changes}


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("rules"), "pt_rules", RULES) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
async def test_rule_kinds_order_dedup_and_escaping(rules: GeneratedServer, mode: str) -> None:
    result = await call(rules, "ship_get", shipment(1), mode)
    assert tagged(result, "domain_rules") == [
        rules_block(
            "carrier: Carrier &lt;code> &amp; name",  # field descriptions first, the embedded presenter's too
            "weight_kg: Kilograms",
            "name: Receiver's name",
            "Weights are in kg &amp; &lt;never> pounds.",  # then static rules, each once
            "Shipments are insured.",
            "Never call the receiver.",  # (the embedded presenter's duplicate of a parent rule is dropped)
            "Shipment S-1 is fragile: carry &lt; 2.5 kg at a time.",  # then conditional rules, interpolated
            "Shipment S-1 is late.",
        )
    ]
    assert tagged(result, "ui_passthrough") == [ui("markdown", "DHL &lt;late> &amp; co")]
    assert tagged(result, "action_suggestions") == [
        suggestions_block(
            "ship_track: Track S-1 with DHL",  # interpolated; the same suggestion from a second `when` is dropped
            "ship_list: See all &lt;open> &amp; late shipments",
        )
    ]
    # The first block: data, rules, suggestions (what a client reading only that block passes on); then the UI.
    assert [text[:2] for text in sections(result)] == ["{\n", "<d", "<a", "<u"]
    assert len(result.content) == 2


async def test_conditional_rules_and_suggestions_follow_the_data(rules: GeneratedServer) -> None:
    result = await call(rules, "ship_get", shipment(2, status="delivered", fragile=False, receiver=None))
    assert tagged(result, "domain_rules") == [
        rules_block(
            "carrier: Carrier &lt;code> &amp; name",
            "weight_kg: Kilograms",
            "Weights are in kg &amp; &lt;never> pounds.",
            "Shipments are insured.",
        )
    ]  # no receiver, no child's
    assert tagged(result, "action_suggestions") == [
        suggestions_block("ship_list: See all &lt;open> &amp; late shipments")
    ]
    fragile_only = await call(rules, "ship_get", shipment(3, status="delivered", weight_kg=0.3))
    rules_text = tagged(fragile_only, "domain_rules")[0]
    assert "- Shipment S-3 is fragile: carry &lt; 0.2 kg at a time.\n" in rules_text
    assert tagged(fragile_only, "action_suggestions") == [
        suggestions_block(  # in the spec's order
            "ship_list: See all &lt;open> &amp; late shipments", "ship_track: Track S-3 with DHL"
        )
    ]


async def test_collection_rules_count_and_dedup_across_items(rules: GeneratedServer) -> None:
    result = await call(
        rules,
        "ship_list",
        [shipment(1), shipment(2, status="delivered", fragile=False), shipment(3, fragile=False, receiver=None)],
    )
    assert tagged(result, "domain_rules") == [
        rules_block(
            "carrier: Carrier &lt;code> &amp; name",  # descriptions first, even in a collection
            "weight_kg: Kilograms",
            "name: Receiver's name",
            "3 shipments &amp; counting.",  # then static rules: the collection's (count() is the total found) ...
            "Shipments are insured.",
            "Weights are in kg &amp; &lt;never> pounds.",  # ... and the items', each once however many items
            "Never call the receiver.",
            "Shipment S-1 is fragile: carry &lt; 2.5 kg at a time.",  # then every item's conditional rules
            "Shipment S-1 is late.",
            "Shipment S-3 is late.",
        )
    ]
    assert tagged(result, "action_suggestions") == [
        suggestions_block(
            "ship_track: Track S-1 with DHL",
            "ship_list: See all &lt;open> &amp; late shipments",
            "ship_track: Track S-3 with DHL",
        )
    ]


FIXED = """
[models.Part]
[models.Part.fields]
sku = { type = "string", description = "Stock keeping unit" }

[models.Order]
[models.Order.fields]
id = "string"
status = "string"
part = { type = "Part" }

[presenters.PartCard]
model = "Part"
rules = ["Parts ship separately."]

[presenters.OrderCard]
model = "Order"
embed = { part = "PartCard" }
rules = ["Amounts are cents."]
collection_rules = ["Newest first."]

[[presenters.OrderCard.rules_when]]
when = "status == 'late'"
rule = "Late orders come first."

[[presenters.OrderCard.suggest]]
tool = "order.list"
reason = "See the other orders"
when = "status == 'late'"

[presenters.CountedCard]
model = "Order"
collection_rules = ["{count()} orders."]

[tools."order.get"]
kind = "query"
returns = "OrderCard"
handler = "get_order"

[tools."order.list"]
kind = "query"
returns = "OrderCard[]"
handler = "list_orders"

[tools."order.counted"]
kind = "query"
returns = "CountedCard[]"
handler = "counted_orders"
"""


def order(status: str) -> dict[str, Any]:
    return {"id": "O-1", "status": status, "part": {"sku": "P<1>"}}


async def test_spec_text_guidance_blocks_are_built_once_and_say_the_same(
    tmp_path: Path, rules: GeneratedServer
) -> None:
    """A presenter whose rules and suggestions are all spec text passes fixed_guidance: each distinct set of
    its guidance blocks is built once, and reads as the per-call build would. Templates never are."""
    with build_spec(tmp_path, "pt_fixed", FIXED) as fixed:
        source = inspect.getsource(fixed.module("presenters"))
        assert "return presented_result(data, notes, fixed_guidance=True)" in source  # present_order_card
        assert "return presented_collection(items, total, notes, fixed_guidance=True)" in source  # order.list
        assert "return presented_collection(items, total, notes)\n" in source  # order.counted: count() is data
        late, on_time = await call(fixed, "order_get", order("late")), await call(fixed, "order_get", order("ok"))
        late_again = await call(fixed, "order_get", order("late"))
        assert tagged(late, "domain_rules") == [
            rules_block(
                "sku: Stock keeping unit", "Amounts are cents.", "Parts ship separately.", "Late orders come first."
            )
        ]
        assert tagged(late, "action_suggestions") == [suggestions_block("order_list: See the other orders")]
        assert tagged(on_time, "domain_rules") == [
            rules_block("sku: Stock keeping unit", "Amounts are cents.", "Parts ship separately.")
        ]
        assert tagged(on_time, "action_suggestions") == []
        assert texts(late_again) == texts(late)
        present = fixed.module("presenters").present_order_card
        built = fixed.module("_presenting")._fixed_guidance_text
        first = present(order("late"))
        before = built.cache_info()
        second = present(order("late"))
        assert built.cache_info().hits == before.hits + 1 and built.cache_info().misses == before.misses  # built once
        assert texts(first) == texts(second)
        assert first.structured_content["rules"] is not second.structured_content["rules"]  # each its own envelope
        many = await call(fixed, "order_list", [order("ok"), order("late")])
        assert tagged(many, "domain_rules") == [
            rules_block(
                "sku: Stock keeping unit",
                "Newest first.",
                "Amounts are cents.",
                "Parts ship separately.",
                "Late orders come first.",
            )
        ]
        counted = await call(fixed, "order_counted", [order("ok")] * 3)
        assert tagged(counted, "domain_rules") == [rules_block("3 orders.")]
    # The rules fixture's presenter interpolates data into its rules: its blocks are built per call, never kept.
    assert "fixed_guidance" not in inspect.getsource(rules.module("presenters"))
    runtime = rules.module("_presenting")
    runtime._fixed_guidance_text.cache_clear()
    await call(rules, "ship_get", shipment(7))
    assert runtime._fixed_guidance_text.cache_info().currsize == 0


EXACT_LIST = """
[models.Item]
[models.Item.fields]
sku = "string"
qty = "integer"
card = "string"

[models.Basket]
hidden = ["note"]
[models.Basket.fields]
id = "string"
items = { type = "list", items = "Item" }
note = { type = "string", required = false }

[presenters.BasketView]
model = "Basket"
redact_pii = ["items[*].card"]

[presenters.BasketPeek]
model = "Basket"
redact_pii = ["items[*].card"]
user_blocks = "send"

[[presenters.BasketPeek.ui]]
type = "list"
audience = "user"
items = ["{items}"]

[tools."basket.get"]
kind = "query"
returns = "BasketView"
handler = "get_basket"

[tools."basket.peek"]
kind = "query"
returns = "BasketPeek"
handler = "peek_basket"
"""


def basket_item(k: int) -> dict[str, Any]:
    return {"sku": f"S{k}", "qty": k, "card": f"PII-card-{k}", "undeclared": f"PII-extra-{k}"}


@pytest.fixture(scope="module")
def exact_list(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("exact_list"), "pt_exact_list", EXACT_LIST) as server:
        yield server


@pytest.mark.parametrize("tool", ["basket_get", "basket_peek"])
async def test_a_list_of_exact_items_is_shaped_inline_like_one_item_at_a_time(
    exact_list: GeneratedServer, tool: str
) -> None:
    """Lists of exact items: the exact dicts inline, every other container through shape_item, all of them
    masked and stripped of undeclared keys alike, in the order given. BasketView reads nothing of its items, so
    they are redacted as they are shaped (its mask has nothing left to do); BasketPeek's user-only block reads
    them, so they go through shape_list_of_item and are masked after its UI, as any other path."""
    source = inspect.getsource(exact_list.module("presenters"))
    assert 'out["items"] = _shape_basket_view_items(items_of(' in source
    assert "def mask_basket_view" not in source and "mask_basket_peek(data)" in source
    assert 'out["items"] = shapes.shape_list_of_item(items_of(' in source
    mixed = [
        basket_item(0),
        Plain(basket_item(1)),
        Registry(basket_item(2)),
        ReadOnly(basket_item(3)),
        {**basket_item(4), "qty": 4.5},  # not the exact type: the field-by-field path, which refuses it
    ]
    shaped = [{"sku": f"S{k}", "qty": k, "card": "[REDACTED]"} for k in range(4)]
    result = await call(exact_list, tool, {"id": "B", "items": tuple(mixed[:4]), "note": "PII-note"})
    assert result.structured_content["data"] == {"id": "B", "items": shaped}
    model_facing = [b for b in result.content if not for_user(b)]
    assert "PII" not in json.dumps([b.model_dump(mode="json") for b in model_facing] + [result.structured_content])
    if tool == "basket_peek":  # its user-only block read the values before the mask
        (user_block,) = [b.text for b in result.content if for_user(b)]
        assert "PII-card-0" in user_block and "PII-card-3" in user_block and "PII-extra" not in user_block
    refused = await call(exact_list, tool, {"id": "B", "items": mixed})
    assert refused.is_error and 'code="OUTPUT_INVALID"' in refused.content[0].text
    assert "result.items[4].qty" in refused.content[0].text  # the failing item's index, as shape_items names it
    missing = await call(exact_list, tool, {"id": "B", "items": [basket_item(0), {"sku": "S", "qty": 1}]})
    assert "result.items[1].card" in missing.content[0].text and "PII" not in missing.content[0].text


# --- redaction, embeds, audiences ------------------------------------------------------------------

REDACT = """
[models.Address]
[models.Address.fields]
street = "string"
city = "string"
zip = { type = "string", required = false, nullable = true }

[models.Places]
[models.Places.fields]
home = { type = "Address", required = false, nullable = true }
work = { type = "Address", required = false }
label = { type = "string", required = false }

[models.Payment]
casts = { amount = "integer" }
[models.Payment.fields]
card = { type = "string", required = false, nullable = true }
amount = "integer"

[models.Line]
[models.Line.fields]
sku = "string"
payments = { type = "list", items = "Payment" }
codes = { type = "list", items = "string", required = false }

[models.Person]
hidden = ["ssn"]
[models.Person.fields]
id = "string"
name = { type = "string", description = "Full name" }
email = { type = "string", required = false, nullable = true }
ssn = { type = "string", required = false }

[models.Account]
description = "An account."
hidden = ["password"]
[models.Account.fields]
id = "string"
places = { type = "Places", required = false, nullable = true }
lines = { type = "list", items = "Line" }
owner = { type = "Person", required = false, nullable = true }
members = { type = "list", items = "Person", required = false }
secret = { type = "string", required = false }
internal = { type = "string", required = false }
password = { type = "string", required = false }

[presenters.PersonCard]
model = "Person"
redact_pii = ["email"]
censor = "<hidden>"
rules = ["Person rule."]

[[presenters.PersonCard.ui]]
type = "summary"
text = "Person {name}"

[presenters.AccountView]
model = "Account"
fields = ["id", "places", "lines", "owner", "members", "secret"]
user_blocks = "send"  # the tests below check what its user-only blocks show
embed = { owner = "PersonCard", members = "PersonCard" }
redact_pii = ["places.*.street", "lines[*].payments[*].card", "lines[*].codes[*]", "secret"]
censor = "###"
rules = ["Account {id}."]

[[presenters.AccountView.ui]]
type = "markdown"
text = "Account {id}"

[[presenters.AccountView.ui]]
type = "list"
audience = "user"
items = ["Secret: {secret}", "Owner mail: {owner.email}", "Card: {lines}"]

[[presenters.AccountView.ui]]
type = "json"
audience = "user"

[tools."account.get"]
kind = "query"
returns = "AccountView"
handler = "get_account"

[tools."account.list"]
kind = "query"
returns = "AccountView[]"
handler = "list_accounts"
"""

# Markers: every value that must never reach the model (redacted, hidden, narrowed out, undeclared).
PII = [
    "PII-street-1",
    "PII-street-2",
    "PII-card-1",
    "PII-code-1",
    "PII-code-2",
    "PII-secret",
    "PII-mail-owner",
    "PII-mail-member",
    "PII-ssn",
    "PII-password",
    "PII-internal",
    "PII-undeclared",
]


def account(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "A-1",
        "places": {
            "home": {"street": "PII-street-1", "city": "Oslo", "zip": None, "x": "PII-undeclared"},
            "work": {"street": "PII-street-2", "city": "Bergen", "zip": "5003"},
            "label": "main",
        },
        "lines": [
            {
                "sku": "s-1",
                "payments": [{"card": "PII-card-1", "amount": "12"}, {"card": None, "amount": 3}],
                "codes": ["PII-code-1", "PII-code-2"],
            },
            {"sku": "s-2", "payments": []},
        ],
        "owner": {"id": "p-1", "name": "Ada", "email": "PII-mail-owner", "ssn": "PII-ssn"},
        "members": [
            {"id": "p-2", "name": "Bob", "email": "PII-mail-member", "ssn": "PII-ssn"},
            {"id": "p-3", "name": "Cy", "email": None},
        ],
        "secret": "PII-secret",
        "internal": "PII-internal",
        "password": "PII-password",
        "extra": "PII-undeclared",
    }
    return {**base, **changes}


MASKED_ACCOUNT = {
    "id": "A-1",
    "places": {
        "home": {"street": "###", "city": "Oslo", "zip": None},
        "work": {"street": "###", "city": "Bergen", "zip": "5003"},
        "label": "main",
    },
    "lines": [
        {
            "sku": "s-1",
            "payments": [{"card": "###", "amount": 12}, {"card": None, "amount": 3}],
            "codes": ["###", "###"],
        },
        {"sku": "s-2", "payments": []},
    ],
    "owner": {"id": "p-1", "name": "Ada", "email": "<hidden>"},
    "members": [{"id": "p-2", "name": "Bob", "email": "<hidden>"}, {"id": "p-3", "name": "Cy", "email": None}],
    "secret": "###",
}


@pytest.fixture(scope="module")
def redact(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("redact"), "pt_redact", REDACT) as server:
        yield server


def assert_no_pii(result: Any) -> None:
    seen = model_view(result)
    leaked = [marker for marker in PII if marker in seen]
    assert not leaked, f"reached the model: {leaked}"


@pytest.mark.parametrize("mode", MODES)
async def test_every_redaction_path_form_is_masked(redact: GeneratedServer, mode: str) -> None:
    result = await call(redact, "account_get", account(), mode)
    assert not result.is_error, result.content[0].text
    # a.*.b (every field of places), a[*].b[*].c (nested lists), a[*].b[*] (list of strings), a (a field),
    # and the embedded presenter's own path (email) with its own censor, in a model field and in a list.
    assert result.structured_content["data"] == MASKED_ACCOUNT
    assert list(result.structured_content["data"]) == ["id", "places", "lines", "owner", "members", "secret"]
    assert sections(result)[0] == dumped(MASKED_ACCOUNT)
    assert_no_pii(result)


@pytest.mark.parametrize("mode", MODES)
async def test_embedded_presenters_shape_mask_and_add_rules_and_blocks(redact: GeneratedServer, mode: str) -> None:
    result = await call(redact, "account_get", account(), mode)
    assert tagged(result, "domain_rules") == [rules_block("name: Full name", "Account A-1.", "Person rule.")]
    model_blocks = [b.text for b in result.content[1:] if not for_user(b) and b.text.startswith("<ui")]
    assert model_blocks == [
        ui("markdown", "Account A-1"),  # then the embedded presenter's, per person
        ui("summary", "📊 **Summary**: Person Ada"),
        ui("summary", "📊 **Summary**: Person Bob"),
        ui("summary", "📊 **Summary**: Person Cy"),
    ]
    schema = await output_schema(redact, "account_get")
    person = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string", "description": "Full name"},
            "email": {"anyOf": [{"const": "<hidden>"}, {"type": "null"}]},
        },
        "required": ["id", "name"],
        "additionalProperties": False,
    }
    fields = schema["properties"]["data"]["properties"]
    assert fields["owner"] == {"anyOf": [person, {"type": "null"}]}  # the child's schema
    assert fields["members"] == {"type": "array", "items": person}  # an embed in a list field
    assert fields["secret"] == {"const": "###"}
    assert "password" not in json.dumps(schema) and "internal" not in json.dumps(schema)
    with pytest.raises(jsonschema.ValidationError):  # the schema admits only the censor at a redacted path
        jsonschema.validate(
            {"data": {**MASKED_ACCOUNT, "secret": "PII-secret"}, "rules": [], "suggestions": []}, schema
        )


async def test_user_blocks_are_annotated_and_may_show_real_values(redact: GeneratedServer) -> None:
    result = await call(redact, "account_get", account())
    user = [b for b in result.content if for_user(b)]
    assert [b.annotations.audience for b in user] == [["user"], ["user"]]
    lines = (
        '{"sku": "s-1", "payments": [{"card": "PII-card-1", "amount": 12}, '
        '{"card": null, "amount": 3}], "codes": ["PII-code-1", "PII-code-2"]}, '
        '{"sku": "s-2", "payments": []}'
    )
    assert user[0].text == ui("list", f"- Secret: PII-secret\n- Owner mail: PII-mail-owner\n- Card: {lines}")
    unmasked = {
        **MASKED_ACCOUNT,
        "secret": "PII-secret",
        "places": account()["places"],
        "lines": [
            {
                "sku": "s-1",
                "payments": [{"card": "PII-card-1", "amount": 12}, {"card": None, "amount": 3}],
                "codes": ["PII-code-1", "PII-code-2"],
            },
            {"sku": "s-2", "payments": []},
        ],
    }
    del unmasked["places"]["home"]["x"]
    unmasked["owner"] = {"id": "p-1", "name": "Ada", "email": "PII-mail-owner"}
    unmasked["members"] = [
        {"id": "p-2", "name": "Bob", "email": "PII-mail-member"},
        {"id": "p-3", "name": "Cy", "email": None},
    ]
    assert user[1].text == ui("json", "```json\n" + dumped(unmasked) + "\n```")
    for hidden in ("PII-ssn", "PII-password", "PII-internal", "PII-undeclared"):  # not even for the user
        assert hidden not in user[0].text + user[1].text
    for block in result.content:
        if not for_user(block):
            assert block.annotations is None
    assert_no_pii(result)


NULLS = [
    pytest.param({"id": "A-2", "lines": []}, {"id": "A-2", "lines": []}, id="only-required"),
    pytest.param(
        {"id": "A-2", "lines": [], "places": None, "owner": None, "members": [], "secret": None},
        {"id": "A-2", "places": None, "lines": [], "owner": None, "members": []},
        id="nulls",
    ),
    pytest.param({"id": "A-2", "lines": [], "places": {}}, {"id": "A-2", "places": {}, "lines": []}, id="empty-parent"),
    pytest.param(
        {"id": "A-2", "lines": [], "places": {"home": None, "work": None}},
        {"id": "A-2", "places": {"home": None}, "lines": []},
        id="null-children",
    ),
    pytest.param(
        {
            "id": "A-2",
            "places": {"work": {"street": "PII-street-2", "city": "c"}},
            "lines": [{"sku": "s", "payments": [{"amount": 1}, {"card": None, "amount": 2}], "codes": None}],
        },
        {
            "id": "A-2",
            "places": {"work": {"street": "###", "city": "c"}},
            "lines": [{"sku": "s", "payments": [{"amount": 1}, {"card": None, "amount": 2}]}],
        },
        id="missing-and-null-leaves",
    ),
    pytest.param(
        {
            "id": "A-2",
            "lines": [{"sku": "s", "payments": [], "codes": []}],
            "owner": {"id": "p", "name": "N"},
            "members": [{"id": "m", "name": "M", "email": None}],
        },
        {
            "id": "A-2",
            "lines": [{"sku": "s", "payments": [], "codes": []}],
            "owner": {"id": "p", "name": "N"},
            "members": [{"id": "m", "name": "M", "email": None}],
        },
        id="embeds-without-pii",
    ),
]


@pytest.mark.parametrize(("payload", "expected"), NULLS)
async def test_null_and_missing_values_along_paths(
    redact: GeneratedServer, payload: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = await call(redact, "account_get", payload)
    assert not result.is_error, result.content[0].text
    assert result.structured_content["data"] == expected  # nothing invented: a censor only where a value was
    assert_no_pii(result)


# Handler return types: the same data as a dict, a Mapping subclass, any Mapping, a pydantic model, a
# dataclass or a plain object (recursively), with lists as lists or tuples.


def convert(value: Any, kind: str, sequence: type) -> Any:
    if isinstance(value, list | tuple):
        return sequence(convert(v, kind, sequence) for v in value)
    if not isinstance(value, dict):
        return value
    inner = {k: convert(v, kind, sequence) for k, v in value.items()}
    if kind == "dict":
        return inner
    if kind == "mapping-subclass":
        return Registry(inner)
    if kind == "mapping":
        return ReadOnly(inner)
    if kind == "object":
        return Plain(inner)
    if kind == "dataclass":
        cls = dataclasses.make_dataclass("Row", [(k, Any) for k in inner])
        return cls(**inner)
    assert kind == "pydantic"
    model = pydantic.create_model("Row", **{k: (Any, ...) for k in inner})  # type: ignore[call-overload]
    return model(**inner)


KINDS = ["dict", "mapping-subclass", "mapping", "object", "dataclass", "pydantic"]


@pytest.mark.parametrize("sequence", [list, tuple])
@pytest.mark.parametrize("kind", KINDS)
async def test_every_handler_return_type_is_masked_the_same(redact: GeneratedServer, kind: str, sequence: type) -> None:
    reference = await call(redact, "account_get", account())
    result = await call(redact, "account_get", convert(account(), kind, sequence))
    assert not result.is_error, result.content[0].text
    assert result.structured_content["data"] == MASKED_ACCOUNT
    assert texts(result) == texts(reference)
    assert_no_pii(result)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_tuple_of_items_is_masked_like_a_list(redact: GeneratedServer, kind: str, mode: str) -> None:
    found = (convert(account(), kind, tuple), convert(account(id="A-9"), kind, tuple))
    result = await call(redact, "account_list", found, mode)
    assert not result.is_error, result.content[0].text
    assert {k: v for k, v in result.structured_content.items() if k not in ("rules", "suggestions")} == {
        "data": [MASKED_ACCOUNT, {**MASKED_ACCOUNT, "id": "A-9"}],
        "total": 2,
        "shown": 2,
        "truncated": False,
    }
    assert_no_pii(result)


WRONG_SHAPES = [
    pytest.param(account(lines="PII-card-1"), "result.lines", id="string-for-list"),
    pytest.param(
        account(lines=[{"sku": "s", "payments": {"card": "PII-card-1", "amount": 1}}]),
        "result.lines[0].payments",
        id="dict-for-list",
    ),
    pytest.param(
        account(lines=[{"sku": "s", "payments": ["PII-card-1"]}]), "result.lines[0].payments[0]", id="string-for-item"
    ),
    pytest.param(account(places="PII-street-1"), "result.places", id="string-for-object"),
    pytest.param(
        account(members=[{"id": "m", "name": "M", "email": ["PII-mail-member"]}]),
        "result.members[0].email",
        id="list-for-string",
    ),
    pytest.param(
        account(lines=[{"sku": "s", "payments": [], "codes": {"PII-code-1"}}]),
        "result.lines[0].codes",
        id="set-for-list",
    ),
]


@pytest.mark.parametrize(("payload", "where"), WRONG_SHAPES)
async def test_data_of_the_wrong_shape_fails_closed(redact: GeneratedServer, payload: Any, where: str) -> None:
    result = await call(redact, "account_get", payload)
    assert result.is_error and result.structured_content is None
    assert len(result.content) == 1 and 'code="OUTPUT_INVALID"' in result.content[0].text
    assert where in result.content[0].text
    assert not any(marker in result.content[0].text for marker in PII)


@pytest.mark.parametrize("mode", MODES)
async def test_every_result_validates_against_the_advertised_output_schema(
    redact: GeneratedServer, blocks: GeneratedServer, rules: GeneratedServer, mode: str
) -> None:
    calls: list[tuple[GeneratedServer, str, object]] = [
        (redact, "account_get", account()),
        (redact, "account_list", [account(), account(owner=None, members=None)]),
        *((redact, "account_get", p.values[0]) for p in NULLS),
        *((redact, "account_list", [p.values[0]] * 3) for p in NULLS),
        (blocks, "ticket_get", ticket(1)),
        (blocks, "ticket_list", [ticket(n) for n in range(7)]),
        (rules, "ship_get", shipment(1, receiver=None)),
        (rules, "ship_list", [shipment(1), shipment(2, receiver=None)]),
    ]
    for server, tool, payload in calls:
        schema = await output_schema(server, tool)
        result = await call(server, tool, payload, mode)
        assert not result.is_error, result.content[0].text
        jsonschema.validate(result.structured_content, schema)
        assert json.loads(sections(result)[0]) == result.structured_content["data"]


# --- the billing reference server ----------------------------------------------------------------------

DESCRIPTIONS = ("amount_cents: CENTS, divide by 100", "name: Full name")  # the invoice's, the customer's
STATIC = (
    "CRITICAL: amount_cents is in CENTS. Divide by 100.",
    "Address customers by name; never ask them for their email here.",
)
OVERDUE = "Invoice inv-1 is overdue: offer a reminder before anything else."
LIFECYCLE = ui("mermaid", "```mermaid\ngraph LR; draft-->review-->approved-->paid\n```")


def invoice_table(number: str, amount: str, status: str, due: str) -> str:
    return ui(
        "table",
        f"| Field | Value |\n| --- | --- |\n| Invoice | {number} |\n| Amount | {amount} |\n"
        f"| Status | {status} |\n| Due | {due} |",
    )


@pytest.mark.parametrize("mode", MODES)
async def test_billing_invoice_get_overdue(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(user_blocks="send"), mode=mode, cache=None) as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}["invoice_get"].output_schema
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
    assert not result.is_error
    jsonschema.validate(result.structured_content, schema)
    # The guidance in the first block, after the data (a client may hand the model only that block), then the UI.
    assert sections(result)[1:] == [
        rules_block(*DESCRIPTIONS, *STATIC, OVERDUE),
        suggestions_block("billing_remind: Send a payment reminder for inv-1"),
        invoice_table("inv-1", "1234", "OVERDUE", "2026-10-01"),
        ui("summary", "📊 **Summary**: Ada Lovelace owes 1234 (due 2026-10-01)."),
        LIFECYCLE,
        ui("list", "- Contact: ada@example.com\n- Internal id: inv-1"),
    ]
    assert [for_user(b) for b in result.content] == [False, False, False, False, True]
    assert "ada@example.com" not in model_view(result)  # only in the block for the user
    # The same guidance in structuredContent, for clients that hand the model only that (pydantic-ai).
    assert result.structured_content["rules"] == [*DESCRIPTIONS, *STATIC, OVERDUE]
    assert result.structured_content["suggestions"] == [
        {"tool": "billing_remind", "reason": "Send a payment reminder for inv-1"}
    ]
    assert set(result.structured_content) == {"data", "rules", "suggestions"}  # no UI block, user-only or not
    assert "4111111111111111" not in model_view(result)


@pytest.mark.parametrize("mode", MODES)
async def test_billing_invoice_get_draft_and_paid(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(user_blocks="send"), mode=mode, cache=None) as client:
        draft = await client.call_tool("invoice_get", {"id": "inv-2"})
        paid = await client.call_tool("invoice_get", {"id": "inv-5"})
    assert sections(draft)[1:] == [
        rules_block(*DESCRIPTIONS, *STATIC),
        suggestions_block("invoice_update: Move the draft to review when it is complete"),
        invoice_table("inv-2", "50", "DRAFT", "2026-12-15"),
        ui("summary", "📊 **Summary**: Alan Turing owes 50 (due 2026-12-15)."),
        LIFECYCLE,
        ui("list", "- Contact: alan@example.com\n- Internal id: inv-2"),
    ]
    assert sections(paid)[1:] == [  # paid: no lifecycle diagram, no conditional rule, no suggestion
        rules_block(*DESCRIPTIONS, *STATIC),
        invoice_table("inv-5", "999", "PAID", "2026-12-05"),
        ui("summary", "📊 **Summary**: Ada Lovelace owes 999 (due 2026-12-05)."),
        ui("list", "- Contact: ada@example.com\n- Internal id: inv-5"),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_billing_invoice_list(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(), mode=mode, cache=None) as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}["invoice_list"].output_schema
        result = await client.call_tool("invoice_list", {})
        drafts = await client.call_tool("invoice_list", {"status": "draft"})
    jsonschema.validate(result.structured_content, schema)
    assert (result.structured_content["total"], result.structured_content["shown"]) == (5, 3)
    assert tagged(result, "truncation_notice") == [
        "<truncation_notice>Dataset truncated. 3 shown, 2 hidden. Use filters to narrow results.</truncation_notice>"
    ]
    assert tagged(result, "ui_passthrough") == [
        ui(
            "table",
            "| Invoice | Status | Amount |\n| --- | --- | --- |\n| inv-1 | overdue | 1234 |\n"
            "| inv-2 | draft | 50 |\n| inv-3 | approved | 720 |",
        ),
        ui("markdown", "**5 invoices** match."),
    ]
    assert tagged(result, "domain_rules") == [
        rules_block(*DESCRIPTIONS, "Sorted by due date, oldest first.", *STATIC, OVERDUE)
    ]
    assert tagged(result, "action_suggestions") == [
        suggestions_block(
            "billing_remind: Send a payment reminder for inv-1",
            "invoice_update: Move the draft to review when it is complete",
        )
    ]
    assert not any(for_user(b) for b in result.content)  # collection_ui has no user block
    structured = result.structured_content
    assert (structured["truncated"], structured["notice"]) == (
        True,
        "Dataset truncated. 3 shown, 2 hidden. Use filters to narrow results.",
    )
    assert structured["rules"] == [*DESCRIPTIONS, "Sorted by due date, oldest first.", *STATIC, OVERDUE]
    assert [s["tool"] for s in structured["suggestions"]] == ["billing_remind", "invoice_update"]
    assert tagged(drafts, "ui_passthrough") == [
        ui(
            "table",
            "| Invoice | Status | Amount |\n| --- | --- | --- |\n| inv-2 | draft | 50 |\n| inv-4 | draft | 15 |",
        ),
        ui("markdown", "**2 invoices** match."),
    ]
    assert drafts.structured_content["truncated"] is False
    assert "notice" not in drafts.structured_content  # only a truncated collection has one
    assert tagged(drafts, "action_suggestions") == [
        suggestions_block("invoice_update: Move the draft to review when it is complete")
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_billing_customer_card(billing: GeneratedServer, mode: str) -> None:
    async with Client(billing.create_server(user_blocks="send"), mode=mode, cache=None) as client:
        result = await client.call_tool("customer_get", {"id": "c-1"})
    assert result.structured_content == {
        "data": {"id": "c-1", "name": "Ada Lovelace", "email": "***"},
        "rules": ["Customer cards are read-only."],
        "suggestions": [],
    }
    assert sections(result)[1:] == [
        rules_block("Customer cards are read-only."),
        ui("code", "```text\nAda Lovelace (c-1)\n```"),
        ui("json", '```json\n"ada@example.com"\n```'),
    ]
    assert [for_user(b) for b in result.content] == [False, False, True]
    assert "ada@example.com" not in model_view(result) and "078-05-1120" not in model_view(result)


# --- regressions: bugs these tests found (fixed since) ------------------------------------------------

EMBED_PATHS = """
[models.Person]
[models.Person.fields]
id = "string"
name = "string"
email = { type = "string", required = false }

[models.Team]
[models.Team.fields]
id = "string"
lead = { type = "Person", required = false }
members = { type = "list", items = "Person" }

[presenters.PersonCard]
model = "Person"
redact_pii = ["email"]
censor = "<hidden>"

[presenters.TeamView]
model = "Team"
embed = { lead = "PersonCard", members = "PersonCard" }
redact_pii = ["lead.name", "members[*].name"]
censor = "###"

[tools."team.get"]
returns = "TeamView"
handler = "get_team"
"""


@pytest.fixture(scope="module")
def embed_paths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("embed_paths"), "pt_embed_paths", EMBED_PATHS) as server:
        yield server


TEAM = {
    "id": "t",
    "lead": {"id": "p-1", "name": "PII-lead-name", "email": "PII-lead-mail"},
    "members": [{"id": "p-2", "name": "PII-member-name", "email": "PII-member-mail"}],
}


@pytest.mark.parametrize("mode", MODES)
async def test_a_parent_path_into_an_embed_uses_the_parent_censor_and_fits_the_schema(
    embed_paths: GeneratedServer, mode: str
) -> None:
    # Was: masked with the parent's censor, but the schema admitted only the child's (the client refused it).
    result = await call(embed_paths, "team_get", {**TEAM, "members": []}, mode)
    assert result.structured_content["data"] == {
        "id": "t",
        "lead": {"id": "p-1", "name": "###", "email": "<hidden>"},
        "members": [],
    }
    assert "PII" not in model_view(result)


async def test_a_parent_path_into_a_list_embed_keeps_the_child_mask(embed_paths: GeneratedServer) -> None:
    # Was: with members[*].name in the parent, the child's own path (email) was no longer masked.
    result = await call(embed_paths, "team_get", TEAM)
    assert result.structured_content["data"]["members"] == [{"id": "p-2", "name": "###", "email": "<hidden>"}]
    assert "PII" not in model_view(result)


def build_or_errors(directory: Path, name: str, body: str) -> GeneratedServer | list[str]:
    try:
        return build_spec(directory, name, body)
    except SpecError as exc:
        return [d.code for d in exc.diagnostics]


INLINE_EMBED = """
[models.Customer]
hidden = ["ssn"]
[models.Customer.fields]
id = "string"
ssn = { type = "string", required = false }

[models.Order]
[models.Order.fields]
id = "string"
customer = { type = "Customer" }

[presenters.Card]
schema = { id = "string", ssn = { type = "string", required = false } }

[presenters.OrderView]
model = "Order"
embed = { customer = "Card" }

[tools."order.get"]
returns = "OrderView"
handler = "get_order"
"""


def test_an_inline_schema_embed_cannot_expose_a_hidden_field(tmp_path: Path) -> None:
    # Was: the inline schema named the model's hidden field (ssn), which was then shaped and sent.
    assert build_or_errors(tmp_path, "pt_inline_embed", INLINE_EMBED) == ["FG153"]


CHILD_READS_REDACTED = """
[models.Customer]
[models.Customer.fields]
id = "string"
name = "string"

[models.Order]
[models.Order.fields]
id = "string"
customer = { type = "Customer" }

[presenters.CustomerCard]
model = "Customer"
rules = ["Customer {name}."]
suggest = [{ tool = "order.get", reason = "Ask {name}" }]

[[presenters.CustomerCard.ui]]
type = "summary"
text = "Customer {name}"

[presenters.OrderView]
model = "Order"
embed = { customer = "CustomerCard" }
redact_pii = ["customer.name"]

[tools."order.get"]
returns = "OrderView"
handler = "get_order"
"""


def test_an_embedded_presenter_cannot_show_a_path_its_parent_redacts(tmp_path: Path) -> None:
    # Was: the child's model-audience block, rule and suggestion interpolated the name the parent redacts.
    assert build_or_errors(tmp_path, "pt_child_reads", CHILD_READS_REDACTED) == ["FG158"]


ENUM_ONLY = """
[models.Light]
[models.Light.fields]
id = "string"
color = { type = "enum", values = ["red", "green"] }

[presenters.LightView]
model = "Light"

[tools."light.get"]
returns = "LightView"
handler = "get_light"
"""


async def test_a_presenter_with_an_enum_and_no_nested_model(tmp_path: Path) -> None:
    # Was: presenters.py used shapes.COLOR_VALUES without importing shapes: NameError on every call.
    with build_spec(tmp_path, "pt_enum_only", ENUM_ONLY) as server:
        result = await call(server, "light_get", {"id": "l", "color": "red"})
        wrong = await call(server, "light_get", {"id": "l", "color": "blue"})
    assert not result.is_error and result.structured_content["data"] == {"id": "l", "color": "red"}
    assert wrong.is_error and "result.color" in wrong.content[0].text


COLLECTION_JSON_PATH = """
[models.Ticket]
[models.Ticket.fields]
id = "string"
tags = { type = "list", items = "string" }

[presenters.TicketView]
model = "Ticket"

[[presenters.TicketView.collection_ui]]
type = "json"
path = "tags"

[tools."ticket.list"]
returns = "TicketView[]"
handler = "list_tickets"
"""


async def test_a_collection_json_block_with_a_path_shows_each_items_value(tmp_path: Path) -> None:
    # Was: compiled to json_text(data.get("tags")) where no `data` exists: NameError on every call.
    with build_spec(tmp_path, "pt_collection_json", COLLECTION_JSON_PATH) as server:
        result = await call(server, "ticket_list", [{"id": "t", "tags": ["a"]}, {"id": "u", "tags": []}])
    assert texts(result)[1:] == [ui("json", '```json\n[\n  [\n    "a"\n  ],\n  []\n]\n```')]


class Lazy:
    """An ORM-like row whose attribute load fails, with data in the exception text."""

    id = "T-1"
    priority = 1
    status = "open"
    owner = None
    tags: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        raise ValueError("row 17: ssn PII-ssn, card PII-card-1")


@pytest.mark.parametrize("mode", MODES)
async def test_an_attribute_that_raises_fails_closed(blocks: GeneratedServer, mode: str) -> None:
    # Was: the exception escaped the tool and the server sent its text to the client as a JSON-RPC error.
    try:
        result = await call(blocks, "ticket_get", Lazy(), mode)
    except MCPError as exc:
        pytest.fail(f"the exception reached the client: {exc}")
    assert result.is_error and result.structured_content is None and len(result.content) == 1
    assert "PII" not in result.content[0].text


# --- known bugs -------------------------------------------------------------------------------------------

CHILD_JSON_READS_REDACTED = """
[models.Customer]
[models.Customer.fields]
id = "string"
name = "string"

[models.Order]
[models.Order.fields]
id = "string"
customer = { type = "Customer" }

[presenters.CustomerCard]
model = "Customer"

[[presenters.CustomerCard.ui]]
type = "json"

[[presenters.CustomerCard.ui]]
type = "json"
path = "name"

[presenters.OrderView]
model = "Order"
embed = { customer = "CustomerCard" }
redact_pii = ["customer.name"]

[tools."order.get"]
returns = "OrderView"
handler = "get_order"
"""


async def test_an_embedded_json_block_cannot_show_a_path_its_parent_redacts(tmp_path: Path) -> None:
    built = build_or_errors(tmp_path, "pt_child_json", CHILD_JSON_READS_REDACTED)
    if isinstance(built, list):  # refusing the spec, like other blocks of the child, is the fix
        assert built == ["FG158"]
        return
    with built as server:
        result = await call(server, "order_get", {"id": "o", "customer": {"id": "c", "name": "PII-name"}})
    assert result.structured_content["data"]["customer"]["name"] == "[REDACTED]"
    assert "PII-name" not in model_view(result)


STAR_OVER_LISTS = """
[models.Address]
[models.Address.fields]
street = "string"

[models.Places]
[models.Places.fields]
home = { type = "Address" }
others = { type = "list", items = "Address" }

[models.Account]
[models.Account.fields]
id = "string"
places = { type = "Places" }

[presenters.AccountView]
model = "Account"
redact_pii = ["places.*.street"]

[tools."account.get"]
returns = "AccountView"
handler = "get_account"
"""


async def test_a_star_path_does_not_silently_skip_list_fields(tmp_path: Path) -> None:
    built = build_or_errors(tmp_path, "pt_star_lists", STAR_OVER_LISTS)
    if isinstance(built, list):  # refusing the ambiguous path is a fix too
        assert built == ["FG155"]
        return
    with built as server:
        result = await call(
            server,
            "account_get",
            {"id": "a", "places": {"home": {"street": "PII-home"}, "others": [{"street": "PII-other"}]}},
        )
    assert "PII" not in model_view(result)


# --- the shortcut of flat shapes --------------------------------------------------------------------------

FLAT = """
[models.Line]
hidden = ["secret"]
[models.Line.fields]
sku = "string"
qty = "integer"
paid = "boolean"
secret = "string"

[tools."line.get"]
kind = "query"
description = "One line."
returns = "Line"
"""


class NotADict(dict[str, Any]):
    """A dict that is not exactly a dict: shaped field by field, never by the shortcut."""


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    with build_spec(tmp_path_factory.mktemp("flat"), "flat", FLAT) as server:
        yield server


class Text(str):
    pass


@pytest.mark.parametrize(
    "line",
    [
        {"sku": "a", "qty": 2, "paid": True},
        {"sku": "a", "qty": 2, "paid": True, "secret": "s", "other": 1},  # hidden and undeclared: never copied
        {"sku": Text("a"), "qty": 2, "paid": False},  # a str subclass: sent as the plain string
        {"sku": "a", "qty": 2.0, "paid": False},  # an integral float: sent as an integer
        {"sku": "a", "qty": True, "paid": False},  # a bool is no integer
        {"sku": "a", "paid": False},  # a required field missing
        {"sku": None, "qty": 1, "paid": False},
        {"qty": 1, "sku": "a", "paid": 1},  # another key order: the shape's order is sent
    ],
)
def test_a_flat_shape_takes_a_dict_as_it_shapes_any_other_mapping(flat: GeneratedServer, line: dict[str, Any]) -> None:
    """Every field of Line is a required str, int or bool: a dict of exactly those types is copied in one step
    (shapes.py), anything else goes field by field. Both ways give the same data, or the same error."""
    shape = flat.module("shapes").shape_line
    assert "usual case" in inspect.getsource(shape)  # the shortcut is there
    output_error = flat.module("_values").OutputError

    def shaped(src: object) -> Any:
        try:
            return shape(src, "result")
        except output_error as exc:
            return ("OutputError", exc.path, exc.expected)

    by_shortcut, by_field = shaped(dict(line)), shaped(NotADict(line))
    assert by_shortcut == by_field
    if isinstance(by_shortcut, dict):
        assert list(by_shortcut) == ["sku", "qty", "paid"]
        assert all(type(value) in (str, int, bool) for value in by_shortcut.values())
