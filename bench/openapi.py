"""Benchmark: `import openapi` on large real documents, against their number of operations (issue 26).

For each document (a trimmed copy from tests/fixtures/openapi/large, then the whole Twilio, OpenAI and GitHub
documents from ../shared/openapi/large), as a new user runs it, each step a real subprocess:

* `fusiongen import openapi DOC -o spec.toml --handlers http`, then `fusiongen build`: wall seconds each;
* the server's start-up: `python -m <package>` spawned, the time until its `initialize` answer, warm (the
  bytecode written by a first start, as pip's install compiles it), median of a few starts;
* the `tools/list` answer's size in tokens (UTF-8 bytes / 4, as `build --budget` estimates), the default import
  and `--compact` (docs/openapi.md §6).

Targets (reported, never asserted): GitHub's import + build under 15 s, its `initialize` under 1 s warm.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.core import ROOT, Row, Settings, cpu, seconds

# ../shared beside the main checkout (a worktree's is one level further up), or FUSIONGEN_OPENAPI_LARGE.
LARGE = Path(
    os.environ.get("FUSIONGEN_OPENAPI_LARGE")
    or next(
        (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if (p / "openapi" / "large").is_dir()),
        ROOT.parent / "shared",
    )
    / "openapi"
    / "large"
)
TRIMMED = ROOT / "tests" / "fixtures" / "openapi" / "large"
DOCUMENTS = (
    (TRIMMED / "github-2020-issues.json", "GitHub 2020, trimmed"),
    (LARGE / "twilio_api_v2010.json.gz", "Twilio 2010"),
    (LARGE / "openai-openapi.yaml.gz", "OpenAI"),
    (LARGE / "github-api.github.com-2020.json.gz", "GitHub 2020"),
)
TARGET_BUILD = 15.0
TARGET_INITIALIZE = 1.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


@dataclass
class Started:
    initialize: float  # wall seconds from spawn to the answer
    cpu: float  # CPU seconds the server had used when it answered initialize
    listing_bytes: int
    tools: int


def _fusiongen(*args: str | Path, cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one CLI run (the CPU is the work; wall adds whatever the other tenants took)."""
    start, start_cpu = time.perf_counter(), cpu()
    subprocess.run([sys.executable, "-m", "fusiongen", *map(str, args)], cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start, cpu() - start_cpu


def _cpu_of(pid: int) -> float:
    """CPU seconds a running process has used so far (Linux: /proc/PID/stat's utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(out: Path, package: str) -> Started:
    """Spawn the server, time `initialize`, then read `tools/list` (its size)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(out)
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", package], cwd=out, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    process.stdout.readline()
    initialize = time.perf_counter() - start
    used = _cpu_of(process.pid)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    process.stdin.write((json.dumps(initialized) + "\n" + json.dumps(listing) + "\n").encode())
    process.stdin.flush()
    answer = process.stdout.readline()
    process.stdin.close()
    process.wait(timeout=30)
    return Started(initialize, used, len(answer), len(json.loads(answer)["result"]["tools"]))


def _package(spec: Path) -> str:
    from fusiongen.api import validate

    return validate(spec)[1].package


def _measure(document: Path, work: Path, label: str, settings: Settings) -> Row:
    source = work / ("api" + "".join(document.suffixes).removesuffix(".gz"))
    source.write_bytes(gzip.decompress(document.read_bytes()) if document.suffix == ".gz" else document.read_bytes())
    operations = sum(
        1
        for item in (json.loads(source.read_text()) if source.suffix == ".json" else _yaml(source))["paths"].values()
        for method in item
        if method in ("get", "put", "post", "delete", "patch", "head")
    )
    timings: dict[str, tuple[float, float]] = {}
    listings: dict[str, Started] = {}
    for variant, options in (("default", ()), ("compact", ("--compact",))):
        folder = work / variant
        folder.mkdir()
        imported = _fusiongen(
            "import", "openapi", source, "-o", "spec.toml", "--handlers", "http", *options, cwd=folder
        )
        built = _fusiongen("build", "spec.toml", "-o", "out", cwd=folder)
        if variant == "default":
            timings = {"import": imported, "build": built}
        package = _package(folder / "spec.toml")
        _start(folder / "out", package)  # cold: writes the bytecode
        starts = [_start(folder / "out", package) for _ in range(1 if settings.quick else 3)]
        listings[variant] = min(starts, key=lambda s: s.initialize)
        if variant == "default":
            timings["initialize"] = (
                statistics.median(s.initialize for s in starts),
                statistics.median(s.cpu for s in starts),
            )
    default, compact = listings["default"], listings["compact"]
    (import_wall, import_cpu), (build_wall, build_cpu) = timings["import"], timings["build"]
    initialize_wall, initialize_cpu = timings["initialize"]
    whole_github = label == "GitHub 2020"
    measured = (
        f"{operations} ops, {default.tools} tools: import + build {seconds(import_cpu)} + {seconds(build_cpu)} CPU "
        f"({seconds(import_wall + build_wall)} wall); initialize {seconds(initialize_cpu)} CPU warm "
        f"({seconds(initialize_wall)} wall); tools/list {default.listing_bytes // 4:,} tokens, "
        f"--compact {compact.listing_bytes // 4:,}"
    )
    return Row(
        f"openapi {label}",
        measured,
        target=f"< {TARGET_BUILD:.0f} s, < {TARGET_INITIALIZE:.0f} s CPU" if whole_github else "",
        ok=(import_cpu + build_cpu < TARGET_BUILD and initialize_cpu < TARGET_INITIALIZE) if whole_github else None,
        notes=["CPU seconds: the work; wall adds what the machine's other tenants took"] if whole_github else [],
    )


def _yaml(path: Path) -> dict[str, dict[str, object]]:
    import yaml

    data: dict[str, dict[str, object]] = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    return data


def bench_openapi(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    documents = DOCUMENTS[:2] if settings.quick else DOCUMENTS
    for document, label in documents:
        if not document.is_file():
            rows.append(Row(f"openapi {label}", f"skipped: {document} is missing"))
            continue
        work = Path(tempfile.mkdtemp(prefix="fusiongen-bench-openapi-"))
        try:
            rows.append(_measure(document, work, label, settings))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return rows
