"""Where the `mcp` SDK is the wall: the two rows of the MCP Fusion side by side that our code cannot move.

    .venv/bin/python bench/run.py --only sdk_walls

Issue 14 asks, where the SDK itself is the wall, to measure it and say so. Both measurements use the harness's
invoice server (`bench/mcpfusion_http.build_generated`), so they read beside the `mcpfusion` rows:

* **Start-up.** Fresh interpreters, each timing its own imports in order: `mcp_types` (every protocol version's
  models), the rest of `mcp.server`, then the generated server's modules and `create_server()`, with the cyclic
  collector paused as the generated package pauses it for its imports under `python -m`. The first two are the
  SDK's part of our start-up; the third is ours.
* **HTTP with SSE responses.** The same generated server, driven by the HTTP bench's client, three ways:
  `--http-response json`, `--http-response sse`, and `sse` with the SDK's SSE response object
  (sse-starlette's `EventSourceResponse`, four tasks a response) swapped for a minimal writer by
  `sdk_walls_lean_sse.py` — an experiment that lives only in this benchmark, never in a generated server. The
  gap between the first two is the SDK's SSE path; the third shows how much of it is sse-starlette and how much
  the transport's own per-request streams and tasks.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench import mcpfusion_http as http
from bench.core import Row, Settings, rotations
from bench.mcpfusion import harness_env, missing

LEAN_SSE = Path(__file__).resolve().parent / "sdk_walls_lean_sse.py"

# One fresh process per round times its own imports in order, so each split is paired within the process; the
# collector is paused for them, as the generated package pauses it when started with `python -m`.
SPLIT = (
    "import gc, time; gc.disable(); t0 = time.perf_counter(); import mcp_types; t1 = time.perf_counter(); "
    "import mcp.server; t2 = time.perf_counter(); from perfbill_server.server import create_server; create_server(); "
    "t3 = time.perf_counter(); print(t1 - t0, t2 - t1, t3 - t2)"
)


def split_ms(cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(mcp_types, the rest of `import mcp.server`, the generated server's import and create_server), in ms."""
    done = subprocess.run([sys.executable, "-c", SPLIT], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    types_s, server_s, ours_s = (float(x) for x in done.stdout.split())
    return types_s * 1e3, server_s * 1e3, ours_s * 1e3


def startup_rows(out: Path, env: dict[str, str], rounds: int) -> list[Row]:
    split_ms(out, env)  # byte-compiled and in the page cache before timing
    splits = [split_ms(out, env) for _ in range(rounds)]
    types_ms, rest_ms, ours = (statistics.median(s[k] for s in splits) for k in range(3))
    sdk = statistics.median(s[0] + s[1] for s in splits)
    share = statistics.median((s[0] + s[1]) / sum(s) for s in splits)
    row = Row(
        "SDK wall, start-up: `import mcp.server` / it plus the generated server's import and create_server()",
        f"SDK {sdk:.0f} ms (mcp_types {types_ms:.0f} + the rest {rest_ms:.0f}); ours {ours:.0f} ms",
        share,
    )
    row.notes.append(
        f"{rounds} fresh processes, each timing its own imports in order (medians); compare the SDK's part with "
        "MCP Fusion's whole start-up to the initialize response in the mcpfusion rows"
    )
    return [row]


async def sse_round(argv: list[str], out: Path, env: dict[str, str], calls: int, warmup: int) -> float:
    """Server CPU µs per call of one server process under the HTTP bench's load."""
    port = http.free_port()
    command = [*argv, "--http", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, cwd=out, env=env, stderr=subprocess.DEVNULL)
    try:
        await http.wait_listening(port, process)
        first = await http.open_session(port)
        http.check_first_result("gen", await first.post(http.call_body(1)))
        await http.load(first, http.CONCURRENCY, warmup, 2)
        before = http.cpu_seconds(process.pid)
        _, errors = await http.load(first, http.CONCURRENCY, calls, 2 + warmup)
        cpu_us = (http.cpu_seconds(process.pid) - before) / calls * 1e6
        await first.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if errors:
        raise RuntimeError(f"{argv}: {errors} failed calls")
    return cpu_us


def sse_rows(out: Path, env: dict[str, str], rounds: int, calls: int, warmup: int) -> list[Row]:
    python = sys.executable
    variants = {
        "json": [python, "-m", "perfbill_server", "--http-response", "json"],
        "sse": [python, "-m", "perfbill_server", "--http-response", "sse"],
        "sse, minimal writer": [python, str(LEAN_SSE), "--http-response", "sse"],
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for order in rotations(list(variants), rounds):
        for name in order:
            samples[name].append(asyncio.run(sse_round(variants[name], out, env, calls, warmup)))
    us = {name: statistics.median(values) for name, values in samples.items()}
    ratio = statistics.median(s / j for s, j in zip(samples["sse"], samples["json"], strict=True))
    lean = statistics.median(s / j for s, j in zip(samples["sse, minimal writer"], samples["json"], strict=True))
    row = Row(
        "SDK wall, HTTP: server CPU per call with SSE responses / with JSON responses (same server)",
        f"SSE {us['sse']:,.0f} us  JSON {us['json']:,.0f} us",
        ratio,
    )
    row.notes.append(
        f"{rounds} interleaved rounds of {calls} tools/call on {http.CONCURRENCY} connections, medians; the "
        "generated server for the harness's invoice tool, nothing else differing but --http-response"
    )
    experiment = Row(
        "  SSE with sse-starlette's response replaced by a minimal writer (bench-only experiment) / JSON",
        f"{us['sse, minimal writer']:,.0f} us",
        lean,
    )
    experiment.notes.append(
        "bench/sdk_walls_lean_sse.py swaps mcp.server.streamable_http.EventSourceResponse in the benchmark's "
        "process only (no pings, no disconnect watch: an upper bound of what replacing it could save); the rest "
        "of the gap is the SDK transport's per-request memory streams and tasks"
    )
    return [row, experiment]


def bench_sdk_walls(settings: Settings) -> list[Row]:
    reason = missing()
    if reason is not None:
        print(f"[sdk_walls] skipped: {reason}", file=sys.stderr, flush=True)
        return [Row("SDK walls (start-up, HTTP SSE)", f"skipped: {reason}")]
    start_rounds, rounds, calls, warmup = (3, 1, 300, 100) if settings.quick else (9, 3, 3000, 1000)
    with tempfile.TemporaryDirectory(prefix="fusiongen-bench-walls-") as work:
        out = http.build_generated(Path(work))
        env = {**harness_env(), "PYTHONPATH": os.pathsep.join([str(out), work])}
        rows = startup_rows(out, env, start_rounds)
        rows += sse_rows(out, env, rounds, calls, warmup)
    return rows
