"""The quality gate of generated code (ruff check, ruff format, mypy --strict) for a server a test builds.

The golden trees get it in test_generated_quality.py; features no golden spec uses call this instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.build import GeneratedServer
from tests.support.processes import run_python


def assert_generated_quality(server: GeneratedServer, cache: Path) -> None:
    for command in (["-m", "ruff", "check", "--no-cache", "."], ["-m", "ruff", "format", "--check", "--no-cache", "."]):
        result = run_python(command, cwd=server.out)
        assert result.returncode == 0, result.stdout + result.stderr
    env = {**os.environ, "MYPYPATH": str(server.spec_dir)}
    mypy = ["-m", "mypy", "--strict", "--cache-dir", cache / "mypy", server.package_name]
    result = run_python(mypy, cwd=server.out, env=env, timeout=540)
    assert result.returncode == 0 and "Success" in result.stdout, result.stdout + result.stderr
