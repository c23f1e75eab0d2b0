"""The static half of a generated server: `fusiongen/runtime/*.py`, copied into it byte for byte.

Those modules are real Python (linted, type-checked and unit-tested as source), so they are never
rendered or reformatted: a server's copy is the ownership header, one line naming where the copy
comes from, and the module's exact text. What a generated module may import from them is read from
their source too, so a helper added to the runtime is importable without anyone listing it.
"""

from __future__ import annotations

import ast
import functools
from importlib import resources

from fusiongen import __version__

# The runtime modules, by the file name they get inside a generated package.
RUNTIME_MODULES = ("_expressions", "_gate", "_runtime", "state_store")


@functools.cache
def runtime_source(module: str) -> str:
    """The text of `fusiongen/runtime/<module>.py`, from the installed package."""
    if module not in RUNTIME_MODULES:
        raise KeyError(module)
    return resources.files("fusiongen.runtime").joinpath(f"{module}.py").read_text(encoding="utf-8")


def runtime_file(module: str, header: str) -> str:
    """The generated copy of a runtime module: header, provenance line, then the module unchanged."""
    provenance = (
        f"# fusiongen runtime {__version__}: copied from fusiongen/runtime/{module}.py; independent of the spec\n"
    )
    return header + provenance + runtime_source(module)


@functools.cache
def exports(module: str) -> tuple[str, ...]:
    """Every name generated code may import from a runtime module, in isort's order (constants, classes,
    functions). Templates import all of them and the pinned ruff removes the unused ones, so imports
    follow from the names the code uses instead of being scraped from generated text."""
    names: list[str] = []
    for node in ast.parse(runtime_source(module)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    public = (_is_helper_of(module, name) for name in names)
    return tuple(sorted((n for n, ok in zip(names, public, strict=True) if ok), key=import_order))


def _is_helper_of(module: str, name: str) -> bool:
    if module == "_expressions":  # the expression helpers are all prefixed: they live among user data names
        return name.startswith("_x_")
    return not name.startswith("_") and name != "logger"


def import_order(name: str) -> tuple[int, str]:
    """isort's order within one import: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)
