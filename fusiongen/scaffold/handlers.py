"""The user's handler module: scaffold it, append stubs for new tools, and check it statically.

The handler module is the one user-owned file fusiongen ever writes: it creates it when it does not
exist and otherwise only appends stubs for tools that have none, through libcst, so every existing
byte of the user's code stays as it was. `check` reads it with libcst too, never by importing it:
importing would run the user's code.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider

from fusiongen.diagnostics import Diagnostic, Position, Severity
from fusiongen.ir import ServerIR, ToolIR
from fusiongen.names import pascal_case
from fusiongen.pyliteral import docstring_text, py_string

# The code a scaffolded stub raises. A ToolError is a domain error: the call failed before doing anything, so a
# bound tool's transition neither fires nor waits in doubt (docs/spec.md §10.7), and `check` names every
# handler still raising it (FG411).
STUB_CODE = "NOT_IMPLEMENTED"


def handler_path(spec_dir: Path, module: str) -> Path:
    """Where the handler module lives: beside the spec (`a.b` → `a/b.py`, or a package `a/b/__init__.py`)."""
    base = spec_dir.joinpath(*module.split("."))
    package_init = base / "__init__.py"
    return package_init if package_init.exists() else base.with_suffix(".py")


def _input_class(tool: ToolIR) -> str:
    return f"{pascal_case(tool.ident)}Input"


def _stub(tool: ToolIR, *, quoted: bool = False) -> str:
    summary = docstring_text((tool.description or tool.name).split("\n")[0])
    if tool.returns_text:
        returns = "Return the text the agent reads (a str)."
    elif tool.returns is None:
        returns = 'Return None (the agent reads "done.") or a str the agent reads; nothing else is shown.'
    elif tool.returns.collection:
        returns = f"Return a list of {tool.returns.presenter} items (dicts, pydantic models, dataclasses or objects)."
    else:
        returns = f"Return one {tool.returns.presenter} (a dict, a pydantic model, a dataclass or an object)."
    if tool.resource:
        returns += " None: there is nothing at that URI."
    return (
        f"def {tool.handler}(args: {_quoted(_input_class(tool)) if quoted else _input_class(tool)}) -> Any:\n"
        f'    """{tool.name}: {summary}\n\n'
        f"    {returns}\n"
        f'    """\n'
        f"    raise ToolError({py_string(STUB_CODE)}, {py_string(_stub_message(tool))})\n"
    )


def _stub_message(tool: ToolIR) -> str:
    return f"{tool.name} is not implemented yet: nothing was done."


def _quoted(name: str) -> str:
    return f'"{name}"'


def _imports(ir: ServerIR, tools: list[ToolIR]) -> str:
    names = "".join(f"        {name},\n" for name in sorted(_input_class(t) for t in tools))
    return f"if TYPE_CHECKING:\n    from {ir.package}.inputs import (\n{names}    )\n"


def scaffold(ir: ServerIR) -> str:
    """A new handler module with a typed stub per tool."""
    tools = list(ir.handled)
    stubs = "\n\n".join(_stub(t) for t in tools)
    return (
        f'"""Handlers of the {ir.name} MCP server.\n\n'
        "Scaffolded by fusiongen: this file is yours. fusiongen never overwrites it; when tools are added\n"
        "to the spec, `fusiongen build` appends a stub for each at the end.\n"
        "A handler gets the validated arguments (and, if it takes a second parameter, the request context).\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import TYPE_CHECKING, Any\n\n"
        + (f"from {ir.package} import ToolError\n\n" if tools else "")
        + (_imports(ir, tools) if tools else "")
        + ("\n\n" + stubs if stubs else "")
    )


@dataclass(frozen=True)
class _Definition:
    name: str
    position: Position
    function: libcst.FunctionDef | None  # None: bound some other way (import, assignment)


def _definitions(module: libcst.Module, source: str | None = None) -> dict[str, _Definition]:
    """The names `module` binds at top level, each with where its statement starts (a function: its `def`
    line). Given the module's `source`, the lines are CPython's parser's (a large module: a fraction of the time
    libcst's positions take); without, or where the two parsers do not see the same statements, libcst's."""
    lines = _statement_lines(module, source) if source is not None else None
    if lines is None:
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        lines = {id(statement): positions[statement].start.line for statement in module.body}
    found: dict[str, _Definition] = {}

    def add(name: str, node: libcst.CSTNode, function: libcst.FunctionDef | None) -> None:
        found[name] = _Definition(name, Position(lines[id(node)], 1), function)  # top level: column 1

    for statement in module.body:
        if isinstance(statement, libcst.FunctionDef):
            add(statement.name.value, statement, statement)
        elif isinstance(statement, libcst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, libcst.ImportFrom) and not isinstance(small.names, libcst.ImportStar):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        if isinstance(bound, libcst.Name):
                            add(bound.value, statement, None)
                elif isinstance(small, libcst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, libcst.Name):
                            add(target.target.value, statement, None)
                elif (
                    isinstance(small, libcst.AnnAssign)
                    and small.value is not None
                    and isinstance(small.target, libcst.Name)
                ):
                    add(small.target.value, statement, None)  # `SHAPES: dict[...] = {}` binds it too
    return found


def _statement_lines(module: libcst.Module, source: str) -> dict[int, int] | None:
    """The line each top-level statement of `module` (parsed from `source`) starts on, by `id`, as CPython's
    parser reads `source`: a function's `def` line (after its decorators), a simple statement line's first
    statement. None when CPython does not parse it or does not count the same statements."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines: dict[int, int] = {}
    index = 0
    for statement in module.body:
        if index >= len(tree.body):
            return None
        lines[id(statement)] = tree.body[index].lineno
        index += len(statement.body) if isinstance(statement, libcst.SimpleStatementLine) else 1
    return lines if index == len(tree.body) else None


def bound_names(source: str) -> frozenset[str] | None:
    """The names `_definitions` finds, read with CPython's parser (a large module: a tenth of libcst's
    time), or None if it does not parse there (then libcst reads it, and reports why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(statement.name)
        elif isinstance(statement, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in statement.names if alias.name != "*")
        elif isinstance(statement, ast.Assign):
            names.update(target.id for target in statement.targets if isinstance(target, ast.Name))
        elif (
            isinstance(statement, ast.AnnAssign)
            and statement.value is not None
            and isinstance(statement.target, ast.Name)
        ):
            names.add(statement.target.id)
    return frozenset(names)


def top_level_names(module: libcst.Module) -> frozenset[str]:
    """The names a module binds at top level (functions, imports, assignments): what it already defines."""
    return frozenset(_definitions(module))


def _imported_from_typing(module: libcst.Module) -> set[str]:
    """Names the module binds at top level with `from typing import ...` (or typing_extensions)."""
    names: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, libcst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, libcst.ImportFrom)
                and isinstance(small.module, libcst.Name)
                and small.module.value in ("typing", "typing_extensions")
                and not isinstance(small.names, libcst.ImportStar)
            ):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    if isinstance(bound, libcst.Name):
                        names.add(bound.value)
    return names


def parse_handlers(source: str, handler_file: str) -> libcst.Module | Diagnostic:
    """The handler module as libcst reads it, or FG403."""
    try:
        return _parsed(source)
    except libcst.ParserSyntaxError as exc:
        return Diagnostic(
            "FG403",
            f"handler module does not parse: {exc.message}",
            handler_file,
            Position(exc.editor_line, exc.editor_column),
            hint="fix it, then build again",
        )


@functools.lru_cache(maxsize=4)
def _parsed(source: str) -> libcst.Module:
    """`source` read by libcst once: a build reads the handler module for its effects, its stubs and its
    signatures (a large API's is thousands of lines; libcst trees are immutable, so sharing one is safe)."""
    return libcst.parse_module(source)


def append_stubs(source: str, ir: ServerIR) -> str | None:
    """The module with stubs appended for tools that have no handler yet; None when none is missing.

    The stubs are built and checked with libcst and added after the user's last byte, so every existing
    byte stays as it was. Their annotations are strings: the module may not use postponed annotations.
    """
    module = _parsed(source)
    defined = _definitions(module, source)
    missing = [t for t in ir.handled if t.handler not in defined]
    if not missing:
        return None
    typing_names = _imported_from_typing(module)
    block = "# Stubs appended by `fusiongen build` for tools added to the spec.\n"
    needed = sorted({"TYPE_CHECKING", "Any"} - typing_names)
    if needed:
        block += f"from typing import {', '.join(needed)}  # noqa: E402\n"
    if "ToolError" not in defined:
        block += f"from {ir.package} import ToolError  # noqa: E402\n"
    block += "\n"
    block += _imports(ir, missing) + "\n\n" + "\n\n".join(_stub(t, quoted=True) for t in missing)
    libcst.parse_module(block)  # the block itself is valid Python
    separator = "" if source.endswith("\n") or not source else "\n"
    text = source + separator + "\n\n" + block
    libcst.parse_module(text)  # and so is the module with it
    return text


def check_handlers(
    source: str, ir: ServerIR, handler_file: str, tool_position: dict[str, tuple[str, Position]]
) -> list[Diagnostic]:
    """Every tool or resource whose handler is missing, or whose signature cannot take `(args)` or
    `(args, ctx)`. `tool_position` is keyed by `ToolIR.label`: the spec file (as shown) and where in it."""
    module = parse_handlers(source, handler_file)
    if isinstance(module, Diagnostic):
        return [module]
    defined = _definitions(module, source)
    found: list[Diagnostic] = []
    for tool in ir.handled:
        definition = defined.get(tool.handler)
        if definition is None:
            found.append(
                Diagnostic(
                    "FG400",
                    f'{tool.label} has no handler "{tool.handler}" in {handler_file}',
                    *tool_position[tool.label],
                    hint="run `fusiongen build` to append a stub, then implement it",
                )
            )
            continue
        if definition.function is not None:
            problem = _signature_problem(definition.function)
            if problem:
                found.append(
                    Diagnostic(
                        "FG401",
                        f'handler "{tool.handler}" of {tool.label} {problem}',
                        handler_file,
                        definition.position,
                        hint="a handler takes (args) or (args, ctx)",
                    )
                )
            stub = _stub_raise(definition.function)
            if stub is not None:
                found.append(
                    Diagnostic(
                        "FG411",
                        f'handler "{tool.handler}" of {tool.label} is still a stub: it only raises {stub}',
                        handler_file,
                        definition.position,
                        Severity.WARNING,
                        hint="implement it; until then every call fails and does nothing",
                    )
                )
            if _yields(definition.function):
                kind = "an async generator" if definition.function.asynchronous else "a generator"
                found.append(
                    Diagnostic(
                        "FG410",
                        f'handler "{tool.handler}" of {tool.label} is {kind} function: '
                        "calling it would not run its body",
                        handler_file,
                        definition.position,
                        hint="return the result instead of yielding it (use `async def` for async code)",
                    )
                )
    return found


def _stub_raise(function: libcst.FunctionDef) -> str | None:
    """What a handler that is still a stub raises: its body (after a docstring) is one `raise` of
    `ToolError("NOT_IMPLEMENTED", ...)`, as `build` scaffolds it, or of `NotImplementedError` (how earlier
    versions scaffolded it); None for any other body."""
    if isinstance(function.body, libcst.IndentedBlock):
        statements = list(function.body.body)
        if statements and _is_docstring(statements[0]):
            statements = statements[1:]
        if len(statements) != 1 or not isinstance(statements[0], libcst.SimpleStatementLine):
            return None
        line = statements[0].body
    elif isinstance(function.body, libcst.SimpleStatementSuite):  # `def f(args): raise ...` on one line
        line = function.body.body
    else:
        return None
    if len(line) != 1 or not isinstance(line[0], libcst.Raise) or line[0].exc is None:
        return None
    raised = line[0].exc
    called = raised.func if isinstance(raised, libcst.Call) else raised
    if isinstance(called, libcst.Name) and called.value == "NotImplementedError":
        return "NotImplementedError"
    if (
        isinstance(raised, libcst.Call)
        and isinstance(called, libcst.Name)
        and called.value == "ToolError"
        and raised.args
        and isinstance(raised.args[0].value, libcst.SimpleString)
        and raised.args[0].value.evaluated_value == STUB_CODE
    ):
        return f"ToolError({STUB_CODE})"
    return None


def _is_docstring(statement: libcst.BaseStatement) -> bool:
    return (
        isinstance(statement, libcst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], libcst.Expr)
        and isinstance(statement.body[0].value, libcst.SimpleString | libcst.ConcatenatedString)
    )


class _YieldFinder(libcst.CSTVisitor):
    """Finds a `yield` of the function itself, not of a function, lambda or class nested in it."""

    def __init__(self) -> None:
        self.found = False

    def visit_Yield(self, node: libcst.Yield) -> bool:
        self.found = True
        return False

    def visit_FunctionDef(self, node: libcst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: libcst.Lambda) -> bool:
        return False

    def visit_ClassDef(self, node: libcst.ClassDef) -> bool:
        return False


def _yields(function: libcst.FunctionDef) -> bool:
    """Whether the handler is a generator (or async generator) function: its body holds a `yield`.

    A decorated one is not judged: the decorator may well turn the generator into a result (the run-time
    check in `_runtime.settle` still refuses a generator that reaches it).
    """
    if function.decorators:
        return False
    finder = _YieldFinder()
    function.body.visit(finder)
    return finder.found


def _signature_problem(function: libcst.FunctionDef) -> str | None:
    params = function.params
    positional = [*params.posonly_params, *params.params]
    required = [p for p in positional if p.default is None]
    star = params.star_arg
    if any(p.default is None for p in params.kwonly_params):
        return "has required keyword-only parameters"
    if len(required) > 2:
        return f"requires {len(required)} positional parameters"
    if not positional and not isinstance(star, libcst.Param):
        return "takes no positional parameter for the arguments"
    return None
