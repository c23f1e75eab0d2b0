"""The generator's structure, as a contract: dependencies point one way, and nothing imports in a cycle.

Layers, from the top: `cli` → `api` → the phase packages (`load`, `lower`, `codegen`, `output`,
`scaffold`, `report`) → the shared bottom (`ir`, `diagnostics`, `names`, `expr`, `pyliteral`,
`templating`). A module may import its own layer's package, anything below it, and — the one
sideways step — `lower` may use `load`'s types (it lowers a loaded spec). `runtime` is code for
generated servers and imports nothing from fusiongen. The graph is read statically (imports under
TYPE_CHECKING count too).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fusiongen"

BOTTOM = {
    "fusiongen",
    "fusiongen.ir",
    "fusiongen.diagnostics",
    "fusiongen.names",
    "fusiongen.expr",
    "fusiongen.pyliteral",
    "fusiongen.templating",
}
PHASES = ("load", "lower", "codegen", "output", "scaffold", "importers", "report")
# What each area may import besides itself and the bottom layer.
ALLOWED: dict[str, set[str]] = {
    "cli": {"api"},
    "api": set(PHASES),
    "load": set(),
    "lower": {"load"},
    "codegen": set(),
    "output": set(),
    "scaffold": set(),
    "importers": set(),
    "report": set(),
    "bottom": set(),
    "main": {"cli"},
}


def area(module: str) -> str:
    """`fusiongen.lower.tools` → "lower"; bottom-layer modules → "bottom"."""
    if module in BOTTOM:
        return "bottom"
    parts = module.split(".")
    if parts[1] == "__main__":
        return "main"
    return parts[1]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The fusiongen modules `module` imports (a name imported from a package counts as the submodule
    when there is one)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            prefix = ".".join(p for p in (base, node.module or "") if p)
            candidates = [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != module:
                targets.add(candidate)
                break
    return targets


GRAPH = {name: imported(name, path, modules()) for name, path in modules().items()}


def test_the_graph_is_read() -> None:
    """The checks below are only as good as the graph: it must see real edges."""
    assert "fusiongen.lower.context" in GRAPH["fusiongen.lower.presenters"]
    assert "fusiongen.api" in GRAPH["fusiongen.cli"]
    assert "fusiongen.runtime._runtime" in GRAPH["fusiongen.runtime._gate"]  # relative imports resolve
    assert len(GRAPH) > 40


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(GRAPH[node]):
            if state.get(target) == "open":
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if area(m) != "runtime"))
def test_dependencies_point_down(module: str) -> None:
    mine = area(module)
    upward = sorted(
        target
        for target in GRAPH[module]
        if area(target) not in ({mine, "bottom"} | ALLOWED[mine]) or area(target) == "runtime"
    )
    assert upward == [], f"{module} ({mine}) may import only {sorted(ALLOWED[mine] | {mine})} and the bottom layer"


def test_bottom_layer_imports_only_itself() -> None:
    """The IR in particular imports nothing from fusiongen: every phase can read it."""
    assert GRAPH["fusiongen.ir"] == set()
    for module in BOTTOM:
        assert GRAPH[module] <= BOTTOM, module


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if area(m) == "runtime"))
def test_runtime_imports_nothing_from_fusiongen_but_itself(module: str) -> None:
    assert all(area(target) == "runtime" for target in GRAPH[module]), GRAPH[module]
    source = modules()[module].read_text(encoding="utf-8")
    assert "import fusiongen" not in source and "from fusiongen" not in source


def test_values_import_only_the_standard_library() -> None:
    """runtime/_values.py (the checks and casts the generated inputs.py and shapes.py call) has no SDK import:
    a value's check is the same whatever serves it."""
    tree = ast.parse((PACKAGE / "runtime" / "_values.py").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported and {name.partition(".")[0] for name in imported} <= sys.stdlib_module_names, imported


def test_package_inits_are_only_docstrings() -> None:
    """A package's __init__ that imports its modules would make every import of one module load all of them."""
    for path in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        statements = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        if path.parent == PACKAGE:  # fusiongen/__init__.py: the version, nothing else
            assert [type(n) for n in statements] == [ast.Assign], path
        else:
            assert statements == [], path
