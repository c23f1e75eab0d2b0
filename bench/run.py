"""`make bench`: run every benchmark section and print one table of ratios measured in this run.

    .venv/bin/python bench/run.py            # everything (a couple of minutes)
    .venv/bin/python bench/run.py --quick    # a smoke test: same code paths, few iterations
    .venv/bin/python bench/run.py --only toolcall --golden

A section is a function `(Settings) -> list[Row]`; add one to SECTIONS. Timings are never asserted:
the exit status is 0 whatever the verdicts (1 only if a section crashed).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.core import Row, Settings, machine, seconds, table


def _toolcall(settings: Settings) -> list[Row]:
    from bench.toolcall import bench_toolcall

    return bench_toolcall(settings)


def _codegen(settings: Settings) -> list[Row]:
    from bench.codegen import bench_codegen

    return bench_codegen(settings)


def _presenters(settings: Settings) -> list[Row]:
    from bench.presenters import bench_presenters

    return bench_presenters(settings)


def _gating(settings: Settings) -> list[Row]:
    from bench.gating import bench_gating

    return bench_gating(settings)


def _mcpfusion(settings: Settings) -> list[Row]:
    from bench.mcpfusion import bench_mcpfusion

    return bench_mcpfusion(settings)


def _mcpfusion_http(settings: Settings) -> list[Row]:
    from bench.mcpfusion_http import bench_mcpfusion_http

    return bench_mcpfusion_http(settings)


def _openapi(settings: Settings) -> list[Row]:
    from bench.openapi import bench_openapi

    return bench_openapi(settings)


def _sdk_walls(settings: Settings) -> list[Row]:
    from bench.sdk_walls import bench_sdk_walls

    return bench_sdk_walls(settings)


# (name, what it measures, function). Sections import lazily so --only skips the others' imports.
SECTIONS: list[tuple[str, str, Callable[[Settings], list[Row]]]] = [
    ("toolcall", "in-process tools/call throughput: generated vs MCPServer vs bare Server", _toolcall),
    ("codegen", "fusiongen build/check time: 20 vs 200 models, and check of every spec", _codegen),
    ("presenters", "generated presenters vs run-time interpreters and a hand-written MCPServer tool", _presenters),
    ("gating", "per-call workflow gating: compiled table and Gate vs transitions / python-statemachine", _gating),
    ("mcpfusion", "side by side with MCP Fusion 5.0.7 (../shared/bench/mcpfusion): stdio and in-process", _mcpfusion),
    ("mcpfusion_http", "side by side with MCP Fusion 5.0.7 over streamable HTTP: requests/s, latency", _mcpfusion_http),
    (
        "openapi",
        "import openapi on large real documents: import/build/initialize time, tokens, vs operations",
        _openapi,
    ),
    ("sdk_walls", "where the mcp SDK is the wall: its import in our start-up, its SSE response path", _sdk_walls),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test, seconds)")
    parser.add_argument(
        "--golden",
        action="store_true",
        help="toolcall: import golden/billing instead of building specs/billing.toml now",
    )
    parser.add_argument(
        "--only", action="append", choices=[name for name, _, _ in SECTIONS], help="run only this section (repeatable)"
    )
    arguments = parser.parse_args(argv)
    settings = Settings(quick=arguments.quick, golden=arguments.golden)

    print(machine(), flush=True)
    rows: list[Row] = []
    failed = False
    started = time.perf_counter()
    for name, what, section in SECTIONS:
        if arguments.only and name not in arguments.only:
            continue
        print(f"[{name}] {what} ...", file=sys.stderr, flush=True)
        section_start = time.perf_counter()
        try:
            rows += section(settings)
        except Exception as exc:
            failed = True
            traceback.print_exc()
            message = " ".join(f"{type(exc).__name__}: {exc}".split())
            rows.append(Row(f"{name}: crashed", message[:160] + " (traceback on stderr)"))
        print(f"[{name}] done in {seconds(time.perf_counter() - section_start)}", file=sys.stderr, flush=True)
    print()
    print(table(rows))
    print(
        f"\n{'quick run, ' if settings.quick else ''}total {seconds(time.perf_counter() - started)}; "
        "ratios are medians of paired, interleaved rounds; targets are reported, never asserted."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
