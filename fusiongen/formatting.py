"""Format generated Python with ruff's formatter, so generated code reads like reviewed code.

Templates place code; they cannot wrap a long expression the way a careful person would. ruff's
formatter does, deterministically for a given version, which is why fusiongen pins ruff exactly:
another ruff version could wrap differently and `fusiongen check` would report drift. Each file
goes through `ruff format -` on stdin → stdout: nothing touches the disk.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache

LINE_LENGTH = 120


class FormattingError(Exception):
    """ruff could not format a generated file: a fusiongen bug, reported as an internal error."""


@cache
def _ruff() -> str:
    from ruff.__main__ import find_ruff_bin

    return str(find_ruff_bin())


def format_source(path: str, text: str) -> str:
    completed = subprocess.run(
        [_ruff(), "format", "--isolated", "--line-length", str(LINE_LENGTH), "--stdin-filename", path, "-"],
        input=text.encode("utf-8"),
        capture_output=True,
        check=False,
    )
    if completed.returncode != 0:
        raise FormattingError(f"ruff format failed on {path}: {completed.stderr.decode(errors='replace').strip()}")
    return completed.stdout.decode("utf-8")


def format_files(files: dict[str, str]) -> dict[str, str]:
    """Every `.py` file formatted (a few at a time: each is a short-lived ruff process)."""
    python = [path for path in files if path.endswith(".py")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        formatted = dict(zip(python, pool.map(lambda p: format_source(p, files[p]), python), strict=True))
    return {path: formatted.get(path, text) for path, text in files.items()}
