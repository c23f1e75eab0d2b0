"""A static call graph over a generated package: which top-level functions and classes its entry points can reach.

Names, not types: a definition is reached when a reached body (or a module's top-level code, which runs at
import) mentions its name, as a bare name or as an attribute (`obj.name`, `module.name`). That over-approximates
(two definitions of one name are both reached when either is mentioned), so what it calls unreachable is
certainly never called: no body that runs can even name it. A class reached has all its methods reached (the
language and the SDK call dunders and protocol methods implicitly).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass
class Package:
    """Every top-level definition of a package's modules, by (module, name), and what each body mentions."""

    definitions: dict[tuple[str, str], Definition] = field(default_factory=dict)
    mentions: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    module_code: dict[str, set[str]] = field(default_factory=dict)  # names the top-level statements mention
    lines: dict[tuple[str, str], int] = field(default_factory=dict)


def _mentioned(nodes: list[ast.stmt] | ast.AST) -> set[str]:
    names: set[str] = set()
    for root in nodes if isinstance(nodes, list) else [nodes]:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module:  # `from ._auth import x` names the module
                names.add(node.module.rpartition(".")[2])
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).rpartition(".")[2])
                names.add(node.name.rpartition(".")[2])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # getattr(module, "name"), __all__, string annotations
    return names


def read_package(directory: Path) -> Package:
    package = Package()
    for path in sorted(directory.glob("*.py")):
        module = path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top: list[ast.stmt] = []
        for node in tree.body:
            if isinstance(node, Definition):
                key = (module, node.name)
                package.definitions[key] = node
                # A decorator and a default run at import; the body runs when called.
                package.mentions[key] = _mentioned(node)
                top += node.decorator_list  # type: ignore[arg-type]
                package.lines[key] = (node.end_lineno or node.lineno) - node.lineno + 1
            else:
                top.append(node)
        package.module_code[module] = _mentioned(top)
    return package


def entry_points(package: Package) -> set[tuple[str, str]]:
    """What runs a generated server: `__main__.main` (the command line), `server.create_server` (hosts and tests)
    and the public functions of `testing` (the user's tests); every module's import-time code runs as well."""
    roots = {("__main__", "main"), ("server", "create_server")}
    return roots | {key for key in package.definitions if key[0] == "testing" and not key[1].startswith("_")}


def nameable(package: Package, roots: set[tuple[str, str]]) -> set[str]:
    """Every name that code which can run (a reached body, a module's import-time code) mentions."""
    return set().union(*(package.mentions[key] for key in reached(package, roots)), *package.module_code.values())


def unreachable(package: Package, roots: set[tuple[str, str]], modules: set[str]) -> dict[tuple[str, str], int]:
    """The definitions in `modules` that nothing reached from `roots` (and from every module's import-time code)
    mentions, with their line counts."""
    seen = reached(package, roots)
    return {key: package.lines[key] for key in package.definitions if key[0] in modules and key not in seen}


def reached(package: Package, roots: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The definitions reached from `roots` and from every module's import-time code."""
    by_name: dict[str, list[tuple[str, str]]] = {}
    for key in package.definitions:
        by_name.setdefault(key[1], []).append(key)
    seen: set[tuple[str, str]] = set()
    todo = [*roots]
    for names in package.module_code.values():
        for name in names:
            todo += by_name.get(name, [])
    while todo:
        key = todo.pop()
        if key in seen or key not in package.definitions:
            continue
        seen.add(key)
        for name in package.mentions[key]:
            todo += by_name.get(name, [])
    return seen
