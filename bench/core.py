"""Shared machinery of the benchmarks: result rows, interleaved timing, medians, the table.

Nothing here asserts a timing. A benchmark measures its variants in the same run, interleaved
(A B C, B C A, C A B, ...) so that drift on a noisy machine hits every variant alike, and reports
medians and ratios. Ratios are medians of *paired* per-round ratios: each round measures every
variant back to back, so a slow round slows both sides of its ratio.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """What every benchmark is told: `quick` trades precision for seconds (smoke tests)."""

    quick: bool = False
    golden: bool = False  # section 1: import golden/billing instead of building the spec afresh


@dataclass
class Row:
    """One line of the table. `ratio` None: informational (no target, no verdict)."""

    benchmark: str
    measured: str
    ratio: float | None = None
    target: str = ""
    ok: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.ok is None:
            return "info"
        return "PASS" if self.ok else "MISS"


def at_least(ratio: float, floor: float) -> tuple[str, bool]:
    return f">= {floor:g}x", ratio >= floor


def at_most(ratio: float, ceiling: float) -> tuple[str, bool]:
    return f"<= {ceiling:g}x", ratio <= ceiling


def rotations(names: Sequence[T], rounds: int) -> list[list[T]]:
    """The order of each round: A B C, B C A, C A B, ... (every variant is first equally often)."""
    return [[names[(r + i) % len(names)] for i in range(len(names))] for r in range(rounds)]


@dataclass
class Samples:
    """Per-round measurements of each variant (seconds per unit, or any "lower is better" figure)."""

    by_variant: dict[str, list[float]]

    def median(self, name: str) -> float:
        return statistics.median(self.by_variant[name])

    def paired_ratio(self, numerator: str, denominator: str) -> float:
        """Median over rounds of numerator/denominator (as measured, not inverted)."""
        pairs = zip(self.by_variant[numerator], self.by_variant[denominator], strict=True)
        return statistics.median(a / b for a, b in pairs)

    def spread(self, name: str) -> float:
        """Relative spread (max-min)/median: how noisy this variant was across rounds."""
        values = self.by_variant[name]
        return (max(values) - min(values)) / statistics.median(values)


def settle() -> None:
    """Start every measurement with the same garbage: none.

    A full `gc.collect()` walks every live object (mcp, pydantic, ...): ~0.1-0.3 s here. Freezing what
    is alive once moves it out of the collector's sight, so the collection before each batch only
    looks at what the previous batch left behind.
    """
    gc.collect()
    gc.freeze()


def interleave(variants: Mapping[str, Callable[[], float]], rounds: int) -> Samples:
    """Run each variant once per round, rotating the order; each call returns its own measurement."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    settle()
    for order in rotations(list(variants), rounds):
        for name in order:
            gc.collect()
            samples[name].append(variants[name]())
    return Samples(samples)


async def ainterleave(variants: Mapping[str, Callable[[], Awaitable[float]]], rounds: int) -> Samples:
    """`interleave` for async variants, all measured inside one event loop."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    settle()
    for order in rotations(list(variants), rounds):
        for name in order:
            gc.collect()
            samples[name].append(await variants[name]())
    return Samples(samples)


def cpu() -> float:
    """CPU seconds used so far by this process and by the children it waited for (subprocesses).

    The clock of every in-process measurement: on a shared machine, CPU time measures the work, and
    wall time measures the work plus however long other tenants kept the CPU.
    """
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.0f} ms" if value >= 0.1 else f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} us"


def rate(per_second: float) -> str:
    if per_second >= 10_000:
        return f"{per_second / 1000:.1f}k/s"
    return f"{per_second:,.0f}/s"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = " load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}, {sys.platform}) "
        f"on {cpu}, {os.cpu_count()} CPUs,{load}"
    )


def table(rows: Sequence[Row]) -> str:
    headers = ("benchmark", "measured", "ratio", "target", "result")
    cells = [
        (r.benchmark, r.measured, f"{r.ratio:.2f}x" if r.ratio is not None else "", r.target, r.verdict) for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(c) for c in cells]
    notes = [f"  * {r.benchmark}: {n}" for r in rows for n in r.notes]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)
