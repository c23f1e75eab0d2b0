"""Inline objects (`{ type = "object", fields = {...} }`): a model declared where it is used, at any depth.

Lowered to a generated model, so everything a model-typed field does holds for it: its hidden fields never reach
the model (text blocks or structuredContent), a redact_pii path through it is censored, its constraints are
checked on input with the dotted path of the inner field, and structuredContent validates against the
outputSchema, where it is written inline. Driven by a real `mcp.Client` in both protocol eras and by the official
TypeScript SDK client (whose Ajv validates structuredContent against the outputSchema).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from fusiongen.api import validate
from fusiongen.diagnostics import SpecError
from tests.support.build import GeneratedServer, build, built_server
from tests.support.quality import assert_generated_quality

SPEC = """
[server]
name = "ledger"

[models.Invoice]
hidden = ["secret"]
[models.Invoice.fields]
id = "string"
secret = "string"
address = { type = "object", description = "Where the invoice is sent.", fields = { \
street = "string", \
city = { type = "string", max_length = 80 }, \
zip = { type = "string", hidden = true }, \
phone = { type = "string", required = false }, \
geo = { type = "object", required = false, fields = { lat = "number", code = { type = "string", hidden = true } } } } }
lines = { type = "list", items = { type = "object", fields = { sku = "string", qty = "integer", \
cost = { type = "integer", hidden = true } } } }

[presenters.InvoiceCard]
model = "Invoice"
redact_pii = ["address.phone", "address.geo.lat"]

[tools."invoice.create"]
kind = "mutation"
description = "Create an invoice."
returns = "InvoiceCard"
[tools."invoice.create".input]
address = { type = "object", fields = { \
street = "string", \
city = { type = "string", max_length = 20 }, \
zip = { type = "string", hidden = true }, \
country = { type = "string", default = "GB" }, \
internal = { type = "string", guarded = true, required = false } } }
lines = { type = "list", default = [], items = { type = "object", fields = { \
sku = { type = "string", pattern = "^[A-Z]+-[0-9]+$" }, qty = { type = "integer", minimum = 1 } } } }
"""

# What the handler holds and no result may carry: the hidden zip codes, costs and secret, the redacted phone
# and latitude.
HIDDEN_VALUES = ("SW1A-9ZZ", "GEO-CODE-7", "4217", "top-secret", "+44 20 7946 0000", "51.5072")

HANDLERS = """
from typing import Any

RECEIVED: list[Any] = []


def invoice_create(args: Any) -> Any:
    RECEIVED.append(args)
    return {
        "id": "inv-1",
        "secret": "top-secret",
        "address": {
            "street": args.address["street"],
            "city": args.address["city"],
            "zip": args.address["zip"],
            "phone": "+44 20 7946 0000",
            "geo": {"lat": 51.5072, "code": "GEO-CODE-7"},
        },
        "lines": [{"sku": line["sku"], "qty": line["qty"], "cost": 4217} for line in args.lines],
    }
"""

ARGUMENTS = {
    "address": {"street": "1 Main St", "city": "London", "zip": "SW1A-9ZZ"},
    "lines": [{"sku": "TEA-1", "qty": 2}],
}

pytestmark = pytest.mark.anyio
MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("ledger")
    with built_server(SPEC, root / "out", handlers=HANDLERS) as server:
        yield server


async def listed_tool(ledger: GeneratedServer, mode: str) -> Any:
    async with Client(ledger.create_server(), mode=mode, cache=None) as client:
        return next(t for t in (await client.list_tools()).tools if t.name == "invoice_create")


async def call(ledger: GeneratedServer, arguments: dict[str, Any], mode: str = "legacy") -> Any:
    async with Client(ledger.create_server(), mode=mode, cache=None) as client:
        return await client.call_tool("invoice_create", arguments)


def text_of(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_the_input_schema_writes_each_object_inline(ledger: GeneratedServer, mode: str) -> None:
    schema = (await listed_tool(ledger, mode)).input_schema
    assert "$defs" not in schema
    assert schema["properties"]["address"] == {
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string", "maxLength": 20},
            "zip": {"type": "string"},  # hidden: sent by the agent, never shown back
            "country": {"type": "string", "default": "GB"},
        },  # `internal` is guarded: the agent cannot write it, so it is not offered
        "required": ["street", "city", "zip"],
        "additionalProperties": False,
    }
    item = schema["properties"]["lines"]["items"]
    assert item["properties"]["qty"] == {"type": "integer", "minimum": 1}
    assert item["required"] == ["sku", "qty"] and item["additionalProperties"] is False


@pytest.mark.parametrize("mode", MODES)
async def test_the_output_schema_leaves_hidden_fields_out_and_admits_only_the_censor(
    ledger: GeneratedServer, mode: str
) -> None:
    schema = (await listed_tool(ledger, mode)).output_schema
    assert schema is not None and "$defs" not in schema
    address = schema["properties"]["data"]["properties"]["address"]
    assert set(address["properties"]) == {"street", "city", "phone", "geo"}
    assert address["description"] == "Where the invoice is sent."
    assert address["properties"]["phone"] == {"const": "[REDACTED]"}
    assert address["properties"]["geo"]["properties"] == {"lat": {"const": "[REDACTED]"}}
    item = schema["properties"]["data"]["properties"]["lines"]["items"]
    assert set(item["properties"]) == {"sku", "qty"}


@pytest.mark.parametrize("mode", MODES)
async def test_hidden_inner_fields_never_reach_the_model_and_redactions_are_censored(
    ledger: GeneratedServer, mode: str
) -> None:
    ledger.handlers.RECEIVED.clear()
    result = await call(ledger, ARGUMENTS, mode)
    assert not result.is_error, text_of(result)
    (args,) = ledger.handlers.RECEIVED
    # The handler gets all of it, and the inner default of what the agent left out.
    assert args.address == {"street": "1 Main St", "city": "London", "zip": "SW1A-9ZZ", "country": "GB"}
    data = result.structured_content["data"]
    assert data == {
        "id": "inv-1",
        "address": {
            "street": "1 Main St",
            "city": "London",
            "phone": "[REDACTED]",
            "geo": {"lat": "[REDACTED]"},
        },
        "lines": [{"sku": "TEA-1", "qty": 2}],
    }
    sent = text_of(result) + json.dumps(result.structured_content)
    assert [value for value in HIDDEN_VALUES if value in sent] == []
    jsonschema.validate(result.structured_content, (await listed_tool(ledger, mode)).output_schema)


@pytest.mark.parametrize("mode", MODES)
async def test_inner_constraints_are_checked_with_the_dotted_path(ledger: GeneratedServer, mode: str) -> None:
    ledger.handlers.RECEIVED.clear()
    bad = {
        "address": {"street": "1 Main St", "city": "Llanfairpwllgwyngyll-on-sea", "zip": 7},
        "lines": [{"sku": "TEA-1", "qty": 2}, {"sku": "tea", "qty": 0}],
    }
    result = await call(ledger, bad, mode)
    assert result.is_error
    text = text_of(result)
    assert text.startswith('<validation_error tool="invoice_create">')
    assert '<field name="address.city">expected a string of at most 20 characters;' in text
    assert '<field name="address.zip">expected a string; you sent an integer.</field>' in text  # hidden: not echoed
    assert '<field name="lines[1].qty">expected an integer that is at least 1; you sent 0.</field>' in text
    assert '<field name="lines[1].sku">' in text
    assert '<field name="lines[0]' not in text
    assert ledger.handlers.RECEIVED == []


async def test_unknown_and_guarded_inner_keys_are_refused(ledger: GeneratedServer) -> None:
    arguments = {"address": {**ARGUMENTS["address"], "internal": "x", "county": "Kent"}}
    result = await call(ledger, arguments)
    assert result.is_error
    text = text_of(result)
    assert '<field name="address.internal">' in text and '<field name="address.county">' in text


def test_the_generated_code_passes_ruff_and_mypy_strict(ledger: GeneratedServer, tmp_path: Path) -> None:
    assert_generated_quality(ledger, tmp_path)


# --- the official TypeScript SDK client over stdio (Ajv validates structuredContent) -----------------------

TS_CLIENT = """
const [, , sdk, python, cwd, args] = process.argv;
const { Client } = await import(sdk + "/client/index.js");
const { StdioClientTransport } = await import(sdk + "/client/stdio.js");
const client = new Client({ name: "fusiongen-tests", version: "1.0.0" });
const env = { PYTHONPATH: cwd };
await client.connect(new StdioClientTransport({ command: python, args: ["-m", "ledger_server"], cwd, env }));
await client.listTools();  // the client caches a validator per outputSchema, and throws if a result fails it
const good = await client.callTool({ name: "invoice_create", arguments: JSON.parse(args) });
const bad = await client.callTool({
  name: "invoice_create",
  arguments: { address: { street: "x", city: "a city name far too long", zip: "z" } },
});
await client.close();
console.log(JSON.stringify({ good, bad }));
"""


@pytest.mark.timeout(120)
def test_the_typescript_sdk_validates_the_result_and_sees_no_hidden_value(tmp_path: Path) -> None:
    from tests.test_official_tooling import INSTALL_HINT, NODE_MODULES, node_env, tooling

    tools = tooling()
    sdk = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm"
    if not (sdk / "client" / "index.js").is_file():
        pytest.fail(f"the TypeScript SDK is missing from {NODE_MODULES}: {INSTALL_HINT}", pytrace=False)
    out = tmp_path / "out"
    build(SPEC, out, handlers=HANDLERS)
    script = tmp_path / "client.mjs"
    script.write_text(TS_CLIENT, encoding="utf-8")
    command = [str(tools.node), str(script), sdk.as_uri(), sys.executable, str(out), json.dumps(ARGUMENTS)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=node_env(tmp_path), stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"the TS client exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    output = json.loads(done.stdout)
    good, bad = output["good"], output["bad"]
    assert good["isError"] is False
    assert good["structuredContent"]["data"]["address"]["phone"] == "[REDACTED]"
    assert [value for value in HIDDEN_VALUES if value in json.dumps(good)] == []
    assert bad["isError"] is True
    assert '<field name="address.city">' in bad["content"][0]["text"]


def nested_objects_spec(depth: int) -> str:
    """Model A whose field `a` is an object holding an object `a`..., `depth` levels, in header tables."""
    lines = ["[server]", 'name = "deep"', ""]
    path = "models.A.fields.a"
    for _ in range(depth):
        lines += [f"[{path}]", 'type = "object"', f"[{path}.fields]", 'x = "string"', ""]
        path += ".fields.a"
    return "\n".join([*lines, '[tools."a.get"]', 'kind = "query"', 'returns = "A"', ""])


def test_objects_nest_as_deep_as_tables_may(tmp_path: Path) -> None:
    """48 levels of objects (97 tables) validate; past 100 tables, however they are written, the spec is refused
    with FG001 at the first table too deep, never with a RecursionError (pydantic gives up past 512 levels, and a
    generated schema literal nested past 200 would not parse)."""
    ok = tmp_path / "ok.toml"
    ok.write_text(nested_objects_spec(48), encoding="utf-8")
    ir = validate(ok)[1]
    assert sum(1 for model in ir.models if model.origin is not None) == 48
    for depth in (50, 400):
        deep = tmp_path / f"deep{depth}.toml"
        deep.write_text(nested_objects_spec(depth), encoding="utf-8")
        with pytest.raises(SpecError) as raised:
            validate(deep)
        (diagnostic,) = raised.value.diagnostics
        assert diagnostic.code == "FG001" and "tables nested more than 100 levels deep" in diagnostic.message
        assert diagnostic.position is not None and diagnostic.position.line == 246
