"""`map` fields (`{ type = "map", values = "T" }`): objects with keys of the caller's choosing, each value a T,
checked on input and shaped on output like any other value; driven by a real `mcp.Client`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from tests.support.build import GeneratedServer, built_server
from tests.support.quality import assert_generated_quality

SPEC = """
[server]
name = "stock"

[models.Bin]
hidden = ["code"]
[models.Bin.fields]
count = { type = "integer", minimum = 0 }
code = "string"

[models.Catalog]
[models.Catalog.fields]
prices = { type = "map", values = "number" }
bins = { type = "map", values = "Bin" }

[tools."stock.set"]
description = "Set prices and bins."
returns = "Catalog"
[tools."stock.set".input]
prices = { type = "map", values = "number", default = {} }
bins = { type = "map", values = "Bin", required = false }
bad_output = { type = "boolean", default = false }
"""

HANDLERS = """
from typing import Any

RECEIVED: list[Any] = []


def stock_set(args: Any) -> Any:
    RECEIVED.append(args)
    if args.bad_output:
        return {"prices": {"078-05-1120": "not a number"}, "bins": {}}
    return {"prices": args.prices, "bins": args.bins or {}}
"""

pytestmark = pytest.mark.anyio
MODES = ["legacy", "2026-07-28"]


def data_of(structured: Any) -> Any:
    """A presenter result's data, from the envelope structuredContent is ({"data": ..., "rules": ...})."""
    return structured["data"]


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("stock")
    with built_server(SPEC, root / "out", handlers=HANDLERS) as server:
        yield server


async def call(stock: GeneratedServer, arguments: dict[str, Any], mode: str = "legacy") -> Any:
    async with Client(stock.create_server(), mode=mode, cache=None) as client:
        return await client.call_tool("stock_set", arguments)


def text_of(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_schemas_say_object_of_values(stock: GeneratedServer, mode: str) -> None:
    async with Client(stock.create_server(), mode=mode, cache=None) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "stock_set")
    properties = tool.input_schema["properties"]
    assert properties["prices"] == {"type": "object", "additionalProperties": {"type": "number"}, "default": {}}
    # The model of the values is inline (docs/spec.md §5.2: self-contained, no `$defs`).
    bin_input = properties["bins"]["additionalProperties"]
    assert properties["bins"]["type"] == "object" and "$defs" not in tool.input_schema
    assert bin_input["properties"]["count"] == {"type": "integer", "minimum": 0}
    assert tool.output_schema is not None
    bins = tool.output_schema["properties"]["data"]["properties"]["bins"]
    assert bins["additionalProperties"]["properties"] == {"count": {"type": "integer"}}  # code is hidden


@pytest.mark.parametrize("mode", MODES)
async def test_values_are_checked_and_hidden_fields_stay_in(stock: GeneratedServer, mode: str) -> None:
    stock.handlers.RECEIVED.clear()
    arguments = {"prices": {"apple": 1.5, "pear": 2}, "bins": {"a1": {"count": 3, "code": "B-17"}}}
    result = await call(stock, arguments, mode)
    assert not result.is_error, text_of(result)
    (args,) = stock.handlers.RECEIVED
    assert args.prices == {"apple": 1.5, "pear": 2} and args.bins == {"a1": {"count": 3, "code": "B-17"}}
    assert data_of(result.structured_content) == {"prices": {"apple": 1.5, "pear": 2}, "bins": {"a1": {"count": 3}}}
    assert "B-17" not in text_of(result)
    async with Client(stock.create_server(), mode=mode, cache=None) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "stock_set")
    assert tool.output_schema is not None
    jsonschema.validate(result.structured_content, tool.output_schema)


async def test_each_bad_value_is_named_by_its_key(stock: GeneratedServer) -> None:
    result = await call(stock, {"prices": {"apple": "cheap", "pear": 2}, "bins": {"a1": {"count": -1, "code": 5}}})
    assert result.is_error
    text = text_of(result)
    assert '<field name="prices.apple">expected a number; you sent "cheap".</field>' in text
    assert '<field name="bins.a1.count">expected an integer that is at least 0; you sent -1.</field>' in text
    assert '<field name="bins.a1.code">expected a string; you sent an integer.</field>' in text  # hidden: not echoed
    assert '<field name="pear"' not in text


async def test_not_an_object_is_refused(stock: GeneratedServer) -> None:
    result = await call(stock, {"prices": [1, 2]})
    assert result.is_error
    assert '<field name="prices">expected an object; you sent [1, 2].</field>' in text_of(result)


async def test_bad_output_names_the_map_never_a_key(stock: GeneratedServer) -> None:
    result = await call(stock, {"bad_output": True})
    assert result.is_error
    text = text_of(result)
    assert "OUTPUT_INVALID" in text and "prices[*]" in text
    assert "078-05-1120" not in text and "not a number" not in text


def test_the_generated_code_passes_ruff_and_mypy_strict(stock: GeneratedServer, tmp_path: Path) -> None:
    assert_generated_quality(stock, tmp_path)
