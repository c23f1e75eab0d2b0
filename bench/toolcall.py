"""Benchmark 1: in-process `tools/call` throughput of the generated `invoice.get` against baselines.

Five servers (see `bench/baselines.py`): the generated core tool (validation, casts, hidden fields,
serialization), a hand-written MCPServer tool and a bare low-level Server returning the same data; and
the tool as shipped in specs/billing.toml (with its presenter) next to a bare Server returning the same
content. All are driven the same way, interleaved, in three modes:

* handler:  `await entry.handler(ctx, params)` with `entry = server.get_request_handler("tools/call")`,
            params validated once; the tool work alone, SDK dispatch excluded.
* dispatch: what `ServerRunner` does around the handler, minus middleware and JSON-RPC framing: validate
            the raw params (`entry.params_type.model_validate(raw, by_name=False)`), call the handler,
            dump the result to its wire dict (`model_dump(by_alias=True, mode="json", exclude_none=True)`).
* client:   `mcp.Client(server, mode="legacy", cache=None).call_tool(...)`: the real JSON-RPC loop over
            memory streams, server middleware, and the client's own output-schema validation.

Every variant must return the same visible data as the generated server it is compared with
(checked once, outside the timed loops). Time is this process's CPU time (`time.process_time`):
everything here runs in one thread, and CPU time does not count the waits a shared machine adds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.server import ServerRequestContext
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from bench import baselines
from bench.core import Row, Samples, Settings, ainterleave, at_least, interleave, rate

VARIANTS = ("generated", "mcpserver", "bare", "presented", "bare_presented")
LABEL = {
    "generated": "generated",
    "mcpserver": "MCPServer",
    "bare": "bare",
    "presented": "presented",
    "bare_presented": "bare(presented)",
}
TARGET_VS_MCPSERVER = 1.3
TARGET_VS_BARE = 0.85

Batch = Callable[[int], Awaitable[float]]  # run n calls, return CPU seconds per call


def _context(raw: dict[str, Any]) -> ServerRequestContext[Any]:
    # No session: none of the five tools touches ctx.session (a ServerSession needs a live connection).
    return ServerRequestContext(
        session=None,
        lifespan_context={},
        protocol_version=LATEST_HANDSHAKE_VERSION,  # type: ignore[arg-type]
        method="tools/call",
        params=raw,
        request_id=1,
    )


def _visible(result: types.CallToolResult, who: str) -> Any:
    """The data an agent sees, checked to be the same in the text and the structured content."""
    assert not result.is_error, f"{who}: error result {result.content}"
    assert result.structured_content is not None, f"{who}: no structured content"
    text = result.content[0]
    assert isinstance(text, types.TextContent), f"{who}: first content block is not text"
    data = _data_of(result.structured_content)
    assert json.JSONDecoder().raw_decode(text.text)[0] == data, f"{who}: text and structured content differ"
    return data


def _data_of(structured: dict[str, Any]) -> Any:
    """A presenter result's envelope holds the data under `data`; MCPServer's result is the data itself."""
    return structured["data"] if "rules" in structured else structured


def _everything(result: types.CallToolResult) -> Any:
    """Every content block and the structured content, as the wire shows them."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _handler_batch(entry: Any, ctx: ServerRequestContext[Any], params: Any) -> Batch:
    handler = entry.handler

    async def batch(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            await handler(ctx, params)
        return (time.process_time() - start) / n

    return batch


def _dispatch_batch(entry: Any, ctx: ServerRequestContext[Any], raw: dict[str, Any]) -> Batch:
    handler, validate = entry.handler, entry.params_type.model_validate

    async def batch(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            result = await handler(ctx, validate(raw, by_name=False))
            result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return (time.process_time() - start) / n

    return batch


def _client_batch(client: Client) -> Batch:
    async def batch(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            await client.call_tool(baselines.WIRE, baselines.ARGUMENTS)
        return (time.process_time() - start) / n

    return batch


async def _measure(batches: dict[str, Batch], rounds: int, batch_seconds: float) -> Samples:
    """Size each variant's batch to about `batch_seconds` (from a warm-up), then interleave the rounds."""
    sizes: dict[str, int] = {}
    for name, batch in batches.items():
        await batch(20)  # warm-up: first-call caches (pydantic, jsonschema validators, ...)
        per_call = await batch(50)
        sizes[name] = max(20, int(batch_seconds / per_call))

    def variant(name: str) -> Callable[[], Awaitable[float]]:
        return lambda: batches[name](sizes[name])

    return await ainterleave({name: variant(name) for name in batches}, rounds)


def _rows(mode: str, samples: Samples, what: str) -> list[Row]:
    names = [n for n in VARIANTS if n in samples.by_variant]
    rates = {name: 1 / samples.median(name) for name in names}
    measured = "  ".join(f"{LABEL[n]} {rate(rates[n])}" for n in names)
    head = Row(f"invoice.get [{mode}] calls/s", measured, notes=[what] if what else [])
    noisy = [f"{LABEL[n]} {samples.spread(n):.0%}" for n in names if samples.spread(n) > 0.25]
    if noisy:
        head.notes.append("round-to-round spread (max-min)/median: " + ", ".join(noisy))
    rows = [head]

    def ratio_row(name: str, other: str, floor: float | None) -> None:
        if name not in rates or other not in rates:
            return
        ratio = samples.paired_ratio(other, name)  # (s/call of other) / (s/call of name) = calls/s ratio
        target, ok = at_least(ratio, floor) if floor is not None else ("", None)
        rows.append(
            Row(
                f"  {LABEL[name]}/{LABEL[other]} [{mode}]",
                f"{rate(rates[name])} vs {rate(rates[other])}",
                ratio,
                target,
                ok,
            )
        )

    ratio_row("generated", "mcpserver", TARGET_VS_MCPSERVER)
    ratio_row("generated", "bare", TARGET_VS_BARE)
    ratio_row("bare", "mcpserver", None)  # the ceiling of generated/MCPServer: a server doing no work
    ratio_row("presented", "bare_presented", None)
    ratio_row("presented", "generated", None)
    return rows


def _breakdown(core: Any, presented: Any | None, rounds: int) -> Row:
    """Where the generated tool's time goes, step by step (informational, per call)."""
    import billing_handlers

    runtime, inputs, shapes = core._results, core.inputs, core.shapes
    args = inputs.parse_invoice_get(baselines.ARGUMENTS)
    raw = billing_handlers.get_invoice(args)
    data = shapes.shape_invoice(raw, "result")
    text = runtime.dumps(data)
    n = 500 if rounds < 5 else 2000

    def timed(step: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.process_time()
            for _ in range(n):
                step()
            return (time.process_time() - start) / n

        return run

    steps = {
        "parse args": timed(lambda: inputs.parse_invoice_get(baselines.ARGUMENTS)),
        "handler": timed(lambda: billing_handlers.get_invoice(args)),
        "shape": timed(lambda: shapes.shape_invoice(raw, "result")),
        "dumps": timed(lambda: runtime.dumps(data)),
        "CallToolResult": timed(
            lambda: types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)
        ),
    }
    if presented is not None and hasattr(presented, "presenters"):
        steps["presented: present_invoice"] = timed(lambda: presented.presenters.present_invoice(raw, frozenset()))
    samples = interleave(steps, rounds)
    measured = "  ".join(f"{name} {samples.median(name) * 1e6:.1f}us" for name in steps)
    return Row("  generated per-call steps [info]", measured)


async def _run(settings: Settings) -> list[Row]:
    core = baselines.load_core()
    presented, where = baselines.load_presented(settings.golden)
    raw = {"name": baselines.WIRE, "arguments": baselines.ARGUMENTS}
    ctx = _context(raw)

    async def call(server: Any) -> types.CallToolResult:
        entry = baselines.lowlevel(server).get_request_handler("tools/call")
        assert entry is not None
        result = await entry.handler(ctx, entry.params_type.model_validate(raw, by_name=False))
        assert isinstance(result, types.CallToolResult)
        return result

    generated = baselines.generated_server(core)
    core_result = await call(generated)
    shipped = baselines.generated_server(presented)
    shipped_result = await call(shipped)
    servers: dict[str, Any] = {
        "generated": generated,
        "mcpserver": baselines.mcpserver_baseline(),
        "bare": baselines.bare_baseline(core, core_result),
        "presented": shipped,
        "bare_presented": baselines.bare_baseline(presented, shipped_result),
    }
    compared_with = {
        "generated": "generated",
        "mcpserver": "generated",
        "bare": "generated",
        "presented": "presented",
        "bare_presented": "presented",
    }
    references = {"generated": core_result, "presented": shipped_result}

    def same(name: str, result: types.CallToolResult, how: str) -> None:
        """Same visible data as the generated server this variant is compared with."""
        reference = references[compared_with[name]]
        assert _visible(result, f"{name} {how}") == _visible(reference, "reference"), (
            f"{name} {how}: different visible data:\n{result.structured_content}\nvs\n{reference.structured_content}"
        )
        if name in ("bare", "bare_presented", "presented"):  # same blocks too (MCPServer has no presenter)
            assert _everything(result) == _everything(reference), f"{name} {how}: different content blocks"

    # Many short rounds: on a loaded machine the median of many paired ratios is what stays put.
    rounds = 3 if settings.quick else 15
    batch_seconds = 0.02 if settings.quick else 0.05
    rows: list[Row] = []

    handler_batches: dict[str, Batch] = {}
    dispatch_batches: dict[str, Batch] = {}
    for name, server in servers.items():
        entry = baselines.lowlevel(server).get_request_handler("tools/call")
        assert entry is not None, name
        same(name, await call(server), "called directly")
        params = entry.params_type.model_validate(raw, by_name=False)
        handler_batches[name] = _handler_batch(entry, ctx, params)
        dispatch_batches[name] = _dispatch_batch(entry, ctx, raw)

    blocks = len(shipped_result.content)
    rows += _rows(
        "handler",
        await _measure(handler_batches, rounds, batch_seconds),
        "one inv-1 lookup per call (2 lines, a customer, hidden fields, casts); generated = "
        f"core spec (server, models, invoice.get); presented = {where}, {blocks} content blocks",
    )
    try:
        rows.append(_breakdown(core, presented, rounds))
    except Exception as exc:  # names inside the generated code changed: skip the breakdown, keep the rest
        rows.append(Row("  generated per-call steps [info]", f"skipped: {type(exc).__name__}: {exc}"))
    rows += _rows("dispatch", await _measure(dispatch_batches, rounds, batch_seconds), "")

    async with AsyncExitStack() as stack:
        client_batches: dict[str, Batch] = {}
        listed: dict[str, list[types.Tool]] = {}
        for name, server in servers.items():
            client = await stack.enter_async_context(Client(server, mode="legacy", cache=None))
            listed[name] = (await client.list_tools()).tools
            same(name, await client.call_tool(baselines.WIRE, baselines.ARGUMENTS), "via Client")
            client_batches[name] = _client_batch(client)
        rows += _rows(
            "client",
            await _measure(client_batches, rounds, batch_seconds),
            "includes the client's jsonschema validation of structured content against each tool's outputSchema",
        )
        rows.append(_schema_validation(listed, references, rounds))
    return rows


def _schema_validation(
    listed: dict[str, list[types.Tool]], references: dict[str, types.CallToolResult], rounds: int
) -> Row:
    """What the client's output-schema validation alone costs per call (as mcp.Client compiles it)."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for
    from referencing import Registry

    checks: dict[str, Callable[[], float]] = {}
    pairs = (("generated", "generated"), ("mcpserver", "generated"), ("presented", "presented"))
    for name, reference in pairs:
        schema = next(t.output_schema for t in listed[name] if t.name == baselines.WIRE)
        assert schema is not None, f"{name}: {baselines.WIRE} has no outputSchema"
        data = references[reference].structured_content
        assert data is not None
        if name == "mcpserver":  # MCPServer's schema describes the data alone, without the envelope
            data = _data_of(data)
        validator = validator_for(schema)(schema, registry=Registry())
        error = best_match(validator.iter_errors(data))
        assert error is None, f"{name}: reference data does not fit its schema: {error}"

        def check(validator: Any = validator, data: Any = data) -> float:
            start = time.process_time()
            for _ in range(200):
                best_match(validator.iter_errors(data))
            return (time.process_time() - start) / 200

        checks[name] = check
    samples = interleave(checks, rounds)
    return Row(
        "  client outputSchema validation per call [info]",
        "  ".join(f"{LABEL[n]} {samples.median(n) * 1e6:.0f}us" for n in checks),
    )


def bench_toolcall(settings: Settings) -> list[Row]:
    return anyio.run(_run, settings)
