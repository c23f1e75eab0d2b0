"""Tidy generated Python with the pinned ruff: sort the import block, then format.

Templates place code; they cannot wrap a long expression the way a careful person would. ruff sorts and
wraps the imports a module's code uses (`codegen.imports` wrote them) and formats, deterministically for a
given version, which is why fusiongen pins ruff exactly: another version could wrap differently and
`fusiongen check` would report drift. The runtime copies the prune phase left short also lose the imports
only what it left out used (F401). Each file goes through ruff on stdin → stdout: nothing touches the disk.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache

LINE_LENGTH = 120


class FormattingError(Exception):
    """ruff could not tidy a generated file: a fusiongen bug, reported as an internal error."""


@cache
def _ruff() -> str:
    from ruff.__main__ import find_ruff_bin

    return str(find_ruff_bin())


def _run_ruff(arguments: list[str], path: str, text: str) -> str:
    completed = subprocess.run(
        [_ruff(), *arguments, "--isolated", "--line-length", str(LINE_LENGTH), "--stdin-filename", path, "-"],
        input=text.encode("utf-8"),
        capture_output=True,
        check=False,
    )
    if completed.returncode != 0:
        problem = completed.stderr.decode(errors="replace").strip()
        raise FormattingError(f"ruff {arguments[0]} failed on {path}: {problem}")
    return completed.stdout.decode("utf-8")


def prune_imports(path: str, text: str) -> str:
    """`text` without the imports it does not use (ruff's F401 fix), then with its import block sorted
    again (I001): removing a whole import can leave a gap isort would not. Two passes, because in one
    isort would wrap the long, unpruned line first and keep it wrapped."""
    text = _run_ruff(["check", "--select", "F401", "--fix", "--exit-zero", "--quiet"], path, text)
    return _run_ruff(["check", "--select", "I001", "--fix", "--exit-zero", "--quiet"], path, text)


def format_source(path: str, text: str) -> str:
    return _run_ruff(["format"], path, text)


def tidy_source(path: str, text: str) -> str:
    """Imports sorted (isort's rules), then formatted. A package's `__init__.py` keeps its imports where they
    are: they are its interface, in the order it needs them."""
    if not path.endswith("__init__.py"):
        text = _run_ruff(["check", "--select", "I001", "--fix", "--exit-zero", "--quiet"], path, text)
    return format_source(path, text)


def tidy_files(files: dict[str, str]) -> dict[str, str]:
    """Every `.py` file tidied (a few at a time: each is a short-lived ruff process)."""
    python = [path for path in files if path.endswith(".py")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        tidied = dict(zip(python, pool.map(lambda p: tidy_source(p, files[p]), python), strict=True))
    return {path: tidied.get(path, text) for path, text in files.items()}
