"""Leave out of a server's runtime copies what that server can never run (issue 24: only what it uses ships).

The runtime (fusiongen/runtime/) serves every spec, so a server that has no workflow, no form field or no date
would carry the code for them. After rendering, this phase computes what the generated modules can reach and
drops every other top-level definition from the copies; the unused imports that leaves are then removed by the
pinned ruff (F401), as for rendered modules. What stays is the runtime's text unchanged, statement for statement.

Reachability is by name, which over-approximates and so is safe: a definition is kept when its name appears in
generated code, in a kept definition's body, or in a runtime module's import-time statements — as a name, an
attribute (`obj.name`, `module.name`), or a string that could name it (`getattr(x, "name")`, a string
annotation). A kept class keeps all its methods (the language and the SDK call them implicitly). The roots are
everything the generator rendered for the spec (read from its compiled code: a large API's modules are too
big to walk as syntax trees, and a module that spells no name left to reach is not read at all) and the public
functions of `testing` (the user's tests call them). A runtime module's imports and its `__all__` do not keep
anything: they name what the module offers, not what runs (`__all__` is rewritten to what remains).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import CodeType

__all__ = ["Trimmed", "trim_runtime"]

# What a string must look like to be read as naming definitions: an identifier, a dotted path, or an annotation
# (`"Store | None"`, `"dict[str, Record]"`); prose is not read, so a docstring or a message keeps nothing alive.
_NAME_LIKE = re.compile(r"[A-Za-z_][\w.\[\],|]*")  # spaces only around "|" and after ",": see _name_like
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

Statement = ast.stmt
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Trimmed:
    """A runtime copy as shipped: its text, and the names of the definitions left out (in source order)."""

    text: str
    left_out: tuple[str, ...]


def trim_runtime(
    generated: Mapping[str, str],
    copies: dict[str, str],
    roots_in: Callable[[str], Iterable[str]],
    code_of: Callable[[str], CodeType] | None = None,
) -> dict[str, Trimmed]:
    """Every runtime copy (path → text, the header lines included) without the definitions nothing in
    `generated` (the rendered modules, path → text) can reach. `roots_in(module)` names a runtime module's
    definitions that are roots of their own (`testing`'s public functions). `code_of(path)` is a generated
    module compiled (by default compiled here; the pipeline passes its own, which parse-checking reuses).
    Unused imports are still in the texts returned: removing them is ruff's job (`formatting.prune_imports`)."""
    compiled = code_of or (lambda path: compile(generated[path], path, "exec", dont_inherit=True))
    modules = {path: _analysed(text) for path, text in copies.items()}
    always: set[str] = set()
    bodies: dict[str, set[str]] = {}  # a definition's name → the names its definitions mention
    for path, module in modules.items():
        always |= set(roots_in(path.rpartition("/")[2].removesuffix(".py")))
        always |= module.import_time
        for name, mentioned in module.bodies.items():
            bodies.setdefault(name, set()).update(mentioned)
    reached = _closure(always, bodies)
    # A module can mention only what it spells: one that spells no definition not yet reached adds nothing, and
    # is not compiled here (a large API's schemas are most of its generated text). Smallest first, so the large
    # ones find the most already reached.
    for path in sorted((p for p in generated if p.endswith(".py")), key=lambda p: (len(generated[p]), p)):
        if set(_IDENTIFIER.findall(generated[path])) & bodies.keys() <= reached:
            continue
        reached = _closure(reached | _mentioned_by_code(compiled(path)), bodies)
    return {path: _without(copies[path], module.tree, reached) for path, module in modules.items()}


@dataclass(frozen=True)
class _Analysed:
    """What a runtime module's text says about reachability, whatever the spec: its tree, the names each of
    its definitions mentions, and the names its import-time statements mention."""

    tree: ast.Module
    bodies: dict[str, frozenset[str]]
    import_time: frozenset[str]


@functools.lru_cache(maxsize=64)
def _analysed(text: str) -> _Analysed:
    """`text` read once per process: the runtime is the same for every spec, so a second build (a test
    session's hundreds, or `build` of several specs) pays only for what its own modules mention."""
    tree = ast.parse(text)
    bodies: dict[str, frozenset[str]] = {}
    import_time: set[str] = set()
    for node in tree.body:
        names = _defined(node)
        if names is None:
            if not _is_all(node):
                import_time |= _mentioned([node])
            continue
        mentioned = frozenset(_mentioned([node]))
        for name in names:
            bodies[name] = bodies.get(name, frozenset()) | mentioned
    return _Analysed(tree, bodies, frozenset(import_time))


def _closure(start: set[str], bodies: dict[str, set[str]]) -> set[str]:
    reached, todo = set(start), list(start)
    while todo:
        for name in bodies.get(todo.pop(), set()) - reached:
            reached.add(name)
            todo.append(name)
    return reached


def _defined(node: Statement) -> tuple[str, ...] | None:
    """The names a top-level statement defines and nothing else needs run: a function, a class, a plain
    assignment, a re-export (dunder names excluded). None for any other statement: it runs at import."""
    if isinstance(node, DEFINITIONS):
        return None if _dunder(node.name) else (node.name,)
    if _re_export(node):
        return tuple(alias.name for alias in node.names)  # type: ignore[attr-defined]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    if targets and all(isinstance(t, ast.Name) and not _dunder(t.id) for t in targets):
        return tuple(t.id for t in targets if isinstance(t, ast.Name))
    return None


def _re_export(node: Statement) -> bool:
    """`from ._x import A as A`: the explicit re-export idiom. It is what makes `A` importable from here, so it
    is kept exactly when `A` is."""
    return isinstance(node, ast.ImportFrom) and all(alias.asname == alias.name for alias in node.names)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_all(node: Statement) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _mentioned(nodes: list[ast.AST]) -> set[str]:
    """The names a runtime module's `nodes` mention (read once per process: `_analysed`). Deliberately not shared
    with tests/support/callgraph.py, which walks the shipped package the same way but with the opposite bias:
    there, a module's imports and its `__all__` count (so it calls less unreachable), and the test asserts it
    finds nothing left to prune, an independent check on this walk rather than the walk agreeing with itself. A
    module's own imports keep nothing here: they name what it uses, not what runs."""
    names: set[str] = set()
    docstrings = {id(d) for n in nodes for d in _docstrings(n)}
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                names.update(_IDENTIFIER.findall(node.value) if _name_like(node.value) else ())
    return names


def _mentioned_by_code(module: CodeType) -> set[str]:
    """The names a generated module mentions, read from its compiled code rather than a syntax tree (a large
    API's modules are millions of nodes, and compiling is needed anyway to parse-check them): the names its
    code loads, stores, imports (the last part of a dotted one) or reads as attributes, and its string
    constants that could name a definition (annotations are strings: `from __future__ import annotations`).
    The same rules as `_mentioned`, but for docstrings, which are constants like any other here: a docstring
    that is one identifier keeps that definition, which leaves in more, never less."""
    names: set[str] = set()
    strings: set[str] = set()
    codes = [module]
    while codes:
        code = codes.pop()
        names.update(name.rpartition(".")[2] for name in code.co_names)
        names.update(code.co_varnames + code.co_cellvars + code.co_freevars)
        constants = list(code.co_consts)
        while constants:
            constant = constants.pop()
            if type(constant) is str:
                strings.add(constant)
            elif type(constant) in (tuple, frozenset):
                constants.extend(constant)
            elif isinstance(constant, CodeType):
                codes.append(constant)
    return names | {name for text in strings if _name_like(text) for name in _IDENTIFIER.findall(text)}


def _name_like(text: str) -> bool:
    return _NAME_LIKE.fullmatch(re.sub(r"\s*\|\s*", "|", text).replace(", ", ",")) is not None


def _docstrings(root: ast.AST) -> list[ast.Constant]:
    found = []
    for node in ast.walk(root):
        if isinstance(node, (ast.Module, *DEFINITIONS)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.append(first.value)
    return found


def _without(text: str, tree: ast.Module, reached: set[str]) -> Trimmed:
    """`text` without its top-level definitions outside `reached`: each with the comment lines right above it
    and, when a gap precedes it, the blank lines after it (ruff's formatter then sets the gaps the source's
    rules want). `__all__`, if it lists what was left out, is written again in place."""
    lines = text.splitlines(keepends=True)
    replaced: dict[int, str] = {}  # 0-based line number → its new text ("" drops the line)
    left_out: list[str] = []
    for node in tree.body:
        names = _defined(node)
        if names is None or any(name in reached for name in names):
            continue
        left_out += names
        first = node.lineno - 1
        last = node.end_lineno or node.lineno  # exclusive, 0-based
        if not _re_export(node):  # a definition takes its decorators, its comment block and the gap after it
            first = min([first, *(d.lineno - 1 for d in getattr(node, "decorator_list", []))])
            while first > 0 and lines[first - 1].startswith("#"):
                first -= 1
            # The gap after it goes too, unless nothing separates it from what precedes it (`A = 1` right
            # above): then that gap is what keeps `A` apart from what follows.
            while (first == 0 or not lines[first - 1].strip()) and last < len(lines) and not lines[last].strip():
                last += 1
        replaced |= dict.fromkeys(range(first, last), "")
    if not left_out:
        return Trimmed(text, ())
    for node in tree.body:
        if _is_all(node):
            replaced |= _rewritten_all(node, set(left_out))
    kept = "".join(replaced.get(number, line) for number, line in enumerate(lines))
    return Trimmed(kept.rstrip("\n") + "\n", tuple(left_out))


def _rewritten_all(node: Statement, left_out: set[str]) -> dict[int, str]:
    """The lines of a literal `__all__` replaced by one without the names left out (one line when it fits in
    the runtime's 120 columns, else one name per line, as ruff formats it); a computed `__all__` is left alone."""
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    if not isinstance(value, ast.List | ast.Tuple) or not all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return {}
    names = [str(e.value) for e in value.elts if isinstance(e, ast.Constant) and e.value not in left_out]
    first, last = node.lineno - 1, node.end_lineno or node.lineno
    rewritten = "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]\n"
    if len(rewritten) > 121:
        rewritten = "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n"
    return {first: rewritten, **dict.fromkeys(range(first + 1, last), "")}
