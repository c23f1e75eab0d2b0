"""Hostile specs: fusiongen answers every spec with diagnostics or a build, never with a traceback.

Hypothesis writes TOML documents from the spec grammar (servers, models with fields of every type and
key, hidden/guarded/fillable/casts, presenters with rules, UI blocks, suggestions, redactions and
embeds, inline and XState workflows, tools with input/input_from/returns/bind_state), in varied TOML
syntax (header tables, inline tables, dotted keys, arrays of tables, every string style, comments),
then damages them: wrong value types, unknown keys, dropped keys, dangling references, bad names,
broken expressions, huge and deeply nested values, duplicated tables, truncated text, random bytes,
non-UTF-8 encodings.

The contract checked in-process (fast): `validate` either succeeds or raises `SpecError` whose every
diagnostic prints as `file:line:col: severity[FGnnn]: message` (plus `  hint:` lines), with a known code
and a position inside the file. For specs that validate, the generated files must be valid Python
(render + compile on every valid example; the full `generate` with ruff, an import of the package and
a `tools/list` on a sample) and a valid `pyproject.toml`. A few CLI runs check the exit-code contract.

The strategies (TOML writer, grammar, damage) live in tests/support/spec_strategies.py. Bugs found by this file
are pinned at the end, each named for what it pins: an open one as an `xfail(strict=True)` test that the
properties recognise and skip (`KNOWN_EXCEPTIONS`) so they keep hunting for new ones; fixed ones as regression
tests (`test_fixed_*`). When a bug is fixed, its strict xfail fails: rename it `test_fixed_*` and drop its
recognition. Validation's cost is counted in calls (`check_work`), never timed.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import traceback
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fusiongen.api import display_path, generate, publish, validate
from fusiongen.codegen.render import render
from fusiongen.diagnostics import CODES, Diagnostic, Severity, SpecError
from fusiongen.ir import ServerIR
from fusiongen.scaffold.handlers import scaffold
from tests.support import build
from tests.support.client import tool_names
from tests.support.processes import start_process
from tests.support.spec_strategies import Files, damaged_documents, damaged_texts, same, spec_documents, write_toml
from tests.support.work import calls_made, work_at

SPEC_NAME = "spec.toml"

# No "explain" phase: on a failure it replays hundreds of variations, minutes for little insight here.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)
SLOW_OK = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]

# How many examples each property runs (≥ 2,000 in total).
VALID_EXAMPLES = 520
STRUCTURAL_EXAMPLES = 600
TEXT_EXAMPLES = 840
GENERATE_EXAMPLES = 20
CLI_EXAMPLES = 20  # CLI runs, CLI_BATCH processes at a time
CLI_BATCH = 4
# The work one in-process validate may do, however hostile the spec, in Python function calls (counted, not
# timed, so a loaded machine cannot fail it): a fixed part plus a part per byte of the spec and its machine files.
# The fuzzed specs need at most ~260,000 calls and ~115 per byte; a walk quadratic in a 100 kB value ~10^10.
WORK_BASE = 1_000_000
WORK_PER_BYTE = 1_000
LINEAR = 2.5  # how much more work twice the input may cost: about twice (a quadratic walk costs four times)

STATS: Counter[str] = Counter()  # what the properties saw; printed by `-s` at the end of the module

# --- the contract ---------------------------------------------------------------------------------------

DIAGNOSTIC_LINE = re.compile(
    r"(?P<file>[^\n]+?):(?P<line>[1-9][0-9]*):(?P<col>[1-9][0-9]*): "
    r"(?P<severity>error|warning)\[(?P<code>FG[0-9]{3})\]: (?P<message>[^\n]+)\Z"
)
HINT_LINE = re.compile(r"  hint: [^\n]*\Z")
WARNING_CODES = {"FG161", "FG172", "FG175", "FG176", "FG179", "FG188", "FG189"}


def _raised_in(exc: BaseException, function: str) -> bool:
    return any(frame.name == function for frame in traceback.extract_tb(exc.__traceback__))


# Exceptions from validate that are open bugs, pinned by a `test_known_bug_*` test: (name, predicate).
KNOWN_EXCEPTIONS: list[tuple[str, Callable[[BaseException], bool]]] = []  # none open now


def known_exception(exc: BaseException) -> str | None:
    return next((name for name, matches in KNOWN_EXCEPTIONS if matches(exc)), None)


def check_diagnostics(diagnostics: list[Diagnostic], raw: bytes, spec_file: str, *, errors: bool) -> None:
    """Every diagnostic prints in the documented form, with a known code and a position inside its file."""
    if errors:
        assert diagnostics, "SpecError without diagnostics"
        assert any(d.is_error for d in diagnostics), "SpecError carrying only warnings"
    else:
        assert all(d.severity is Severity.WARNING and d.code in WARNING_CODES for d in diagnostics), diagnostics
    lines = raw.split(b"\n")
    for diagnostic in diagnostics:
        assert diagnostic.code in CODES, diagnostic
        assert diagnostic.message.strip(), diagnostic
        assert diagnostic.position.line >= 1 and diagnostic.position.col >= 1, diagnostic
        if diagnostic.file == spec_file:
            assert diagnostic.position.line <= len(lines) + 1, (diagnostic, len(lines))
        else:  # besides the spec, only the XState machine files it reads are named
            assert Path(diagnostic.file).is_file() and diagnostic.code.startswith("FG17"), diagnostic
        text = diagnostic.format().split("\n")
        assert DIAGNOSTIC_LINE.match(text[0]), text
        assert all(HINT_LINE.match(line) for line in text[1:]), text


def write_spec(workdir: Path, raw: bytes, files: Files) -> Path:
    return build.write_spec(workdir, raw, name=SPEC_NAME, files=files)


def clean_workdir(workdir: Path) -> None:
    for path in sorted(workdir.rglob("*"), reverse=True):
        if path.is_file():
            path.unlink()
        elif path.is_dir() and path.name != "out":
            with contextlib.suppress(OSError):
                path.rmdir()


def outcome(workdir: Path, raw: bytes, files: Files) -> tuple[str, ServerIR | None, list[Diagnostic]]:
    """Validate `workdir/spec.toml` in-process: "valid" (with its IR and warnings), "invalid" (SpecError, its
    diagnostics checked), or "known: <bug>" for a pinned bug; any other exception propagates: a failure."""
    clean_workdir(workdir)
    spec = write_spec(workdir, raw, files)
    shown = display_path(spec)
    result, calls = calls_made(validate, spec)
    if isinstance(result, SpecError):
        check_work(calls, raw, files)
        check_diagnostics(result.diagnostics, raw, shown, errors=True)
        return "invalid", None, result.diagnostics
    if isinstance(result, BaseException):
        name = known_exception(result)
        if name is None:
            raise result
        return f"known: {name}", None, []
    _, ir, warnings = result
    check_work(calls, raw, files)
    check_diagnostics(warnings, raw, shown, errors=False)
    return "valid", ir, warnings


def check_work(calls: int, raw: bytes, files: Files) -> None:
    """Hostile input must not make validation slow (the specs here are at most a few hundred kilobytes): its
    work, counted in calls, stays linear in the input's size."""
    size = len(raw) + sum(len(content) for content in files.values())
    budget = WORK_BASE + WORK_PER_BYTE * size
    STATS["work: most calls per byte"] = max(STATS["work: most calls per byte"], calls // max(size, 1))
    STATS["work: most calls"] = max(STATS["work: most calls"], calls)
    assert calls <= budget, f"validate made {calls:,} calls for {size:,} bytes (budget {budget:,})"


def check_rendered(ir: ServerIR) -> None:
    """The generated tree (before formatting) and the handler module `build` scaffolds are valid Python, and the
    pyproject.toml is valid TOML."""
    rendered, copied = render(ir, spec_from_out="../spec.toml", handlers_dir_from_package="../..")
    files = {**rendered, **copied}
    for path, text in files.items():
        if path.endswith(".py"):
            compile(text, path, "exec")
    project = tomli.loads(files["pyproject.toml"])["project"]
    assert project["version"] == ir.version
    compile(scaffold(ir), "handlers.py", "exec")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("fuzz_specs")
    yield path
    if STATS:
        print("\nspec fuzzing:", dict(sorted(STATS.items())))


def record(result: str) -> None:
    STATS[result] += 1


# --- properties -----------------------------------------------------------------------------------------


@settings(max_examples=VALID_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_specs_from_the_grammar_validate_or_get_diagnostics(workdir: Path, data: st.DataObject) -> None:
    doc, files = data.draw(spec_documents())
    raw = write_toml(data.draw, doc).encode("utf-8")
    assert same(tomli.loads(raw.decode("utf-8")), doc)  # the writer says what the generator meant
    result, ir, _ = outcome(workdir, raw, files)
    record(f"grammar: {result}")
    if ir is not None:
        check_rendered(ir)
        record("grammar: rendered")


@settings(max_examples=STRUCTURAL_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_damaged_documents_get_diagnostics(workdir: Path, data: st.DataObject) -> None:
    doc, files = data.draw(damaged_documents())
    raw = write_toml(data.draw, doc).encode("utf-8")
    result, ir, _ = outcome(workdir, raw, files)
    record(f"structural: {result}")
    if ir is not None:
        check_rendered(ir)


@settings(max_examples=TEXT_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(case=damaged_texts())
def test_damaged_text_and_bytes_get_diagnostics(workdir: Path, case: tuple[bytes, Files]) -> None:
    raw, files = case
    result, ir, _ = outcome(workdir, raw, files)
    record(f"text: {result}")
    if ir is not None:
        check_rendered(ir)


def stub_handlers(ir: ServerIR) -> types.ModuleType:
    module = types.ModuleType("fuzz_stub_handlers")
    for tool in ir.handled:
        setattr(module, tool.handler, lambda args: None)
    return module


@settings(max_examples=GENERATE_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_valid_specs_generate_a_server_that_imports_and_lists_its_tools(workdir: Path, data: st.DataObject) -> None:
    doc, files = data.draw(spec_documents(clean=True))
    raw = write_toml(data.draw, doc).encode("utf-8")
    result, ir, _ = outcome(workdir, raw, files)
    record(f"generate: {result}")
    if ir is None:
        return
    out = workdir / "out"
    generation = generate(workdir / SPEC_NAME, out)  # ruff-formatted and parse-checked
    for path, text in generation.files.items():
        if path.endswith(".py"):
            compile(text, path, "exec")
    assert tomli.loads(generation.files["pyproject.toml"])["project"]["version"] == ir.version
    publish(generation, out)
    with build.imported(out, ir.package) as package:
        server = package.create_server(stub_handlers(ir))
        # served under their wire names ([server] tool_names; "snake" unless the spec says "dotted")
        workflows = {w.name: w for w in ir.workflows}
        generated = {name for w in ir.workflows for name in (w.start_tool, w.status_tool)}
        # <workflow>_resolve, for a workflow with a transition whose tool refuses to run again in doubt
        generated |= {
            workflows[t.binding.workflow].resolve_tool
            for t in ir.tools
            if t.binding and t.binding.transition and not t.binding.retry_in_doubt
        }
        everything = {t.wire for t in ir.tools} | generated
        modern = anyio.run(tool_names, server, "2026-07-28")
        assert sorted(modern) == sorted(everything)
        if ir.tool_names == "snake":
            assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in modern), modern
        legacy = set(anyio.run(tool_names, server, "legacy"))  # a fresh session: the stable list (§10.6)
        # every tool a caller without roles or scopes may see, bound or not, and nothing else
        assert {t.wire for t in ir.tools if t.requires is None} | generated <= legacy <= everything
    record("generate: imported")


@st.composite
def cli_cases(draw: Any) -> tuple[bytes, Files, bool]:
    kind = draw(st.sampled_from(("grammar", "structural", "text")))
    if kind == "text":
        raw, files = draw(damaged_texts())
    else:
        doc, files = draw(damaged_documents() if kind == "structural" else spec_documents())
        raw = write_toml(draw, doc).encode("utf-8")
    return raw, files, draw(st.booleans())


# No shrinking: every step would start CLI_BATCH processes; the in-process properties shrink the same inputs.
@settings(
    max_examples=CLI_EXAMPLES // CLI_BATCH,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=SLOW_OK,
)
@given(cases=st.lists(cli_cases(), min_size=CLI_BATCH, max_size=CLI_BATCH))
def test_cli_exit_codes_and_output(workdir: Path, cases: list[tuple[bytes, Files, bool]]) -> None:
    """`fusiongen validate` as a process (a few at once): the exit code says what validate said in-process."""
    runs = []
    for index, (raw, files, as_json) in enumerate(cases):
        directory = workdir / f"cli{index}"
        directory.mkdir(exist_ok=True)
        result, _, diagnostics = outcome(directory, raw, files)
        args = ("validate", SPEC_NAME, *(["--format", "json"] if as_json else []))
        runs.append((result, diagnostics, as_json, start_process(*args, cwd=directory)))
    for result, diagnostics, as_json, process in runs:
        stdout, stderr = process.communicate(timeout=120)
        record(f"cli: {result} -> exit {process.returncode}")
        check_cli(result, diagnostics, as_json, process.returncode, stdout, stderr)


def check_cli(result: str, diagnostics: list[Diagnostic], as_json: bool, code: int, stdout: str, stderr: str) -> None:
    expected = {"valid": 0, "invalid": 2}.get(result, 3)  # 3 only for a pinned bug
    assert code == expected, (result, stderr[-2000:])
    if expected == 3:
        return
    assert "Traceback" not in stderr and "internal error" not in stderr
    lines = [line for line in stderr.split("\n") if line]
    errors = sum(d.is_error for d in diagnostics)
    if as_json:
        found = json.loads(stdout)
        assert isinstance(found, list) and len(found) == len(diagnostics)
        for item in found:
            assert set(item) == {"file", "line", "col", "severity", "code", "message", "hint"}
            assert item["code"] in CODES and item["line"] >= 1 and item["col"] >= 1
        assert lines == ([f"{errors} error(s); nothing was written."] if expected == 2 else []), lines
        return
    assert not stdout
    if expected == 2:
        assert lines[-1] == f"{errors} error(s); nothing was written.", lines
        lines = lines[:-1]
    assert len([line for line in lines if DIAGNOSTIC_LINE.match(line)]) == len(diagnostics), lines
    assert all(DIAGNOSTIC_LINE.match(line) or HINT_LINE.match(line) for line in lines), lines


# --- bugs found by the properties above ----------------------------------------------------------------


def _validate_text(workdir: Path, text: str | bytes, files: Files | None = None) -> list[Diagnostic]:
    """Validate a spec; return its diagnostics (warnings if valid). Any other exception propagates."""
    clean_workdir(workdir)
    spec = write_spec(workdir, text.encode("utf-8") if isinstance(text, str) else text, files or {})
    try:
        return validate(spec)[2]
    except SpecError as exc:
        return exc.diagnostics


def _generate_text(workdir: Path, text: str) -> dict[str, str]:
    """Generate a spec; the generated Python must compile (what importing the server needs)."""
    clean_workdir(workdir)
    spec = write_spec(workdir, text.encode("utf-8"), {})
    files = generate(spec, workdir / "out").files
    for path, source in files.items():
        if path.endswith(".py"):
            compile(source, path, "exec")
    return files


def _docstring(source: str, function: str) -> str | None:
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == function)
    return ast.get_docstring(node)


MACHINE_SPEC = '[server]\nname = "m"\n[workflows.w]\nmachine = "m.json"\n'
MODEL_SPEC = (
    '[server]\nname = "a"\n[models.M]\ndescription = {}\nfields = {{ a = "string" }}\n[tools.t]\nreturns = "M"\n'
)


# Fixed since they were found (b203665): kept as regression tests.


@pytest.mark.parametrize(
    "content",
    [b'{"states": {"\xff": {}}}', b"[" * 100_000 + b"]" * 100_000],
    ids=["not UTF-8", "nested 100,000 levels"],
)
def test_fixed_hostile_machine_file_is_fg173(workdir: Path, content: bytes) -> None:
    """Was an internal error (UnicodeDecodeError, RecursionError in lower_workflows.load_machine)."""
    assert any(d.code == "FG173" for d in _validate_text(workdir, MACHINE_SPEC, {"m.json": content}))


def test_fixed_machine_path_with_nul_is_fg173(workdir: Path) -> None:
    """Was an internal error (ValueError: embedded null byte)."""
    assert any(d.code == "FG173" for d in _validate_text(workdir, MACHINE_SPEC.replace("m.json", "m\\u0000.json")))


@pytest.mark.parametrize("description", ['ends with a quote"', 'has """ inside', "C:\\Users\\x", "nul \x00"])
def test_fixed_model_description_is_a_safe_docstring(workdir: Path, description: str) -> None:
    """Was pasted raw into docstrings: exit 3 (the code did not parse), or a server that could not be imported."""
    files = _generate_text(workdir, MODEL_SPEC.format(json.dumps(description)))
    assert _docstring(files["a_server/shapes.py"], "shape_m") == description


@pytest.mark.parametrize("default", ["nan", "inf", "-inf", "[1.0, nan]", "{ d = 2024-01-01 }"])
def test_fixed_defaults_that_are_not_json_are_fg114(workdir: Path, default: str) -> None:
    """Were accepted, then rendered as the bare names nan/inf (NameError on import) or failed to render (exit 3)."""
    kind = "M" if default.startswith("{") else "list" if default.startswith("[") else "number"
    text = (
        '[server]\nname = "a"\n[models.M]\nfields = { d = "date" }\n'
        f'[tools.t]\ninput = {{ x = {{ type = "{kind}", items = "number", default = {default} }} }}\n'
    )
    if kind != "list":
        text = text.replace('items = "number", ', "")
    assert [d.code for d in _validate_text(workdir, text) if d.is_error] == ["FG114"]


def test_fixed_version_with_del_keeps_pyproject_valid(workdir: Path) -> None:
    """U+007F was copied raw into pyproject.toml, which TOML forbids."""
    files = _generate_text(workdir, '[server]\nname = "a"\nversion = "1.0\\u007f"\n[tools.t]\n')
    assert tomli.loads(files["pyproject.toml"])["project"]["version"] == "1.0\x7f"


def test_fixed_diagnostic_message_stays_on_one_line(workdir: Path) -> None:
    """A message quoting a name with a line break (a quoted TOML key) printed on several lines."""
    diagnostics = _validate_text(workdir, '[server]\nname = "a"\n[tools."a\\nb"]\n')
    assert diagnostics and all(DIAGNOSTIC_LINE.match(d.format().split("\n")[0]) for d in diagnostics)


# Found later by the properties above, all fixed now; each stays as a regression test.


def test_fixed_hint_quoting_a_multiline_name_stays_on_hint_lines(workdir: Path) -> None:
    """A hint quoting a model name with a line break (a quoted TOML key) spilled onto lines that were neither the
    diagnostic nor `  hint:` lines."""
    diagnostics = _validate_text(workdir, '[server]\nname = "h"\n[models."A\\nB"]\nfields = { x = "A\\nC" }\n')
    assert any(d.code == "FG110" for d in diagnostics)
    for diagnostic in diagnostics:
        head, *hints = diagnostic.format().split("\n")
        assert DIAGNOSTIC_LINE.match(head) and all(HINT_LINE.match(h) for h in hints), diagnostic.format()


def test_fixed_backslash_n_in_a_description_stays_literal_in_the_docstring(workdir: Path) -> None:
    """A description holding a backslash and an n (a Windows path) became a line break in the shape docstring."""
    files = _generate_text(workdir, MODEL_SPEC.format(json.dumps("C:\\Users\\new")))
    assert _docstring(files["a_server/shapes.py"], "shape_m") == "C:\\Users\\new"


def _many_placeholders(workdir: Path, count: int) -> list[Diagnostic]:
    rule = "{a}" * count
    return _validate_text(
        workdir, f'[server]\nname = "q"\n[presenters.P]\nschema = {{ b = "string" }}\nrules = ["{rule}"]\n'
    )


def test_fixed_many_diagnostics_in_one_string_cost_linear_work(workdir: Path) -> None:
    """Every diagnostic in one string re-decoded the string to find its position: quadratic in the count.

    Counted in calls, not timed: twice the placeholders may cost at most about twice the work."""
    assert len(_many_placeholders(workdir, 3_000)) == 3_000
    small, large = work_at(lambda count: _many_placeholders(workdir, count), 1_500)
    assert large <= LINEAR * small, (small, large)


def _embed_chain(workdir: Path, count: int) -> list[Diagnostic]:
    presenters = "".join(
        f'[presenters.P{i}]\nmodel = "M"\n' + (f'embed = {{ a = "P{i - 1}", b = "P{i - 2}" }}\n' if i >= 2 else "")
        for i in range(count)
    )
    return _validate_text(workdir, '[server]\nname = "e"\n[models.M]\nfields = { a = "M", b = "M" }\n' + presenters)


def test_fixed_embed_graph_is_walked_once_per_presenter(workdir: Path) -> None:
    """The embed graph was walked path by path: each presenter embedding the two before it doubled the paths
    (exponential in the chain's length). Counted in calls, not timed: twice the chain, about twice the work."""
    assert not any(d.is_error for d in _embed_chain(workdir, 28))
    small, large = work_at(lambda count: _embed_chain(workdir, count), 14)
    assert large <= LINEAR * small, (small, large)


@pytest.mark.parametrize(
    "before",
    ["# a\rb\n", "# a\u2028b\n", 'a = "x\u0085y"\n'],
    ids=["CR in a comment", "U+2028 in a comment", "U+0085 in a string"],
)
def test_fixed_unterminated_string_after_a_unicode_line_break_is_fg001(workdir: Path, before: str) -> None:
    """Line splitting treated CR, U+2028 and U+0085 as line breaks where TOML does not: the position of the
    unterminated string fell outside the file, and the diagnostic was not the one FG001."""
    diagnostics = _validate_text(workdir, f'[server]\n{before}name = "unterminated\n')
    assert [d.code for d in diagnostics] == ["FG001"]


@pytest.mark.parametrize("description", ["a \\N{x}", "C:\\x", "nul \x00"])
def test_fixed_handler_stub_docstring_escapes_the_description(workdir: Path, description: str) -> None:
    """The scaffolded handler stub pasted the tool description raw into its docstring: `\\N{x}`, `\\x` and NUL
    made the stub module fail to compile."""
    clean_workdir(workdir)
    spec = write_spec(
        workdir, f'[server]\nname = "a"\n[tools.t]\ndescription = {json.dumps(description)}\n'.encode(), {}
    )
    compile(scaffold(validate(spec)[1]), "a_server_handlers.py", "exec")
