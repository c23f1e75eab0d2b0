"""Streamable HTTP side by side with MCP Fusion 5.0.7: the harness's invoice tool, both servers, one load client.

    .venv/bin/python bench/mcpfusion_http.py [--rounds 5] [--calls 4000] [--concurrency 4] [--mode json|sse]

The servers: the generated one (`python -m perfbill_server --http`, built from the harness's `invoice_perf.toml`
by this checkout, byte-compiled as `pip install` would) and MCP Fusion's invoice tool (`http_server.ts` beside
this file, built with the harness's node_modules and esbuild). Both stateful (handshake era: `initialize` opens a
session named by `Mcp-Session-Id`), both in the same response mode:

* `json` (default): each POST answered with one `application/json` body. The fastest mode each side offers: no
  SSE framing, no stream task per request. MCP Fusion's `startServer({transport: 'http'})` cannot be asked for
  it, so that side is the same registry on the TS SDK's `NodeStreamableHTTPServerTransport` with
  `enableJsonResponse` (what `startServer` builds, plus that flag); ours is `--http-response json`.
* `sse`: each POST answered with an SSE stream: MCP Fusion's own `startServer` HTTP server, and ours with
  `--http-response sse`. That is also what ours serves by default for the harness's handlers: `auto` picks
  JSON only when no handler takes `ctx`, and `invoice_handlers.py` declares `async def invoice_get(args,
  ctx=None)`, which gets it (docs/spec.md §6.5). Each row's note says how the default resolved, asked of the
  built server rather than assumed.

The client (the same code for both): raw HTTP/1.1 over asyncio on 127.0.0.1, keep-alive, no HTTP library in the
timed loop. One `initialize` + `notifications/initialized`, one checked `tools/call` (PII must be redacted), a
warm-up, then N `tools/call` from `--concurrency` connections at once (4: two per core of this machine), each
connection sending its next request when the previous one is answered. Per round and server: requests/s,
p50/p99 latency, server CPU per call (utime+stime of the server's process tree over the timed calls, from /proc).
Rounds alternate the order of the servers; every round starts both servers afresh.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.core import Row, Settings, at_least
from bench.mcpfusion import HARNESS, harness_env, missing

HERE = Path(__file__).resolve().parent / "mcpfusion_http"
NM = Path(os.environ.get("FUSION_NM", "/tmp/fusion-nm"))
PROTOCOL = "2025-11-25"
LEAKS = (b"123-45-6789", b"ada@example.org", b"4111-1111-1111-7", b"secret", b'"internal"')
START_TIMEOUT = 30.0
PRESENTATION = ("amount_cents is in CENTS", "remind", "| Invoice | I1 |")  # the rule, the suggestion, the table


# --- building both servers --------------------------------------------------------------------------------


def build_fusion(env: dict[str, str]) -> Path:
    """The harness's `run.sh --prepare` (npm ci into $FUSION_NM, invoice.ts compiled), then http_server.ts
    beside it, bundled by the harness's esbuild with every package left external."""
    subprocess.run(["bash", str(HARNESS / "run.sh"), "--prepare"], check=True, env=env, stdout=subprocess.DEVNULL)
    source = NM / "fusiongen_http_server.ts"
    shutil.copy(HERE / "http_server.ts", source)
    out = NM / "dist-fusiongen" / "http_server.js"
    esbuild = [str(NM / "node_modules/.bin/esbuild"), str(source), "--bundle", "--packages=external"]
    esbuild += ["--format=esm", "--platform=node", f"--outfile={out}", "--log-level=warning"]
    subprocess.run(esbuild, check=True, cwd=NM, env=env)
    return out


def build_generated(work: Path) -> Path:
    """The harness's spec built by this checkout, published, and byte-compiled (what `pip install` does; with
    PYTHONDONTWRITEBYTECODE set, as in some shells, every start would compile the sources again)."""
    from fusiongen.api import generate, publish

    for name in ("invoice_perf.toml", "invoice_handlers.py"):
        shutil.copy(HARNESS / name, work / name)
    out = work / "out"
    publish(generate(work / "invoice_perf.toml", out), out)
    compileall.compile_dir(str(out), quiet=1)
    compileall.compile_file(str(work / "invoice_handlers.py"), quiet=1)
    return out


def default_response_mode(out: Path, env: dict[str, str]) -> str:
    """How the built server's default `--http-response auto` resolves for the harness's handlers, as its start-up
    line says it (`_serving.response_mode`), asked of the server itself rather than assumed."""
    code = (
        "from perfbill_server._serving import response_mode\n"
        "from perfbill_server.server import create_server\n"
        "print(response_mode(create_server(), 'auto'))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=out, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ServerCommand:
    name: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]


def commands(mode: str, work: Path, env: dict[str, str]) -> dict[str, ServerCommand]:
    fusion_js = build_fusion(env)
    out = build_generated(work)
    gen_env = {**env, "PYTHONPATH": os.pathsep.join([str(out), str(work)])}
    gen_env.pop("PYTHONDONTWRITEBYTECODE", None)
    gen = [sys.executable, "-m", "perfbill_server", "--http", "--host", "127.0.0.1", "--http-response", mode]
    return {
        "gen": ServerCommand("gen", [*gen, "--port"], out, gen_env),
        "fusion": ServerCommand("fusion", ["node", str(fusion_js), mode], NM, env),
    }


# --- /proc ------------------------------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process tree, every thread."""
    ticks = 0
    for q in process_tree(pid):
        fields = Path(f"/proc/{q}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


# --- the client: raw HTTP/1.1 over asyncio ----------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Connection:
    """One keep-alive connection to /mcp, sending one request at a time."""

    port: int
    session: str | None = None
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    extra: dict[str, str] = field(default_factory=dict)

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def request_bytes(self, body: bytes) -> bytes:
        head = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
        ]
        if self.session is not None:
            head += [f"Mcp-Session-Id: {self.session}", f"Mcp-Protocol-Version: {PROTOCOL}"]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    async def post(self, body: bytes) -> Response:
        assert self.reader is not None and self.writer is not None
        self.writer.write(self.request_bytes(body))
        return await self.read_response()

    async def read_response(self) -> Response:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        status = int(status_line.split()[1])
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self.read_chunked()
        else:
            raise RuntimeError(f"response with neither Content-Length nor chunked body: {head!r}")
        return Response(status, headers, body)

    async def read_chunked(self) -> bytes:
        assert self.reader is not None
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"invoice_get","arguments":{"id":"I1"}}}'


def call_body(i: int) -> bytes:
    return CALL % i


def json_rpc_payload(response: Response) -> bytes:
    """The JSON-RPC message of a response: the body itself (JSON), or the data of the SSE event carrying it."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.body.replace(b"\r\n", b"\n").split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip():
                return line[5:].strip()
        raise RuntimeError(f"SSE response without data: {response.body[:200]!r}")
    return response.body


async def open_session(port: int) -> Connection:
    """initialize (the session id comes back in its response's header), then notifications/initialized."""
    first = Connection(port)
    await first.open()
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "http_bench", "version": "1"},
        },
    }
    answer = await first.post(json.dumps(init).encode())
    if answer.status != 200 or "mcp-session-id" not in answer.headers:
        raise RuntimeError(f"initialize: {answer.status} {answer.headers} {answer.body[:300]!r}")
    first.session = answer.headers["mcp-session-id"]
    done = await first.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    if done.status != 202:
        raise RuntimeError(f"notifications/initialized: {done.status} {done.body[:300]!r}")
    return first


def check_first_result(name: str, response: Response) -> tuple[int, str]:
    """The first tools/call: 200, redacted, no hidden value, the whole presentation (MCP Fusion in 4 blocks;
    fusiongen's first block carries data + rules + suggestions, the table follows). (size, content type)"""
    payload = json_rpc_payload(response)
    result = json.loads(payload).get("result", {})
    leaks = [s.decode() for s in LEAKS if s in payload]
    if response.status != 200 or leaks or b"[REDACTED]" not in payload or result.get("isError"):
        raise RuntimeError(f"{name}: bad result: {response.status} leaks={leaks} {payload[:300]!r}")
    whole = "\n".join(str(block.get("text", "")) for block in result.get("content", []))
    if not all(part in whole for part in PRESENTATION):
        raise RuntimeError(f"{name}: expected data, rule, suggestion and table: {payload[:300]!r}")
    return len(payload), response.headers.get("content-type", "").split(";")[0]


async def load(first: Connection, concurrency: int, calls: int, start_id: int) -> tuple[list[int], int]:
    """`calls` tools/call over `concurrency` connections of the session; latencies (ns) and error count."""
    connections = [first]
    for _ in range(concurrency - 1):
        extra = Connection(first.port, first.session)
        await extra.open()
        connections.append(extra)
    latencies: list[int] = []
    errors = 0
    next_id = start_id
    remaining = calls
    clock = time.perf_counter_ns

    async def worker(connection: Connection) -> None:
        nonlocal next_id, remaining, errors
        while remaining > 0:
            remaining -= 1
            i = next_id
            next_id += 1
            began = clock()
            answer = await connection.post(call_body(i))
            latencies.append(clock() - began)
            if answer.status != 200 or b'"isError":true' in answer.body or b'"id":%d' % i not in answer.body:
                errors += 1

    await asyncio.gather(*(worker(c) for c in connections))
    for extra in connections[1:]:
        await extra.close()
    return latencies, errors


async def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return
    raise RuntimeError(f"server not listening on {port} after {START_TIMEOUT} s")


async def one_round(server: ServerCommand, calls: int, warmup: int, concurrency: int) -> dict[str, Any]:
    port = free_port()
    process = subprocess.Popen([*server.argv, str(port)], cwd=server.cwd, env=server.env, stderr=subprocess.DEVNULL)
    try:
        await wait_listening(port, process)
        first = await open_session(port)
        size, content_type = check_first_result(server.name, await first.post(call_body(1)))
        await load(first, concurrency, warmup, 2)
        cpu_before, client_before = cpu_seconds(process.pid), time.process_time()
        began = time.perf_counter()
        latencies, errors = await load(first, concurrency, calls, 2 + warmup)
        elapsed = time.perf_counter() - began
        cpu_us = (cpu_seconds(process.pid) - cpu_before) / calls * 1e6
        client_us = (time.process_time() - client_before) / calls * 1e6
        await first.close()
    finally:
        process.terminate()  # only the server this round started, by its Popen handle
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    latencies.sort()
    return {
        "server": server.name,
        "requests_per_s": calls / elapsed,
        "p50_us": latencies[len(latencies) // 2] / 1e3,
        "p99_us": latencies[int(len(latencies) * 0.99)] / 1e3,
        "cpu_us": cpu_us,
        "client_cpu_us": client_us,
        "errors": errors,
        "bytes": size,
        "content_type": content_type,
    }


def run_rounds(mode: str, rounds: int, calls: int, warmup: int, concurrency: int, log: Any) -> list[dict[str, Any]]:
    env = harness_env()
    with tempfile.TemporaryDirectory(prefix="fusiongen-bench-http-") as work:
        servers = commands(mode, Path(work), env)
        default = default_response_mode(servers["gen"].cwd, servers["gen"].env)
        rows = []
        for k in range(rounds):
            order = ["gen", "fusion"] if k % 2 == 0 else ["fusion", "gen"]
            for name in order:
                row = asyncio.run(one_round(servers[name], calls, warmup, concurrency))
                row["round"] = k + 1
                row["gen_default"] = default
                rows.append(row)
                print(
                    f"round {k + 1} {name:6s} {row['requests_per_s']:7.0f} req/s  p50 {row['p50_us']:7.0f} us  "
                    f"p99 {row['p99_us']:7.0f} us  server CPU {row['cpu_us']:5.0f} us/call  "
                    f"client CPU {row['client_cpu_us']:4.0f} us/call  {row['content_type']} {row['bytes']} B  "
                    f"errors {row['errors']}",
                    file=log,
                    flush=True,
                )
    return rows


# --- make bench -------------------------------------------------------------------------------------------


def paired(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    """(fusiongen median, MCP Fusion median, median of per-round ratios fusiongen / MCP Fusion)."""
    by_round: dict[int, dict[str, float]] = {}
    for row in rows:
        by_round.setdefault(row["round"], {})[row["server"]] = row[key]
    pairs = [(r["gen"], r["fusion"]) for r in by_round.values() if "gen" in r and "fusion" in r]
    return (
        statistics.median(g for g, _ in pairs),
        statistics.median(f for _, f in pairs),
        statistics.median(g / f for g, f in pairs),
    )


def bench_mcpfusion_http(settings: Settings) -> list[Row]:
    reason = missing()
    if reason is not None:
        print(f"[mcpfusion_http] skipped: {reason}", file=sys.stderr, flush=True)
        return [Row("MCP Fusion side by side over streamable HTTP", f"skipped: {reason}")]
    rounds, calls, warmup = (2, 400, 200) if settings.quick else (5, 4000, 1000)
    rows: list[Row] = []
    for mode, label in (("json", "JSON responses"), ("sse", "SSE responses")):
        print(f"[mcpfusion_http] {mode}: {rounds} rounds x {calls} calls", file=sys.stderr, flush=True)
        figures = run_rounds(mode, rounds, calls, warmup, CONCURRENCY, sys.stderr)
        rows += mode_rows(mode, label, figures, rounds, calls)
    return rows


CONCURRENCY = 4  # connections at once: two per core of the 2-core machine the figures come from


def mode_rows(mode: str, label: str, figures: list[dict[str, Any]], rounds: int, calls: int) -> list[Row]:
    """The requests/s ratio (target >= 1.0x, the issue's bar) and, below it, p50, p99 and server CPU."""
    gen, fusion, ratio = paired(figures, "requests_per_s")
    first = Row(
        f"fusiongen/MCP Fusion: streamable HTTP requests/s, {label}",
        f"fusiongen {gen:,.0f}/s  MCP Fusion {fusion:,.0f}/s",
        ratio,
        *at_least(ratio, 1.0),
    )
    default = figures[0]["gen_default"] if figures else "unknown"
    sides = f"ours --http-response {mode} (ours by default: {default}), "
    if mode == "sse":
        sides += "MCP Fusion's own startServer({transport: 'http'})"
    else:
        sides += "MCP Fusion's registry on the TS SDK transport with enableJsonResponse"
    types = ", ".join(sorted({f"{r['server']} {r['content_type']} {r['bytes']} B" for r in figures}))
    first.notes.append(
        f"bench/mcpfusion_http.py: {rounds} interleaved rounds of {calls} tools/call on {CONCURRENCY} connections of "
        f"one stateful session; {sides}; {types}; errors {sum(r['errors'] for r in figures)}"
    )
    result = [first]
    for key, what in (("p50_us", "p50"), ("p99_us", "p99"), ("cpu_us", "server CPU per call")):
        g, f, r = paired(figures, key)
        result.append(Row(f"  streamable HTTP {mode} {what}", f"fusiongen {g:,.0f} us  MCP Fusion {f:,.0f} us", r))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--mode", choices=["json", "sse"], default="json")
    parser.add_argument("--json", help="also write every round's figures to this file")
    arguments = parser.parse_args()
    reason = missing()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    print(f"# load before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cpus)", flush=True)
    rows = run_rounds(
        arguments.mode, arguments.rounds, arguments.calls, arguments.warmup, arguments.concurrency, sys.stdout
    )
    print(f"# load after: {os.getloadavg()[0]:.2f}")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(rows, indent=1))
    for key in ("requests_per_s", "p50_us", "p99_us", "cpu_us"):
        g, f, r = paired(rows, key)
        print(f"{key:15s} fusiongen {g:9.1f}  MCP Fusion {f:9.1f}  ratio {r:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
