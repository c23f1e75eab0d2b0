"""Each generated module's imports, written from what its code uses (issue 24): a pure phase between rendering
and formatting.

Templates place code whose names depend on the spec (a server with workflows calls the gate, a date field's
check lives in the runtime), so which names a module uses is known only once it is rendered. This phase reads
that from the module itself, with CPython's symbol table (the names its code loads from the module's scope,
in every function and class, and its annotations, read with `from __future__ import annotations` set aside so
that they count as the expressions type checkers read), and then:

1. imports every runtime name the module uses and does not bind itself from the runtime module that offers it
   (`names.runtime_exports`), among those the template draws on, in the order they are listed (templates
   write no runtime imports);
2. keeps, of the imports a template writes itself (the standard library, the SDK, the sibling modules), only
   the names the module uses: a template lists what its code uses under some spec (`sqlite3` only with
   workflows), and the module imports what its code does.

Nothing here guesses from text: a name is used when the compiler resolves a use of it to the module's scope.
Sorting and wrapping the import block is left to the formatter (ruff's isort rules), as any layout is.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["ImportProblem", "RuntimeSource", "with_imports"]

_FUTURE = "from __future__ import annotations\n"


class ImportProblem(Exception):
    """A rendered module uses a runtime name two of its sources offer: a fusiongen bug (internal error)."""


@dataclass(frozen=True)
class RuntimeSource:
    """A runtime module a generated module may import from, and the names it offers."""

    module: str
    names: frozenset[str]


def with_imports(path: str, text: str, sources: Sequence[RuntimeSource]) -> str:
    """`text` (a rendered module) with the imports its code uses: the runtime names it uses added from
    `sources` (runtime modules shipped with it), and the names its own import block imports but does not use
    left out (a statement left empty goes)."""
    used, bound = _uses(path, text)
    lines = text.splitlines(keepends=True)
    block = _import_block(lines)
    statements = ast.parse("".join(lines[:block]), path).body
    replaced: dict[int, str] = {}  # 0-based line → its new text ("" drops it)
    last_import = 0
    for node in statements:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        last_import = node.end_lineno or node.lineno
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        kept = [alias for alias in node.names if _bound_name(alias) in used]
        if len(kept) == len(node.names):
            continue
        first, end = node.lineno - 1, node.end_lineno or node.lineno
        replaced |= dict.fromkeys(range(first, end), "")
        if kept:
            replaced[first] = _statement(node, kept)
    added = "".join(_added(used - bound - _BUILTINS, sources))
    if added:
        replaced[last_import - 1] = replaced.get(last_import - 1, lines[last_import - 1]) + added
    return "".join(replaced.get(number, line) for number, line in enumerate(lines))


_BUILTINS = frozenset(dir(builtins))


def _uses(path: str, text: str) -> tuple[set[str], set[str]]:
    """(used, bound): the names the module's code resolves to its own scope, and those the module binds."""
    module = symtable.symtable(text.replace(_FUTURE, "", 1), path, "exec")
    used: set[str] = set()
    for table in _tables(module):
        outermost = table is module
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (outermost or symbol.is_global()):
                used.add(symbol.get_name())
    bound = {s.get_name() for s in module.get_symbols() if s.is_assigned() or s.is_imported()}
    return used, bound


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _tables(child)


def _added(names: set[str], sources: Sequence[RuntimeSource]) -> Iterator[str]:
    """One `from .<module> import ...` per source that offers some of `names`."""
    wanted: dict[str, list[str]] = {}
    for name in sorted(names):
        offering = [source.module for source in sources if name in source.names]
        if len(offering) > 1:
            raise ImportProblem(f"{name!r} is offered by {' and '.join(offering)}: list only one of them")
        if offering:
            wanted.setdefault(offering[0], []).append(name)
    for source in sources:
        if source.module in wanted:
            yield f"from .{source.module} import {', '.join(wanted[source.module])}\n"


def _bound_name(alias: ast.alias) -> str:
    """The name an import binds: `import a.b` binds `a`, `import a as b` and `from x import a as b` bind `b`."""
    return alias.asname or alias.name.partition(".")[0]


def _statement(node: ast.Import | ast.ImportFrom, aliases: list[ast.alias]) -> str:
    names = ", ".join(alias.name + (f" as {alias.asname}" if alias.asname else "") for alias in aliases)
    if isinstance(node, ast.Import):
        return f"import {names}\n"
    return f"from {'.' * node.level}{node.module or ''} import {names}\n"


def _import_block(lines: list[str]) -> int:
    """How many lines the module's leading block holds: its comments, docstring and imports (the part of a
    generated module that imports; a function's own imports come later and are the function's business)."""
    in_docstring = in_parentheses = False
    for number, line in enumerate(lines):
        if in_docstring:
            in_docstring = line.count('"""') % 2 == 0
        elif in_parentheses:
            in_parentheses = line.strip() != ")"
        elif line.startswith('"""'):
            in_docstring = line.count('"""') % 2 == 1
        elif line.startswith(("from ", "import ")):
            in_parentheses = line.rstrip().endswith("(")
        elif line.strip() and not line.startswith("#"):
            return number
    return len(lines)
