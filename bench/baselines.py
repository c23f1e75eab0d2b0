"""The generated servers measured by `bench/toolcall.py`, and the baselines they are compared with.

Generated (both import `specs/billing_handlers.py`, the same handler module):

* `core`: `specs/billing.toml` reduced to its server, its models and the `invoice.get` tool, so the
  tool does exactly validation + casts + hidden-field stripping + serialization (no presenter).
* `presented`: `specs/billing.toml` as shipped: `invoice.get` also goes through the Invoice presenter
  (field narrowing, PII redaction, rules, UI blocks, suggestions). `--golden` imports golden/billing.

Baselines:

* `mcpserver_baseline`: what one would write by hand with `mcp.server.MCPServer` for the core tool:
  a typed `id: str` argument validated by MCPServer, the same lookup (`billing_handlers.get_invoice`),
  a pydantic output model declaring only the visible fields (hidden ones are never declared, so they
  are dropped), the cast done by pydantic's lax mode (`amount_cents: float` from "123400"), returned as
  structured output. The tool is `async def`: MCPServer runs a plain `def` tool in a worker thread,
  a thread hop the generated server does not pay (it runs sync handlers on the event loop).
* `bare_baseline`: a low-level `Server` whose `tools/call` returns a precomputed result without any
  validation: the same dict as structured content and as JSON text, serialized per call with the
  generated runtime's own `dumps` (orjson, indent 2), plus, for the presented variant, the same extra
  content blocks (precomputed). It lists the generated tool (same output schema), so a client
  validates the same schema for both.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import logging
import re
import sys
import tempfile
import tomllib
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Literal

import mcp_types as types
from mcp.server import MCPServer, Server, ServerRequestContext
from pydantic import BaseModel, ConfigDict, field_serializer

from bench.core import ROOT

SPEC = ROOT / "specs" / "billing.toml"
GOLDEN = ROOT / "golden" / "billing"
TOOL = "invoice.get"  # the spec's key
WIRE = "invoice_get"  # its wire name: portable names are the default, and every variant serves the same name
# The seeded invoice with hidden fields, casts, a customer and lines.
ARGUMENTS: dict[str, Any] = {"id": "inv-1"}

CORE_SERVER_KEYS = ("name", "version", "package", "instructions", "handlers")
CORE_TOOL_KEYS = ("kind", "description", "returns", "handler", "input")


# --- building and importing the generated servers ------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid in TOML basic strings
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def core_spec_text() -> str:
    """specs/billing.toml reduced to [server] essentials, [models] and the invoice.get tool."""
    spec = tomllib.loads(SPEC.read_text(encoding="utf-8"))
    server = {k: v for k, v in spec["server"].items() if k in CORE_SERVER_KEYS}
    tool = {k: v for k, v in spec["tools"][TOOL].items() if k in CORE_TOOL_KEYS}

    def table(header: str, values: dict[str, Any]) -> list[str]:
        return [f"[{header}]", *(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items()), ""]

    lines = table("server", server)
    for name, model in spec["models"].items():
        lines += table(f"models.{_toml_key(name)}", model)
    lines += table(f"tools.{_toml_key(TOOL)}", tool)
    return "\n".join(lines)


def _build(spec: Path, out: Path) -> None:
    from fusiongen.api import generate, publish

    publish(generate(spec, out), out)


def _import_as(alias: str, package_dir: Path) -> ModuleType:
    """Import a generated package under another top-level name (its imports are all relative). The first one
    imported is also its own name (`billing_server`): the handler module imports `ToolError` from it. Only a
    handler's ToolError would notice that the other copies catch their own class; no benchmark raises one."""
    spec = importlib.util.spec_from_file_location(
        alias, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    sys.modules.setdefault(package_dir.name, module)
    # As served (--log-level warning): MCPServer's import sets the root logger to INFO, which would time the
    # per-call info line (through rich) instead of the tool.
    logging.getLogger(alias).setLevel(logging.WARNING)
    return module


# The generated runtime modules whose helpers the benchmarks call, split by concern (docs/spec.md §11.1).
RUNTIME_HELPERS = ("_values", "_results", "_presenting", "_runtime")


def runtime_helpers(package: ModuleType) -> SimpleNamespace:
    """One namespace of a generated package's runtime helpers (values and checks, results, presenting, the call
    path), so a benchmark calls the server's own leaf functions wherever the runtime keeps each. A server's
    copies leave out what it cannot reach (an output check for a type it never returns): those come from
    fusiongen/runtime/, the same source."""
    merged: dict[str, Any] = {}
    for prefix in ("fusiongen.runtime", package.__name__):
        for name in RUNTIME_HELPERS:
            module = importlib.import_module(f"{prefix}.{name}")
            merged.update({key: value for key, value in vars(module).items() if not key.startswith("__")})
    return SimpleNamespace(**merged)


def _handlers_importable() -> None:
    if str(SPEC.parent) not in sys.path:
        sys.path.insert(0, str(SPEC.parent))


def load_core() -> ModuleType:
    """Build the core spec into a temp dir and import it as `bench_core_billing_server`."""
    _handlers_importable()
    work = Path(tempfile.mkdtemp(prefix="fusiongen-bench-core-"))
    spec = work / "billing_core.toml"
    spec.write_text(core_spec_text(), encoding="utf-8")
    _build(spec, work / "out")
    package = tomllib.loads(spec.read_text())["server"].get("package", "billing_server")
    return _import_as("bench_core_billing_server", work / "out" / package)


def load_presented(golden: bool) -> tuple[ModuleType, str]:
    """specs/billing.toml as shipped: built now in a temp dir (or golden/), imported under an alias."""
    _handlers_importable()
    package = tomllib.loads(SPEC.read_text(encoding="utf-8"))["server"].get("package", "billing_server")
    where = "golden/billing"
    out = GOLDEN
    if not golden:
        try:
            built = Path(tempfile.mkdtemp(prefix="fusiongen-bench-billing-"))
            _build(SPEC, built)
            out, where = built, "specs/billing.toml built now"
        except Exception as exc:  # fusiongen mid-edit: measure what is committed rather than nothing
            where = f"golden/billing (building specs/billing.toml failed: {type(exc).__name__}: {exc})"
    return _import_as("bench_presented_billing_server", out / package), where


def generated_server(package: ModuleType) -> Server[Any]:
    return package.create_server()  # type: ignore[no-any-return]


# --- MCPServer, written by hand (the core tool) ----------------------------------------------------


class CustomerOut(BaseModel):
    model_config = ConfigDict(extra="ignore", from_attributes=True)

    id: str
    name: str
    email: str


class LineItemOut(BaseModel):
    model_config = ConfigDict(extra="ignore", from_attributes=True)

    sku: str
    description: str
    quantity: int
    unit_price_cents: int  # the cast to integer: pydantic's lax mode accepts "100000"
    card_number: str | None = None


class InvoiceOut(BaseModel):
    model_config = ConfigDict(extra="ignore", from_attributes=True)

    id: str
    customer_id: str
    customer: CustomerOut | None = None
    lines: list[LineItemOut]
    amount_cents: float  # the cast to number: "123400" -> 123400.0
    status: Literal["draft", "review", "approved", "paid", "overdue"]
    due_date: datetime.date
    created_at: datetime.datetime

    @field_serializer("created_at")
    def _rfc3339(self, value: datetime.datetime) -> str:
        """RFC 3339 as the generated server writes it (a naive time is UTC, the offset written `+00:00`)."""
        return (value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)).isoformat()


class _Args:
    """What `billing_handlers.get_invoice` reads: `args.id` (the generated server passes InvoiceGetInput)."""

    __slots__ = ("id",)

    def __init__(self, id: str) -> None:
        self.id = id


def mcpserver_baseline() -> MCPServer:
    _handlers_importable()
    import billing_handlers

    server = MCPServer("billing-mcpserver", version="1.0.0")

    @server.tool(name=WIRE, description="Fetch one invoice by id.")
    async def invoice_get(id: str) -> InvoiceOut:
        return InvoiceOut.model_validate(billing_handlers.get_invoice(_Args(id)))

    return server


# --- bare low-level Server ------------------------------------------------------------------------


def bare_baseline(package: ModuleType, reference: types.CallToolResult) -> Server[Any]:
    """Returns `reference` again, precomputed: only its JSON text is serialized per call; no validation."""
    dumps = package._results.dumps  # the generated server's serializer, so only the work around it differs
    data = reference.structured_content
    assert data is not None
    first = reference.content[0]
    assert isinstance(first, types.TextContent)
    # What the generated server serialized (a presented list: the items), then whatever the first block carries
    # after it (a presented result's truncation notice, rules, suggestions), precomputed.
    text_data, end = json.JSONDecoder().raw_decode(first.text)
    tail = first.text[end:]
    rest = list(reference.content[1:])
    tools = [t for t in package.server.TOOLS if t.name == WIRE]
    listing = types.ListToolsResult(tools=tools)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != WIRE:
            unknown = types.TextContent(type="text", text="unknown tool")
            return types.CallToolResult(content=[unknown], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=dumps(text_data) + tail), *rest], structured_content=data
        )

    return Server("billing-bare", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def lowlevel(server: Server[Any] | MCPServer) -> Server[Any]:
    if isinstance(server, MCPServer):
        return server._lowlevel_server  # type: ignore[no-any-return]  # what mcp.Client itself unwraps
    return server
