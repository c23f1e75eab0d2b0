"""The static half of a generated server: `fusiongen/runtime/*.py`, copied into it byte for byte.

Those modules are real Python (linted, type-checked and unit-tested as source), so they are never
rendered or reformatted: a server's copy is the ownership header, one line naming where the copy
comes from, and the module's exact text. What a generated module may import from them is read from
their source too, so a helper added to the runtime is importable without anyone listing it.
"""

from __future__ import annotations

import ast
import functools

from fusiongen import __version__
from fusiongen.names import RUNTIME_MODULES, runtime_exports, runtime_source

__all__ = ["RUNTIME_MODULES", "declared_dependencies", "exports", "import_order", "runtime_file", "runtime_source"]


def runtime_file(module: str, header: str) -> str:
    """The generated copy of a runtime module: header, provenance line, then the module unchanged."""
    provenance = (
        f"# fusiongen runtime {__version__}: copied from fusiongen/runtime/{module}.py; independent of the spec\n"
    )
    return header + provenance + runtime_source(module)


@functools.cache
def exports(module: str) -> tuple[str, ...]:
    """Every name generated code may import from a runtime module (`names.runtime_exports`), in isort's
    order (constants, classes, functions). Templates import all of them and the pinned ruff removes the
    unused ones, so imports follow from the names the code uses instead of being scraped from generated text."""
    return tuple(sorted(runtime_exports(module), key=import_order))


def import_order(name: str) -> tuple[int, str]:
    """isort's order within one import: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


@functools.cache
def declared_dependencies() -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(required, {extra: requirements}) as the generated pyproject.toml declares them (`name[extras]>=low,<high`),
    read from `REQUIRED` and `EXTRAS` in runtime/_dependencies.py: the table the server checks itself against at
    import is the one its project declares, so the two cannot disagree."""
    tables: dict[str, object] = {}
    for node in ast.parse(runtime_source("_dependencies")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            tables[node.target.id] = ast.literal_eval(node.value)
    required: tuple[tuple[str, str, str, str], ...] = tables["REQUIRED"]  # type: ignore[assignment]
    extras: dict[str, tuple[tuple[str, str, str, str], ...]] = tables["EXTRAS"]  # type: ignore[assignment]
    return tuple(_specifier(r) for r in required), {
        extra: tuple(_specifier(r) for r in requirements) for extra, requirements in extras.items()
    }


def _specifier(requirement: tuple[str, str, str, str]) -> str:
    name, extras, lowest, below = requirement
    return f"{name}{f'[{extras}]' if extras else ''}>={lowest},<{below}"
