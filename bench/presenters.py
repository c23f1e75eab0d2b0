"""Benchmark 3: the generated presenter code against run-time interpreters and a hand-written MCPServer.

A dedicated spec (`SPEC_TEXT`, built into a temp dir now) has an invoice-like model: a nested customer
with an address, 50 line items, casts and hidden fields, and two presenters:

* `InvoiceView` (returned as a collection by `invoice.list`): 5 redaction paths (`customer.email`,
  `customer.ssn`, `customer.address.street`, `lines[*].card_number`, `notes`), rules, a conditional
  rule and suggestion, a collection table and a markdown block;
* `InvoiceCard` (returned by `invoice.get`): a table, a rule, a conditional suggestion and 3 redaction
  paths (`customer.email`, `customer.ssn`, `lines[*].card_number`).

The billing presenter (`Invoice` of specs/billing.toml, built now, or golden/ with `--golden`) is
measured beside it: one redaction path of its own (`lines[*].card_number`) plus the embedded
`Customer` presenter's (`customer.email`), and `limit = 3`.

1. mask: `mask_<presenter>(data)` vs `interpreters.PathMasker` applying the same concrete paths. Both
   get a freshly shaped copy of the 50-line invoice per call, made before the timed loop (an orjson
   round trip of what the generated shaper built); the generated mask masks it in place, as it does
   in the server, the interpreter is copy-on-write (it must not mutate its input). Info rows: the
   interpreter masking in place (compiled code vs a generic walk, same ownership), and both sides
   including the shaping the generated mask relies on (shape + mask vs shape + interpreter).
2. pipeline: `present_<name>_many(raw)` for 50 invoices (5 lines each) vs `PresenterInterpreter`
   executing the presenter's IR at run time (expressions compiled once; masking in place with a
   PathMasker, since the interpreter owns what it shaped). Output checked equal once.
3. tools/call: the generated `invoice.get` (InvoiceCard, 50 lines) vs a hand-written MCPServer tool
   producing the same content blocks and structured content (pydantic models, a small path masker,
   orjson), called through the `tools/call` request handler and through
   `mcp.Client(mode="legacy")`. Checked equal once.

Time is this process's CPU time; variants are interleaved; ratios are medians of paired rounds.
"""

from __future__ import annotations

import datetime
import gc
import importlib.util
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal

import anyio
import mcp_types as types
import orjson
from mcp import Client
from mcp.server import MCPServer, ServerRequestContext
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel

from bench import baselines
from bench.core import Row, Samples, Settings, ainterleave, at_least, interleave
from bench.interpreters import PathMasker, PresenterInterpreter, presenter_paths

TARGET_MASK = 3.0
TARGET_PIPELINE = 2.0
TARGET_TOOLCALL = 6.0
LINES = 50  # line items of the single invoice (mask, tools/call)
COLLECTION = 50  # invoices of the collection (pipeline)
COLLECTION_LINES = 5  # line items of each invoice in the collection
CENSOR = "[REDACTED]"
PACKAGE = "presbench_server"
ALIAS = "bench_presenters_server"
HANDLERS = "bench_presenter_handlers"

SPEC_TEXT = f"""\
[server]
name = "presbench"
version = "1.0.0"
package = "{PACKAGE}"
handlers = "{HANDLERS}"
tool_names = "dotted"  # the hand-written baseline serves invoice.get and suggests billing.remind

[models.Address]
description = "A postal address."
[models.Address.fields]
street = "string"
city = "string"
zip = "string"

[models.Customer]
description = "A customer."
hidden = ["credit_score"]
[models.Customer.fields]
id = "string"
name = {{ type = "string", description = "Full name" }}
email = "string"
ssn = {{ type = "string", required = false }}
address = "Address"
credit_score = {{ type = "integer", required = false }}

[models.Line]
description = "One line of an invoice."
casts = {{ unit_price_cents = "integer" }}
[models.Line.fields]
sku = "string"
description = "text"
quantity = "integer"
unit_price_cents = {{ type = "integer", description = "CENTS" }}
card_number = {{ type = "string", required = false }}

[models.Invoice]
description = "A customer invoice."
casts = {{ amount_cents = "number" }}
hidden = ["internal_notes"]
[models.Invoice.fields]
id = "string"
customer = "Customer"
lines = {{ type = "list", items = "Line" }}
amount_cents = {{ type = "integer", description = "CENTS, divide by 100" }}
status = {{ type = "enum", values = ["draft", "review", "paid", "overdue"] }}
due_date = "date"
created_at = "datetime"
notes = {{ type = "text", required = false }}
internal_notes = {{ type = "string", required = false }}

[presenters.InvoiceView]
model = "Invoice"
rules = ["CRITICAL: amount_cents is in CENTS. Divide by 100."]
collection_rules = ["Sorted by due date, oldest first."]
redact_pii = ["customer.email", "customer.ssn", "customer.address.street", "lines[*].card_number", "notes"]

[[presenters.InvoiceView.rules_when]]
when = "status == 'overdue'"
rule = "Invoice {{id}} is overdue: offer a reminder before anything else."

[[presenters.InvoiceView.suggest]]
tool = "billing.remind"
reason = "Send a payment reminder for {{id}}"
when = "status == 'overdue'"

[[presenters.InvoiceView.collection_ui]]
type = "table"
columns = ["Invoice", "Customer", "Status", "Amount", "Due"]
row = ["{{id}}", "{{customer.name}}", "{{upper(status)}}", "{{amount_cents / 100}}", "{{due_date}}"]

[[presenters.InvoiceView.collection_ui]]
type = "markdown"
text = "**{{count()}} invoices** match."

[presenters.InvoiceCard]
model = "Invoice"
fields = ["id", "customer", "lines", "amount_cents", "status", "due_date"]
rules = ["CRITICAL: amount_cents is in CENTS. Divide by 100."]
redact_pii = ["customer.email", "customer.ssn", "lines[*].card_number"]

[[presenters.InvoiceCard.ui]]
type = "table"
columns = ["Field", "Value"]
rows = [["Invoice", "{{id}}"], ["Customer", "{{customer.name}}"], ["Amount", "{{amount_cents / 100}}"], \
["Status", "{{upper(status)}}"], ["Due", "{{due_date}}"]]

[[presenters.InvoiceCard.suggest]]
tool = "billing.remind"
reason = "Send a payment reminder for {{id}}"
when = "status == 'overdue'"

[tools."invoice.get"]
kind = "query"
description = "Fetch one invoice by id."
returns = "InvoiceCard"
handler = "get_invoice"
[tools."invoice.get".input]
id = {{ type = "string", description = "Invoice id" }}

[tools."invoice.list"]
kind = "query"
description = "List invoices."
returns = "InvoiceView[]"
handler = "list_invoices"

[tools."billing.remind"]
description = "Send a payment reminder."
handler = "send_reminder"
[tools."billing.remind".input]
invoice_id = "string"
"""

TOOL = "invoice.get"
ARGUMENTS: dict[str, Any] = {"id": "inv-1"}
STATUSES = ("overdue", "draft", "review", "paid")


# --- payloads: what a handler returns (hidden fields, extra keys, values that need casts) ---------


def _lines(count: int) -> list[dict[str, Any]]:
    return [
        {
            "sku": f"SKU-{k:03d}",
            "description": f"Punch cards, box {k} of {count}",
            "quantity": k % 7 + 1,
            "unit_price_cents": str(100 * (k + 1)) if k % 2 else 100 * (k + 1),  # cast to integer
            "card_number": "4111111111111111",
            "warehouse_bin": "B-17",  # undeclared: never read
        }
        for k in range(count)
    ]


def invoice_payload(index: int = 1, lines: int = LINES, status: str = "overdue") -> dict[str, Any]:
    """The dedicated spec's Invoice as a handler returns it."""
    return {
        "id": f"inv-{index}",
        "customer": {
            "id": f"c-{index}",
            "name": "Ada Lovelace",
            "email": "ada@example.com",
            "ssn": "078-05-1120",
            "credit_score": 790,  # hidden
            "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"},
        },
        "lines": _lines(lines),
        "amount_cents": str(123400 + 100 * index),  # cast to number
        "status": status,
        "due_date": datetime.date(2026, 10, 1 + index % 28),
        "created_at": datetime.datetime(2026, 9, 1, 9, 30),
        "notes": "Call the accounts office before 5pm.",
        "internal_notes": "Customer disputes the fee; legal says hold.",  # hidden
    }


def billing_payload(index: int = 1, lines: int = LINES, status: str = "overdue") -> dict[str, Any]:
    """specs/billing.toml's Invoice as a handler returns it (with its customer attached)."""
    return {
        "id": f"inv-{index}",
        "customer_id": f"c-{index}",
        "customer": {
            "id": f"c-{index}",
            "name": "Ada Lovelace",
            "email": "ada@example.com",
            "ssn": "078-05-1120",
            "credit_score": 790,
        },
        "lines": _lines(lines),
        "amount_cents": str(123400 + 100 * index),
        "status": status,
        "due_date": datetime.date(2026, 10, 1 + index % 28),
        "created_at": datetime.datetime(2026, 9, 1, 9, 30),
        "internal_notes": "Customer disputes the fee; legal says hold.",
        "cost_basis": 800.5,
    }


def collection(make: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    return [make(i + 1, COLLECTION_LINES, STATUSES[i % len(STATUSES)]) for i in range(COLLECTION)]


# --- building and importing ---------------------------------------------------------------------------


def handler_module() -> ModuleType:
    """The handlers of the dedicated spec: prebuilt payloads (shaping never mutates them)."""
    module = ModuleType(HANDLERS)
    single = invoice_payload()
    many = collection(invoice_payload)

    def get_invoice(args: Any) -> dict[str, Any]:
        return single

    def list_invoices(args: Any) -> list[dict[str, Any]]:
        return many

    def send_reminder(args: Any) -> None:
        return None

    module.get_invoice = get_invoice  # type: ignore[attr-defined]
    module.list_invoices = list_invoices  # type: ignore[attr-defined]
    module.send_reminder = send_reminder  # type: ignore[attr-defined]
    sys.modules[HANDLERS] = module
    return module


def _import_as(alias: str, package_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        alias, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    for name in ("presenters", *baselines.RUNTIME_HELPERS, "_expressions", "server"):
        importlib.import_module(f"{alias}.{name}")
    # As served (--log-level warning): MCPServer's import sets the root logger to INFO, which would time the
    # per-call info line (through rich) instead of the tool.
    logging.getLogger(alias).setLevel(logging.WARNING)
    return module


def build_dedicated() -> tuple[ModuleType, Any]:
    """Build SPEC_TEXT into a temp dir; return the imported package and the spec's IR."""
    from fusiongen.api import generate, publish

    work = Path(tempfile.mkdtemp(prefix="fusiongen-bench-presenters-"))
    spec = work / "presbench.toml"
    spec.write_text(SPEC_TEXT, encoding="utf-8")
    generation = generate(spec, work / "out", syntax_check=False)  # imported right after: that checks it
    publish(generation, work / "out")
    return _import_as(ALIAS, work / "out" / PACKAGE), generation.ir


_BILLING: dict[bool, tuple[ModuleType, str]] = {}


def billing_package(golden: bool) -> tuple[ModuleType, str]:
    """specs/billing.toml built now (or golden/), imported once per run and shared with bench/gating.py.

    `baselines.load_presented` imports under a fixed alias: submodules left in sys.modules by an
    earlier import (the toolcall section's) are dropped first, so the package gets its own."""
    if golden not in _BILLING:
        alias = "bench_presented_billing_server"
        for name in [n for n in sys.modules if n == alias or n.startswith(alias + ".")]:
            del sys.modules[name]
        package, where = baselines.load_presented(golden)
        for name in ("presenters", *baselines.RUNTIME_HELPERS, "_expressions", "_gate", "state_store", "workflows"):
            importlib.import_module(f"{package.__name__}.{name}")
        _BILLING[golden] = package, where
    return _BILLING[golden]


def load_billing(golden: bool) -> tuple[ModuleType, Any, str]:
    from fusiongen.api import validate

    package, where = billing_package(golden)
    _, ir, _ = validate(baselines.SPEC)
    return package, ir, where


def _dump(result: types.CallToolResult) -> Any:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


# --- timing helpers ---------------------------------------------------------------------------------------


def _size(run: Callable[[int], float], batch_seconds: float, floor: int = 20) -> int:
    """Warm up, then the batch size that takes about `batch_seconds` of CPU."""
    run(floor)
    per_call = run(floor * 2)
    return max(floor, int(batch_seconds / max(per_call, 1e-9)))


def _loop(step: Callable[[], object]) -> Callable[[int], float]:
    def run(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            step()
        return (time.process_time() - start) / n

    return run


def _pooled(prepare: Callable[[], Any], step: Callable[[Any], object]) -> Callable[[int], float]:
    """Time `step(x)` on n fresh inputs made by `prepare` before the clock starts."""

    def run(n: int) -> float:
        pool = [prepare() for _ in range(n)]
        gc.collect()  # the pool goes to the oldest generation: young collections in the loop skip it
        start = time.process_time()
        for x in pool:
            step(x)
        elapsed = time.process_time() - start
        del pool
        return elapsed / n

    return run


def _measure(runs: dict[str, Callable[[int], float]], rounds: int, batch_seconds: float) -> Samples:
    sizes = {name: _size(run, batch_seconds) for name, run in runs.items()}
    return interleave({name: (lambda run=run, n=sizes[name]: run(n)) for name, run in runs.items()}, rounds)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}us" if seconds < 1e-3 else f"{seconds * 1e3:.2f}ms"


def _spread_note(samples: Samples, labels: dict[str, str]) -> list[str]:
    noisy = [f"{labels.get(n, n)} {samples.spread(n):.0%}" for n in samples.by_variant if samples.spread(n) > 0.25]
    return ["round-to-round spread (max-min)/median: " + ", ".join(noisy)] if noisy else []


def _ratio_row(
    name: str,
    samples: Samples,
    fast: str,
    slow: str,
    floor: float | None,
    labels: dict[str, str],
    notes: list[str] | None = None,
) -> Row:
    ratio = samples.paired_ratio(slow, fast)  # (s/call slow) / (s/call fast): how many times faster
    target, ok = at_least(ratio, floor) if floor is not None else ("", None)
    measured = f"{labels[fast]} {_us(samples.median(fast))} vs {labels[slow]} {_us(samples.median(slow))}"
    return Row(name, measured, ratio, target, ok, list(notes or []))


# --- 1. mask -------------------------------------------------------------------------------------------


def _mask_rows(
    label: str, package: ModuleType, ir: Any, presenter: str, raw: dict[str, Any], rounds: int, batch_seconds: float
) -> list[Row]:
    presenters = package.presenters
    snake = ir.presenter(presenter).snake
    shape = getattr(presenters, f"shape_{snake}")
    mask = getattr(presenters, f"mask_{snake}")
    entries = presenter_paths(ir, ir.presenter(presenter))
    masker = PathMasker(entries)
    shaped_bytes = orjson.dumps(shape(raw, "result"))

    def fresh() -> Any:
        return orjson.loads(shaped_bytes)

    # Same result once: generated in place vs interpreter copy-on-write (input left untouched).
    expected, original = fresh(), fresh()
    mask(expected)
    masked = masker.apply(original)
    assert masked == expected, f"{label}: the path interpreter masks differently from mask_{snake}"
    assert original == fresh(), f"{label}: the copy-on-write interpreter mutated its input"
    in_place = fresh()
    masker.apply_in_place(in_place)
    assert in_place == expected

    def shape_and_mask() -> None:
        mask(shape(raw, "result"))

    def shape_and_interpret() -> None:
        masker.apply(shape(raw, "result"))

    runs = {
        "generated": _pooled(fresh, mask),
        "interpreter": _pooled(fresh, masker.apply),
        "interpreter_in_place": _pooled(fresh, masker.apply_in_place),
        "shape+generated": _loop(shape_and_mask),
        "shape+interpreter": _loop(shape_and_interpret),
    }
    labels = {
        "generated": f"mask_{snake}",
        "interpreter": "PathMasker.apply",
        "interpreter_in_place": "PathMasker.apply_in_place",
        "shape+generated": f"shape+mask_{snake}",
        "shape+interpreter": "shape+PathMasker.apply",
    }
    samples = _measure(runs, rounds, batch_seconds)
    paths = ", ".join(".".join(p).replace(".[*]", "[*]") for p, _ in entries)
    lines = len(raw["lines"])
    head = _ratio_row(
        f"{label}: mask, {lines} lines [{len(entries)} paths]",
        samples,
        "generated",
        "interpreter",
        TARGET_MASK,
        labels,
        [
            f"paths: {paths}; both sides get a freshly shaped copy per call (made before the clock "
            "starts); generated masks it in place, the interpreter copy-on-write",
            *_spread_note(samples, labels),
        ],
    )
    return [
        head,
        _ratio_row(
            f"  {label}: mask vs interpreter in place [info]",
            samples,
            "generated",
            "interpreter_in_place",
            None,
            labels,
        ),
        _ratio_row(
            f"  {label}: shape+mask vs shape+interpreter [info]",
            samples,
            "shape+generated",
            "shape+interpreter",
            None,
            labels,
        ),
    ]


# --- 2. the whole presenter pipeline ------------------------------------------------------------------


def _pipeline_row(
    label: str,
    package: ModuleType,
    ir: Any,
    presenter: str,
    raw: list[dict[str, Any]],
    rounds: int,
    batch_seconds: float,
) -> list[Row]:
    presenters = package.presenters
    p = ir.presenter(presenter)
    generated = getattr(presenters, f"present_{p.snake}_many")
    interpreter = PresenterInterpreter(ir, presenter, baselines.runtime_helpers(package), package._expressions)
    expected = _dump(generated(raw))
    got = _dump(interpreter.present_many(raw))
    assert got == expected, f"{label}: the IR interpreter's result differs from present_{p.snake}_many"
    labels = {"generated": f"present_{p.snake}_many", "interpreter": "PresenterInterpreter"}
    samples = _measure(
        {"generated": _loop(lambda: generated(raw)), "interpreter": _loop(lambda: interpreter.present_many(raw))},
        rounds,
        batch_seconds,
    )
    shown = expected["structuredContent"]["shown"]
    limit = f", limit {p.limit}: {shown} shown" if p.limit else ""
    return [
        _ratio_row(
            f"{label}: pipeline, {len(raw)} items{limit}",
            samples,
            "generated",
            "interpreter",
            TARGET_PIPELINE,
            labels,
            [
                f"{COLLECTION_LINES} lines per invoice; {len(expected['content'])} content blocks; "
                "both sides share the runtime's leaf checks, Notes, serialization and "
                "CallToolResult building",
                *_spread_note(samples, labels),
            ],
        )
    ]


# --- 3. tools/call: generated vs hand-written MCPServer --------------------------------------------------


class AddressOut(BaseModel):
    street: str
    city: str
    zip: str


class CustomerOut(BaseModel):
    id: str
    name: str
    email: str
    ssn: str | None = None
    address: AddressOut


class LineOut(BaseModel):
    sku: str
    description: str
    quantity: int
    unit_price_cents: int  # lax mode: "100000" -> 100000 (the spec's cast)
    card_number: str | None = None


class InvoiceCardOut(BaseModel):
    id: str
    customer: CustomerOut
    lines: list[LineOut]
    amount_cents: float  # lax mode: "123400" -> 123400.0 (the spec's cast)
    status: Literal["draft", "review", "paid", "overdue"]
    due_date: datetime.date


class SuggestionOut(BaseModel):
    tool: str
    reason: str


class InvoiceCardEnvelope(BaseModel):
    """The generated result's structuredContent: the data, with its rules and suggestions beside it."""

    data: InvoiceCardOut
    rules: list[str]
    suggestions: list[SuggestionOut]


_MASKED = (("customer", "email"), ("customer", "ssn"), ("lines", "*", "card_number"))  # split once


def _mask(node: Any, path: tuple[str, ...]) -> None:
    """The small path masker one writes by hand: `*` walks a list; None/absent values stay."""
    key, rest = path[0], path[1:]
    if key == "*":
        for item in node:
            _mask(item, rest)
    elif not rest:
        if node.get(key) is not None:
            node[key] = CENSOR
    elif (child := node.get(key)) is not None:
        _mask(child, rest)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


class _Args:
    __slots__ = ("id",)

    def __init__(self, id: str) -> None:
        self.id = id


def _card_result(data: dict[str, Any]) -> types.CallToolResult:
    """The blocks of the InvoiceCard presenter, built by hand from the validated, dumped data."""
    cells = [
        ("Invoice", data["id"]),
        ("Customer", data["customer"]["name"]),
        ("Amount", _number(data["amount_cents"] / 100)),
        ("Status", data["status"].upper()),
        ("Due", data["due_date"]),
    ]
    table = "| Field | Value |\n| --- | --- |\n" + "\n".join(
        f"| {k} | {v.replace('|', chr(92) + '|').replace(chr(10), ' ')} |" for k, v in cells
    )
    overdue = data["status"] == "overdue"
    suggestions = [("billing.remind", f"Send a payment reminder for {data['id']}")] if overdue else []
    rules = ["amount_cents: CENTS, divide by 100", "CRITICAL: amount_cents is in CENTS. Divide by 100."]
    for path in _MASKED:
        _mask(data, path)
    # orjson, what a careful user writes (json.dumps with indent runs CPython's pure-Python encoder): the
    # comparison measures frameworks, not JSON encoders (the generated runtime serializes the same way). The
    # guidance goes into the first block, after the data (docs/spec.md §9.1).
    first = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    first += "\n\n<domain_rules>\n" + "".join(f"- {rule}\n" for rule in rules) + "</domain_rules>"
    if suggestions:
        lines = "".join(f"- {_escape(tool)}: {_escape(reason)}\n" for tool, reason in suggestions)
        first += f"\n\n<action_suggestions>\n{lines}</action_suggestions>"
    content = [
        types.TextContent(type="text", text=first),
        types.TextContent(type="text", text=f'<ui_passthrough type="table">{_escape(table)}</ui_passthrough>'),
    ]
    envelope = {"data": data, "rules": rules, "suggestions": [{"tool": t, "reason": r} for t, r in suggestions]}
    return types.CallToolResult(content=content, structured_content=envelope)


def mcpserver_card(handlers: ModuleType, output_schema: bool) -> MCPServer:
    """`invoice.get` written by hand: validate with pydantic, dump, build the blocks, mask, orjson.

    With `output_schema`, the return annotation `Annotated[CallToolResult, InvoiceCardEnvelope]` publishes an
    outputSchema like the generated tool's (and MCPServer validates the structured content against the
    model on every call); without it, `-> CallToolResult`: no schema, no validation."""
    server = MCPServer("presbench-mcpserver", version="1.0.0")
    get_invoice = handlers.get_invoice

    if output_schema:

        @server.tool(name=TOOL, description="Fetch one invoice by id.")
        async def invoice_get(id: str) -> Annotated[types.CallToolResult, InvoiceCardEnvelope]:
            data = InvoiceCardOut.model_validate(get_invoice(_Args(id))).model_dump(mode="json", exclude_none=True)
            return _card_result(data)
    else:

        @server.tool(name=TOOL, description="Fetch one invoice by id.")
        async def invoice_get_plain(id: str) -> types.CallToolResult:
            data = InvoiceCardOut.model_validate(get_invoice(_Args(id))).model_dump(mode="json", exclude_none=True)
            return _card_result(data)

    return server


Batch = Callable[[int], Awaitable[float]]


def _context(raw: dict[str, Any]) -> ServerRequestContext[Any]:
    return ServerRequestContext(
        session=None,
        lifespan_context={},
        protocol_version=LATEST_HANDSHAKE_VERSION,  # type: ignore[arg-type]
        method="tools/call",
        params=raw,
        request_id=1,
    )


async def _ameasure(batches: dict[str, Batch], rounds: int, batch_seconds: float) -> Samples:
    sizes: dict[str, int] = {}
    for name, batch in batches.items():
        await batch(10)
        sizes[name] = max(10, int(batch_seconds / max(await batch(20), 1e-9)))
    return await ainterleave({name: (lambda b=batch, n=sizes[name]: b(n)) for name, batch in batches.items()}, rounds)


async def _toolcall_rows(package: ModuleType, handlers: ModuleType, rounds: int, batch_seconds: float) -> list[Row]:
    servers: dict[str, Any] = {
        "generated": package.create_server(handlers=handlers),
        "mcpserver": mcpserver_card(handlers, output_schema=True),
        "mcpserver_noschema": mcpserver_card(handlers, output_schema=False),
    }
    labels = {"generated": "generated", "mcpserver": "MCPServer", "mcpserver_noschema": "MCPServer(no schema)"}
    raw = {"name": TOOL, "arguments": ARGUMENTS}
    ctx = _context(raw)
    entries = {name: baselines.lowlevel(server).get_request_handler("tools/call") for name, server in servers.items()}
    params = {name: entry.params_type.model_validate(raw, by_name=False) for name, entry in entries.items()}
    results = {name: await entries[name].handler(ctx, params[name]) for name in servers}
    reference = _dump(results["generated"])
    assert not results["generated"].is_error, results["generated"].content
    for name, result in results.items():
        assert _dump(result) == reference, (
            f"{name}: different content blocks or structured content:\n{_dump(result)}\nvs\n{reference}"
        )

    def handler_batch(name: str) -> Batch:
        handler, ps = entries[name].handler, params[name]

        async def batch(n: int) -> float:
            start = time.process_time()
            for _ in range(n):
                await handler(ctx, ps)
            return (time.process_time() - start) / n

        return batch

    blocks = len(results["generated"].content)
    rows: list[Row] = []
    samples = await _ameasure({name: handler_batch(name) for name in servers}, rounds, batch_seconds)
    rows.append(
        _ratio_row(
            f"invoice.get ({LINES} lines) [handler]",
            samples,
            "generated",
            "mcpserver",
            TARGET_TOOLCALL,
            labels,
            [
                f"InvoiceCard: table, rule, conditional suggestion, 3 redaction paths; {blocks} "
                "content blocks, identical on both sides; MCPServer publishes an outputSchema "
                "(Annotated[CallToolResult, InvoiceCardOut]) and so re-validates its structured "
                "content per call",
                *_spread_note(samples, labels),
            ],
        )
    )
    rows.append(
        _ratio_row(
            "  vs MCPServer without outputSchema [handler, info]",
            samples,
            "generated",
            "mcpserver_noschema",
            None,
            labels,
        )
    )
    rows.append(_steps(package, handlers, rounds))

    async with AsyncExitStack() as stack:
        client_batches: dict[str, Batch] = {}
        for name, server in servers.items():
            client = await stack.enter_async_context(Client(server, mode="legacy", cache=None))
            await client.list_tools()
            result = await client.call_tool(TOOL, ARGUMENTS)
            assert _dump(result) == reference, f"{name} via Client: different result"

            def client_batch(client: Client = client) -> Batch:
                async def batch(n: int) -> float:
                    start = time.process_time()
                    for _ in range(n):
                        await client.call_tool(TOOL, ARGUMENTS)
                    return (time.process_time() - start) / n

                return batch

            client_batches[name] = client_batch()
        samples = await _ameasure(client_batches, rounds, batch_seconds)
    rows.append(
        _ratio_row(
            f"invoice.get ({LINES} lines) [client]",
            samples,
            "generated",
            "mcpserver",
            TARGET_TOOLCALL,
            labels,
            [
                "mcp.Client(mode='legacy'): JSON-RPC over memory streams, middleware, and the "
                "client's jsonschema check of structured content (both tools have an outputSchema)",
                *_spread_note(samples, labels),
            ],
        )
    )
    rows.append(
        _ratio_row(
            "  vs MCPServer without outputSchema [client, info]",
            samples,
            "generated",
            "mcpserver_noschema",
            None,
            labels,
            ["no outputSchema: the client skips the jsonschema check it does for the generated tool"],
        )
    )
    listed = {
        name: (await baselines.lowlevel(server).get_request_handler("tools/list").handler(ctx, None)).tools
        for name, server in servers.items()
        if name != "mcpserver_noschema"
    }
    rows.append(_schema_validation(listed, results["generated"].structured_content, rounds))
    return rows


def _schema_validation(listed: dict[str, list[types.Tool]], data: Any, rounds: int) -> Row:
    """What the client's outputSchema check alone costs per call, for each tool's schema (as mcp.Client
    compiles it: one validator per schema, `best_match(iter_errors(...))` per result)."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for
    from referencing import Registry

    checks: dict[str, Callable[[], float]] = {}
    for name, tools in listed.items():
        schema = next(t.output_schema for t in tools if t.name == TOOL)
        assert schema is not None, f"{name}: no outputSchema"
        validator = validator_for(schema)(schema, registry=Registry())
        error = best_match(validator.iter_errors(data))
        assert error is None, f"{name}: the result does not fit its own outputSchema: {error}"

        def check(validator: Any = validator) -> float:
            start = time.process_time()
            for _ in range(20):
                best_match(validator.iter_errors(data))
            return (time.process_time() - start) / 20

        checks[name] = check
    samples = interleave(checks, rounds)
    labels = {"generated": "generated schema", "mcpserver": "MCPServer (pydantic) schema"}
    return Row(
        "  client outputSchema validation per call [info]",
        "  ".join(f"{labels[n]} {_us(samples.median(n))}" for n in checks),
        notes=["jsonschema on the same 50-line result: most of the [client] time of both sides"],
    )


def _steps(package: ModuleType, handlers: ModuleType, rounds: int) -> Row:
    """Where one generated invoice.get goes (per call, informational), next to the hand-written steps."""
    presenters, inputs = package.presenters, package.inputs
    rt = baselines.runtime_helpers(package)
    raw = handlers.get_invoice(None)
    data = presenters.shape_invoice_card(raw, "result")
    notes = rt.Notes()
    presenters.item_notes_invoice_card(data, notes)
    presenters.ui_invoice_card(data, notes)
    masked_bytes = orjson.dumps(data)
    masked = orjson.loads(masked_bytes)
    presenters.mask_invoice_card(masked)
    dumped = InvoiceCardOut.model_validate(raw).model_dump(mode="json", exclude_none=True)
    n = 200 if rounds < 5 else 500

    def timed(step: Callable[[], object]) -> Callable[[], float]:
        run = _loop(step)
        return lambda: run(n)

    mask_run = _pooled(lambda: orjson.loads(masked_bytes), presenters.mask_invoice_card)

    def notes_and_ui() -> None:
        fresh = rt.Notes()
        presenters.item_notes_invoice_card(data, fresh)
        presenters.ui_invoice_card(data, fresh)

    steps = {
        "parse args": timed(lambda: inputs.parse_invoice_get(ARGUMENTS)),
        "shape": timed(lambda: presenters.shape_invoice_card(raw, "result")),
        "notes+ui": timed(notes_and_ui),
        "mask": lambda: mask_run(n),
        "presented_result": timed(lambda: rt.presented_result(masked, notes)),
        "| MCPServer: validate+dump": timed(
            lambda: InvoiceCardOut.model_validate(raw).model_dump(mode="json", exclude_none=True)
        ),
        "orjson dumps": timed(lambda: orjson.dumps(dumped, option=orjson.OPT_INDENT_2).decode()),
    }
    samples = interleave(steps, rounds)
    return Row(
        "  invoice.get per-call steps [info]",
        "  ".join(f"{name} {_us(samples.median(name))}" for name in steps),
        notes=[
            "generated steps: parse args, shape (read+check+cast 50 lines), notes+ui (rules, "
            "suggestion, table), mask, presented_result (orjson dumps + TextContent/CallToolResult "
            "models); after the '|': the hand-written tool's main costs (orjson with indent 2, "
            "as the generated runtime serializes; json.dumps(indent=2) would run CPython's pure-Python encoder)"
        ],
    )


# --- the section ---------------------------------------------------------------------------------------


def bench_presenters(settings: Settings) -> list[Row]:
    rounds = 3 if settings.quick else 15
    batch_seconds = 0.01 if settings.quick else 0.04
    dedicated, dedicated_ir = build_dedicated()
    billing, billing_ir, where = load_billing(settings.golden)
    rows: list[Row] = []
    rows += _mask_rows("InvoiceView", dedicated, dedicated_ir, "InvoiceView", invoice_payload(), rounds, batch_seconds)
    rows += _mask_rows("billing Invoice", billing, billing_ir, "Invoice", billing_payload(), rounds, batch_seconds)
    rows[-3].notes.append(f"billing = {where}")
    rows += _pipeline_row(
        "InvoiceView", dedicated, dedicated_ir, "InvoiceView", collection(invoice_payload), rounds, batch_seconds
    )
    rows += _pipeline_row(
        "billing Invoice", billing, billing_ir, "Invoice", collection(billing_payload), rounds, batch_seconds
    )
    handlers = handler_module()
    rows += anyio.run(_toolcall_rows, dedicated, handlers, rounds, batch_seconds)
    return rows
