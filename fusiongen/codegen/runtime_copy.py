"""The static half of a generated server: `fusiongen/runtime/*.py`, copied into it statement for statement.

Those modules are real Python (linted, type-checked and unit-tested as source), so they are never
rendered or reformatted: a server's copy is the ownership header, one line naming where the copy
comes from, and the module's text, without the top-level definitions that server cannot reach
(`codegen.prune`; the provenance line counts them). Every statement kept is the source's text unchanged.
What a generated module may import from them is read from their source too, so a helper added to the
runtime is importable without anyone listing it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import CodeType

from fusiongen import __version__
from fusiongen.codegen.formatting import format_source, prune_imports
from fusiongen.codegen.prune import Trimmed, trim_runtime
from fusiongen.names import RUNTIME, RUNTIME_MODULES, runtime_exports, runtime_source

__all__ = [
    "RUNTIME_MODULES",
    "declared_dependencies",
    "provenance",
    "runtime_file",
    "runtime_source",
    "shipped_copies",
]


def runtime_file(module: str, header: str) -> str:
    """The generated copy of a runtime module: header, provenance line, then the module unchanged."""
    return header + provenance(module) + runtime_source(module)


@functools.cache
def declared_dependencies(http: bool = True) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(required, {extra: requirements}) as the generated pyproject.toml declares them (`name[extras]>=low,<high`),
    read from `REQUIRED` and `EXTRAS` in runtime/_dependencies.py: the table the server checks itself against at
    import is the one its project declares, so the two cannot disagree. Without `http` (a server built without
    the http transport), what the same module lists as HTTP's alone is left out."""
    tables: dict[str, object] = {}
    for node in ast.parse(runtime_source("_dependencies")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            tables[node.target.id] = ast.literal_eval(node.value)
    required: tuple[tuple[str, str, str, str], ...] = tables["REQUIRED"]  # type: ignore[assignment]
    extras: dict[str, tuple[tuple[str, str, str, str], ...]] = tables["EXTRAS"]  # type: ignore[assignment]
    http_extras: tuple[str, ...] = () if http else tables["HTTP_EXTRAS"]  # type: ignore[assignment]
    http_distributions: tuple[str, ...] = () if http else tables["HTTP_DISTRIBUTIONS"]  # type: ignore[assignment]
    return tuple(_specifier(r) for r in required), {
        extra: tuple(_specifier(r) for r in requirements if r[0] not in http_distributions)
        for extra, requirements in extras.items()
        if extra not in http_extras
    }


def _specifier(requirement: tuple[str, str, str, str]) -> str:
    name, extras, lowest, below = requirement
    return f"{name}{f'[{extras}]' if extras else ''}>={lowest},<{below}"


def provenance(module: str, left_out: int = 0) -> str:
    """The second line of a runtime copy: where it comes from, and how much of it this server leaves out
    (`codegen.prune`)."""
    origin = f"# fusiongen runtime {__version__}: copied from fusiongen/runtime/{module}.py"
    if not left_out:
        return f"{origin}; independent of the spec\n"
    return f"{origin} without the {left_out} definition{'s' if left_out > 1 else ''} this server cannot reach\n"


def shipped_copies(
    generated: Mapping[str, str], copies: dict[str, str], code_of: Callable[[str], CodeType] | None = None
) -> dict[str, str]:
    """The runtime copies as a server ships them: without what its generated modules (`code_of`: compiled,
    `render.CompiledModules`) cannot reach
    (`codegen.prune`), then without the imports only that used (ruff's F401), and formatted (only blank lines
    can change)."""

    def shipped(path: str, copy: Trimmed) -> str:
        if not copy.left_out:
            return copy.text
        module = path.rpartition("/")[2].removesuffix(".py")
        header, _, rest = copy.text.split("\n", 2)
        # ruff then removes the imports only the left-out code used, and sets the blank lines where a gap went
        # with what was left out (the source is formatted with the same settings: no kept statement changes).
        return format_source(path, prune_imports(path, f"{header}\n{provenance(module, len(copy.left_out))}{rest}"))

    trimmed = trim_runtime(generated, copies, _roots, code_of)
    with ThreadPoolExecutor(max_workers=4) as pool:  # each copy left short is three short-lived ruff processes
        return dict(zip(trimmed, pool.map(shipped, trimmed, trimmed.values()), strict=True))


def _roots(module: str) -> tuple[str, ...]:
    """What a runtime module offers beyond the server's own code: the public names of a module the registry
    marks as an entry point (`testing`, which the user's tests call)."""
    if not any(entry.name == module and entry.public_entry_points for entry in RUNTIME):
        return ()
    return tuple(sorted(name for name in runtime_exports(module) if not name.startswith("_")))
