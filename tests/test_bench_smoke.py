"""`make bench`'s in-process sections still run against the runtime as it is today.

The benchmarks call the generated runtime's helpers by module (the serializer, `Notes`, the output checks), so
moving a helper between runtime modules can break a section silently: `make bench` reports a crashed section as
a row and exits 1, and nobody runs it on every change. This runs those sections once in `--quick` mode (few
iterations) and asserts only that none crashed; no timing is asserted. The sections that need Node (MCP Fusion)
or the large OpenAPI documents are left to `make bench`.
"""

from __future__ import annotations

from tests.support.build import ROOT
from tests.support.processes import run_python

SECTIONS = ("toolcall", "presenters", "gating", "codegen")


def test_the_in_process_bench_sections_run() -> None:
    arguments = ["bench/run.py", "--quick", *(f"--only={section}" for section in SECTIONS)]
    done = run_python(arguments, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "crashed" not in done.stdout, done.stdout[-3000:]
    for section in SECTIONS:
        assert f"[{section}] done in" in done.stderr + done.stdout, section
