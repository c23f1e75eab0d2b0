"""The user's handler module: `build` scaffolds it, never overwrites it, and appends a stub for each new
tool with every existing byte kept; `check` reports missing handlers (FG400) and incompatible
signatures (FG401), and accepts every supported form of handler.

The scaffolding build, the server starting with the scaffold and `check`'s report on broken handlers
run in fresh interpreters (`run_process`). The rest invokes the same Typer app in-process with
CliRunner (`run`): a subprocess costs an interpreter start and fusiongen's imports on top of a build
that formats every generated file with ruff.
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import shutil
import tomllib
from pathlib import Path

import pytest

from tests.support.build import SPECS, importable
from tests.support.processes import run, run_process, run_python

SPEC = SPECS / "billing.toml"
HANDLERS = SPECS / "billing_handlers.py"
PACKAGE = "billing_server"
OLD = 1_000_000_000
OLD_NS = OLD * 10**9
FUNCTION = ast.FunctionDef | ast.AsyncFunctionDef
DIAGNOSTIC = re.compile(r"^(?P<file>\S+):(?P<line>\d+):(?P<col>\d+): error\[(?P<code>FG\d+)\]: (?P<message>.*)$", re.M)


# --- helpers ---------------------------------------------------------------------------------------


def handler_names(spec: Path) -> set[str]:
    """The handler function of every tool and resource in the spec."""
    document = tomllib.loads(spec.read_text(encoding="utf-8"))
    return {table["handler"] for kind in ("tools", "resources") for table in document.get(kind, {}).values()}


def without_function(source: str, name: str) -> str:
    """The module source without one top-level function (and its decorators)."""
    node = next(n for n in ast.parse(source).body if isinstance(n, FUNCTION) and n.name == name)
    lines = source.splitlines(keepends=True)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    assert node.end_lineno is not None
    return "".join(lines[:start] + lines[node.end_lineno :])


def with_signature(source: str, name: str, signature: str) -> str:
    """The module source with the `def` line of one top-level function replaced."""
    new, count = re.subn(rf"^(async )?def {name}\(.*\).*:$", signature, source, count=1, flags=re.M)
    assert count == 1, name
    return new


def spec_position(spec: Path, tool: str) -> tuple[int, int]:
    """Where the tool's table header names it: (line, column of the quoted name), 1-based."""
    for number, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(f'[tools."{tool}"]'):
            return number, line.index(f'"{tool}"') + 1
    raise AssertionError(f"{tool} not in {spec}")


def def_line(source: str, name: str) -> int:
    for number, line in enumerate(source.splitlines(), 1):
        if re.match(rf"(async )?def {name}\(", line):
            return number
    raise AssertionError(name)


def diagnostics(stderr: str) -> set[tuple[str, int, int, str]]:
    return {(m["file"], int(m["line"]), int(m["col"]), m["code"]) for m in DIAGNOSTIC.finditer(stderr)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the reference spec, its handler module and `out/`, built once (in-process)."""
    folder = tmp_path_factory.mktemp("reference")
    shutil.copy(SPEC, folder / "billing.toml")
    shutil.copy(HANDLERS, folder / "billing_handlers.py")
    result = run("build", "billing.toml", "-o", "out", cwd=folder)
    assert result.code == 0, result.stderr
    return folder


def run_handlers(handlers: Path) -> None:
    """Run the handler module with its built server importable beside it, as when the server imports it (the
    reference handlers import `ToolError` from the server's package)."""
    with importable(handlers.parent / "out", modules=("billing_server",)):
        runpy.run_path(str(handlers))


def built(reference: Path, tmp_path: Path, handlers: str | None = None) -> tuple[Path, Path]:
    """A copy of the reference folder (generated paths are relative: it is what a build here writes),
    with another handler module if given; returns (spec, handler module)."""
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
    module = tmp_path / "billing_handlers.py"
    if handlers is not None:
        module.write_bytes(handlers.encode("utf-8"))
    return tmp_path / "billing.toml", module


# --- scaffold -------------------------------------------------------------------------------------


def test_build_scaffolds_a_typed_stub_per_tool_and_the_server_starts_with_it(tmp_path: Path) -> None:
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    proj.mkdir()
    elsewhere.mkdir()
    spec = proj / "billing.toml"
    shutil.copy(SPEC, spec)
    # Run from an unrelated folder: the handler module is looked up beside the spec.
    result = run_process("build", spec, "-o", proj / "out", cwd=elsewhere)
    assert result.code == 0, result.stderr
    assert list(elsewhere.iterdir()) == []
    scaffold = (proj / "billing_handlers.py").read_text(encoding="utf-8")

    compile(scaffold, "billing_handlers.py", "exec")
    functions = {n.name: n for n in ast.parse(scaffold).body if isinstance(n, FUNCTION)}
    assert set(functions) == handler_names(spec)
    # Each stub takes `args`, typed with its own tool's input class from the generated package.
    inputs = ast.parse((proj / "out" / PACKAGE / "inputs.py").read_text(encoding="utf-8"))
    input_classes = {n.name for n in ast.walk(inputs) if isinstance(n, ast.ClassDef)}  # declared for checkers
    annotations = set()
    for name, function in functions.items():
        args = function.args
        assert [a.arg for a in args.args] == ["args"], name
        assert not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg), name
        annotation = args.args[0].annotation
        assert annotation is not None, name
        input_class = ast.unparse(annotation).strip("'\"")  # a name, or a string naming it
        assert input_class in input_classes, name
        annotations.add(input_class)
        assert function.returns is not None, name
    assert len(annotations) == len(functions)
    assert "\r" not in scaffold and scaffold.endswith("\n")

    # The generated server starts with the scaffold, in a fresh interpreter where only OUT is importable:
    # the generated package finds the handler module beside the spec by itself.
    code = f"import sys\nsys.path.insert(0, sys.argv[1])\nimport {PACKAGE}\n{PACKAGE}.create_server()\n"
    started = run_python(["-c", code, proj / "out"], cwd=elsewhere)
    assert started.returncode == 0, started.stderr
    # And `check` accepts the stubs.
    check = run("check", spec, "-o", proj / "out", cwd=elsewhere)
    assert check.code == 0, check.stdout + check.stderr


def test_build_never_overwrites_the_handler_module(reference: Path, tmp_path: Path) -> None:
    spec, handlers = built(reference, tmp_path)
    os.utime(handlers, (OLD, OLD))
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert handlers.read_bytes() == HANDLERS.read_bytes()
    assert handlers.stat().st_mtime_ns == OLD_NS
    assert "billing_handlers.py" not in result.stderr


# --- appending stubs ------------------------------------------------------------------------------

# The reference handlers without the handler of customer.get: as if that tool had just been added.
MISSING_ONE = without_function(HANDLERS.read_text(encoding="utf-8"), "get_customer")
USER_MODULES = {
    "trailing-comments": MISSING_ONE + "\n\n# TODO: customers.\n#   (keep this note where it is)\n",
    "no-final-newline": MISSING_ONE.rstrip("\n"),
    "comment-without-final-newline": MISSING_ONE + "\n# the end",
    "whitespace-only-lines": MISSING_ONE + "\n  \n\t\n# the end\n",
}


@pytest.mark.parametrize("user_module", USER_MODULES.values(), ids=USER_MODULES.keys())
def test_build_appends_the_missing_stub_keeping_every_byte(reference: Path, tmp_path: Path, user_module: str) -> None:
    spec, handlers = built(reference, tmp_path, user_module)
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "appended" in result.stderr

    extended = handlers.read_bytes().decode("utf-8")
    assert extended.startswith(user_module)
    appended = extended[len(user_module) :]
    functions = [n.name for n in ast.parse(extended).body if isinstance(n, FUNCTION)]
    assert functions.count("get_customer") == 1
    assert re.search(r"^def get_customer\(args: \"?\w+Input\"?\) -> ", appended, re.M), appended
    assert not re.search(r"^(async )?def (?!get_customer\()", appended, re.M), appended  # only that stub
    assert "\r" not in extended and extended.endswith("\n")
    run_handlers(handlers)  # still importable (what the server does at start)


def test_a_second_build_appends_nothing(reference: Path, tmp_path: Path) -> None:
    spec, handlers = built(reference, tmp_path, USER_MODULES["trailing-comments"])
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)  # appends the stub
    assert result.code == 0, result.stderr
    extended = handlers.read_bytes()
    assert b"\ndef get_customer(" in extended
    os.utime(handlers, (OLD, OLD))
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert handlers.read_bytes() == extended
    assert handlers.stat().st_mtime_ns == OLD_NS
    assert "billing_handlers.py" not in result.stderr


# Handler modules that once broke `build`.


def test_appended_stubs_keep_a_module_without_future_annotations_importable(reference: Path, tmp_path: Path) -> None:
    user_module = "def get_invoice(args):\n    return {}\n"
    spec, handlers = built(reference, tmp_path, user_module)
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert handlers.read_text(encoding="utf-8").startswith(user_module)
    run_handlers(handlers)  # what the server does at start: import the handler module


def test_appended_stubs_keep_a_module_using_typing_attributes_importable(reference: Path, tmp_path: Path) -> None:
    user_module = (
        "from __future__ import annotations\n\nimport typing\n\n"
        f"if typing.TYPE_CHECKING:\n    from {PACKAGE}.inputs import InvoiceGetInput\n\n\n"
        "def get_invoice(args: InvoiceGetInput) -> typing.Any:\n    return {}\n"
    )
    spec, handlers = built(reference, tmp_path, user_module)
    result = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert handlers.read_text(encoding="utf-8").startswith(user_module)
    run_handlers(handlers)


def test_build_with_an_unparsable_handler_module_is_a_user_error(tmp_path: Path) -> None:
    shutil.copy(SPEC, tmp_path / "billing.toml")
    (tmp_path / "billing_handlers.py").write_text("def get_invoice(args:\n", encoding="utf-8")
    result = run("build", "billing.toml", "-o", "out", cwd=tmp_path)
    assert "internal error" not in result.stderr
    assert result.code == 2, result.stderr
    assert re.search(r"^billing_handlers\.py:\d+:\d+: error\[FG403\]", result.stderr, re.M), result.stderr
    assert not (tmp_path / "out").exists()
    assert (tmp_path / "billing_handlers.py").read_text(encoding="utf-8") == "def get_invoice(args:\n"


# --- check ----------------------------------------------------------------------------------------


def test_check_reports_missing_handlers_and_incompatible_signatures(reference: Path, tmp_path: Path) -> None:
    # The reference handlers, one missing and four that cannot take (args) or (args, ctx).
    source = without_function(HANDLERS.read_text(encoding="utf-8"), "update_invoice")
    source = with_signature(source, "get_invoice", "def get_invoice(a, b, c):")
    source = with_signature(source, "list_invoices", "def list_invoices(args, *, limit):")
    source = with_signature(source, "create_invoice", "async def create_invoice(args, ctx, extra):")
    source = with_signature(source, "get_customer", "def get_customer():")
    spec, _ = built(reference, tmp_path, source)

    result = run_process("check", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert result.stdout == ""  # no drift: only the handlers are wrong
    line, col = spec_position(spec, "invoice.update")
    assert diagnostics(result.stderr) == {
        ("billing.toml", line, col, "FG400"),
        *(
            ("billing_handlers.py", def_line(source, name), 1, "FG401")
            for name in ("get_invoice", "list_invoices", "create_invoice", "get_customer")
        ),
    }, result.stderr
    messages = [f"{m['code']} {m['message']}" for m in DIAGNOSTIC.finditer(result.stderr)]
    assert any("update_invoice" in m for m in messages if m.startswith("FG400")), messages
    assert any("keyword-only" in m for m in messages if "list_invoices" in m), messages


def test_check_reports_a_missing_resource_handler_at_the_resource(reference: Path, tmp_path: Path) -> None:
    source = without_function(HANDLERS.read_text(encoding="utf-8"), "read_invoice")
    spec, _ = built(reference, tmp_path, source)
    result = run_process("check", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 1, result.stderr
    line = next(n for n, text in enumerate(spec.read_text().splitlines(), 1) if text == '[resources."invoice"]')
    assert diagnostics(result.stderr) == {("billing.toml", line, 12, "FG400")}, result.stderr
    assert 'resource "invoice" has no handler "read_invoice"' in result.stderr
    # build appends its stub, typed with the resource's input class.
    built_again = run("build", spec.name, "-o", "out", cwd=tmp_path)
    assert built_again.code == 0, built_again.stderr
    appended = (tmp_path / "billing_handlers.py").read_text(encoding="utf-8")[len(source) :]
    assert re.search(r'^def read_invoice\(args: "InvoiceResourceInput"\) -> Any:', appended, re.M), appended
    assert "None: there is nothing at that URI." in appended


def test_check_accepts_every_supported_handler_form(reference: Path, tmp_path: Path) -> None:
    (tmp_path / "invoices_impl.py").write_text("def fetch_invoice(args):\n    return {}\n", encoding="utf-8")
    # The reference handlers: one bound by import, the others sync or async, with (args) or (args, ctx).
    source = without_function(HANDLERS.read_text(encoding="utf-8"), "get_invoice")
    source += "\n\nfrom invoices_impl import fetch_invoice as get_invoice  # noqa: E402\n"
    source = with_signature(source, "list_invoices", "def list_invoices(args):")
    source = with_signature(source, "create_invoice", "async def create_invoice(args) -> Any:")
    source = with_signature(source, "update_invoice", "async def update_invoice(args, ctx):")
    source = with_signature(source, "get_customer", "def get_customer(args, ctx, *, verbose=False):")
    spec, _ = built(reference, tmp_path, source)
    # EXPOSURE.md lists what each handler can do (the imported one: unknown), so the build follows the module.
    assert run("build", spec.name, "-o", "out", cwd=tmp_path).code == 0
    assert "invoices_impl.fetch_invoice (bound here, not analysed)" in (tmp_path / "out" / "EXPOSURE.md").read_text()

    result = run("check", spec.name, "-o", "out", cwd=tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    assert "error" not in result.stdout + result.stderr


TRICKY_MODULE = '''"""Handlers."""
# a comment
import json; import os
from typing import (Any,
   TYPE_CHECKING as CHECKING)


@decorated
@decorated_too(
    1)
# between the decorators and the def
def first(args: Any) -> Any:
    pass
# comment
LIMIT = 1; SHAPES: dict[str, int] = {}
if CHECKING:
    from x import y
else:
    y = None

async def second(args): pass
class Helper:
    pass
def third(args): return json, os
'''


@pytest.mark.parametrize("module", ["tricky", "billing", "approval"])
def test_definition_lines_from_cpython_are_libcsts(module: str) -> None:
    """`check` and `build` place handler diagnostics by CPython's line numbers (a large API's handler module:
    libcst's positions took seconds); they must be the lines libcst's PositionProvider gives, decorators,
    comments, semicolons and compound statements included."""
    import libcst

    from fusiongen.scaffold.handlers import _definitions

    sources = {
        "tricky": TRICKY_MODULE,
        "billing": HANDLERS.read_text(encoding="utf-8"),
        "approval": (SPECS / "approval_server_handlers.py").read_text(encoding="utf-8"),
    }
    source = sources[module]
    parsed = libcst.parse_module(source)
    by_libcst, by_cpython = _definitions(parsed), _definitions(parsed, source)
    assert by_cpython == by_libcst
    if module == "tricky":  # only from-imports, functions and assignments bind a handler name
        lines = {name: d.position.line for name, d in by_cpython.items()}
        assert lines == {"Any": 4, "CHECKING": 4, "first": 12, "LIMIT": 15, "SHAPES": 15, "second": 21, "third": 24}
