"""Token budgets: `build --budget`, `[server] max_list_tokens` (FG500) and `max_result_tokens` (FG501, FG502), that
the list estimate is the real entry, and that the worst-case result is an upper bound of real results (and close)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import anyio
import pytest

from fusiongen.api import validate
from fusiongen.codegen import result_budget
from fusiongen.codegen.budget import tokens, tool_budgets
from fusiongen.codegen.result_budget import result_budgets, worst_result
from fusiongen.diagnostics import SpecError
from fusiongen.ir import ServerIR
from fusiongen.runtime import _expressions
from tests.support.build import FIXTURES, ROOT, SPECS, built_server
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import run

BILLING = SPECS / "billing.toml"


def test_the_estimate_is_the_size_of_the_entry_the_server_lists(tmp_path: Path) -> None:
    """Each tool's counted bytes are those of the entry a 2026-07-28 client receives (compact JSON, the same keys)."""
    _, ir, _ = validate(BILLING)
    counted = {b.tool: b.list_bytes for b in tool_budgets(ir)}

    async def listed() -> dict[str, int]:
        with built_server(BILLING, tmp_path / "out") as server:
            async with connect(server.create_server(), MODERN) as client:
                tools = (await client.list_tools()).tools
        sizes = {}
        for tool in tools:
            entry = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
            entry.pop("title", None)
            sizes[tool.name] = len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        return sizes

    real = anyio.run(listed)
    assert {name: real[name] for name in counted} == counted


def test_max_list_tokens_turns_an_excess_into_fg182(tmp_path: Path) -> None:
    shutil.copy(SPECS / "billing_handlers.py", tmp_path / "billing_handlers.py")
    spec = tmp_path / "billing.toml"
    _, ir, _ = validate(BILLING)
    largest = max(tool_budgets(ir), key=lambda b: b.list_bytes)
    limit = largest.list_tokens - 1  # exactly one tool over
    assert sum(b.list_tokens > limit for b in tool_budgets(ir)) == 1
    text = BILLING.read_text(encoding="utf-8").replace(
        'state_handle_key = "workflow_id"\n', f'state_handle_key = "workflow_id"\nmax_list_tokens = {limit}\n'
    )
    spec.write_text(text, encoding="utf-8")
    result = run("build", "billing.toml", "-o", "out", cwd=tmp_path)
    assert result.code == 2
    assert (
        f'error[FG500]: the tools/list entry of "{largest.tool}" is about {largest.list_tokens} tokens' in result.stderr
    )
    assert not (tmp_path / "out").exists()
    spec.write_text(text.replace(f"max_list_tokens = {limit}", f"max_list_tokens = {limit + 1}"), encoding="utf-8")
    table = run("build", "billing.toml", "-o", "out", "--budget", cwd=tmp_path)
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "tool",
        "list",
        "bytes",
        "list",
        "tokens",
        "result",
        "bytes",
        "result",
        "tokens",
        "over",
        "budget",
    ]
    row = next(line.split() for line in lines if line.startswith(largest.tool + " "))
    worst = next(b for b in result_budgets(ir) if b.tool == largest.tool)
    assert worst.result_bytes is not None  # billing bounds its invoices: the row shows their worst case
    sizes = [str(worst.result_bytes), str(worst.result_tokens)]
    assert row == [largest.tool, str(largest.list_bytes), str(largest.list_tokens), *sizes]
    assert lines[1 + len(tool_budgets(ir))].split()[0] == "total"


def test_the_manual_quotes_the_reference_examples_table(tmp_path: Path) -> None:
    """docs/spec.md §4.1 shows billing's `--budget` table: it is the one the build prints, so it cannot drift."""
    manual = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    section = manual[manual.index("**The reference example.**") :]
    quoted = section[section.index("```text\n") + len("```text\n") : section.index("```\n", 1)]
    shutil.copy(SPECS / "billing_handlers.py", tmp_path / "billing_handlers.py")
    shutil.copy(BILLING, tmp_path / "billing.toml")
    table = run("build", "billing.toml", "-o", "out", "--budget", cwd=tmp_path)
    assert table.code == 0, table.stderr
    assert "result bytes" in quoted and table.stdout == quoted


def test_tokens_round_up() -> None:
    assert [tokens(n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]


# --- worst-case results ------------------------------------------------------------------------------------------

BOUNDED = FIXTURES / "budget"


def _bounded_spec(tmp_path: Path, extra_server_lines: str = "") -> Path:
    for name in ("bounded.toml", "bounded_handlers.py"):
        shutil.copy(BOUNDED / name, tmp_path / name)
    spec = tmp_path / "bounded.toml"
    if extra_server_lines:
        text = spec.read_text(encoding="utf-8")
        spec.write_text(text.replace("[server]\n", f"[server]\n{extra_server_lines}\n", 1), encoding="utf-8")
    return spec


def _real_sizes(spec: Path, out: Path) -> dict[tuple[str, str], int]:
    """The compact JSON size of each tool's result as each protocol era's client receives it, for the handlers'
    largest data."""

    async def called() -> dict[tuple[str, str], int]:
        sizes = {}
        with built_server(spec, out) as server:
            for mode in (LEGACY, MODERN):
                async with connect(server.create_server(), mode) as client:
                    for tool, arguments in (("invoice_get", {"id": "inv-1"}), ("invoice_list", {})):
                        result = await client.call_tool(tool, arguments)
                        assert not result.is_error, result.content
                        wire = result.model_dump(by_alias=True, exclude_none=True, mode="json")
                        sizes[(mode, tool)] = len(json.dumps(wire, separators=(",", ":"), ensure_ascii=False).encode())
        return sizes

    return anyio.run(called)


def test_the_worst_case_bounds_the_largest_real_results_and_is_close(tmp_path: Path) -> None:
    """The handlers return the largest data bounded.toml admits (every string at max_length, lists at max_items,
    the collection over its limit, optional fields present, the longest enum values, the widest numbers, each
    item distinct), through embeds, redactions, rules, conditional rules, suggestions, every UI block type
    (user-only blocks sent) and the truncation notice. What the client receives is at most the computed bound,
    and the bound is not vacuous: within 5% of it."""
    spec = _bounded_spec(tmp_path)
    _, ir, _ = validate(spec)
    bound = {b.tool: b.result_bytes for b in result_budgets(ir)}
    real = _real_sizes(spec, tmp_path / "out")
    for (mode, tool), size in real.items():
        limit = bound[tool]
        assert limit is not None
        assert size <= limit, (mode, tool, size, limit)
        assert limit <= size * 1.05, (mode, tool, size, limit)


def test_returns_for_role_counts_the_largest_audience() -> None:
    _, ir, _ = validate(BOUNDED / "bounded.toml")
    tool = next(t for t in ir.tools if t.name == "invoice.get")
    budget = next(b for b in result_budgets(ir) if b.tool == "invoice_get")
    sizes = {
        name: len(
            json.dumps(
                worst_result(ir, ir.presenter(name), collection=False), separators=(",", ":"), ensure_ascii=False
            ).encode()
        )
        for name in tool.presenters
    }
    assert sizes["InvoiceBrief"] < sizes["Invoice"] == budget.result_bytes
    assert budget.audience == "Invoice"


UNBOUNDED_SERVER = '[server]\nname = "u"\n'


@pytest.mark.parametrize(
    ("declarations", "path", "reason"),
    [
        ('[models.M.fields]\nn = "string"\n', "data.n", "string without max_length"),
        ('[models.M.fields]\nn = "text"\n', "data.n", "text without max_length"),
        (
            '[models.M.fields]\nn = { type = "list", items = "integer" }\n',
            "data.n",
            "list without max_items",
        ),
        ('[models.M.fields]\nn = "json"\n', "data.n", "a json field"),
        ('[models.M.fields]\nn = { type = "map", values = "integer" }\n', "data.n", "a map field"),
        (
            '[models.M.fields]\nn = { type = "M", required = false }\n',
            "data.n.n",
            "M contains itself",
        ),
        (
            '[models.M.fields]\nn = "integer"\n[presenters.P]\nmodel = "M"\nrules = ["For {ctx.subject}"]\n',
            "P rules: ctx.subject",
            "the caller's identity has no size limit",
        ),
    ],
)
def test_what_has_no_bound_is_named(declarations: str, path: str, reason: str) -> None:
    returns = "P" if "[presenters.P]" in declarations else "M"
    text = f'{UNBOUNDED_SERVER}[models.M]\n{declarations}\n[tools."m.get"]\nkind = "query"\nreturns = "{returns}"\n'
    ir = validate_text(text)
    (budget,) = result_budgets(ir)
    assert budget.result_bytes is None
    assert budget.unbounded is not None
    assert (budget.unbounded.path, budget.unbounded.reason) == (path, reason)


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        ('returns = "text"', 'the handler\'s own text: returns = "text"'),
        ("", "the handler's own text: no returns"),
        ('returns = "M[]"', "a collection of M without limit"),
    ],
)
def test_handler_text_and_unlimited_collections_have_no_bound(tool: str, reason: str) -> None:
    models = '[models.M.fields]\nn = { type = "integer", minimum = 0, maximum = 9 }\n'
    ir = validate_text(f'{UNBOUNDED_SERVER}[models.M]\n{models}\n[tools."m.get"]\n{tool}\n')
    (budget,) = result_budgets(ir)
    assert budget.unbounded is not None and budget.unbounded.reason == reason


def test_bounded_values_count_at_their_widest_and_a_redaction_at_its_censor() -> None:
    """One value of each kind: the witness holds exactly the widest JSON text each admits."""
    models = (
        '[models.M.fields]\ns = { type = "string", max_length = 7 }\ne = { type = "enum", values = ["a", "ccc"] }\n'
        'i = { type = "integer", minimum = -5, maximum = 1000 }\nu = "uuid"\nd = "date"\nt = "datetime"\n'
        'b = "boolean"\nx = "number"\nsecret = { type = "string", required = false }\n'
        '[presenters.P]\nmodel = "M"\nredact_pii = ["secret"]\ncensor = "##"\n'
    )
    ir = validate_text(f'{UNBOUNDED_SERVER}[models.M]\n{models}\n[tools."m.get"]\nkind = "query"\nreturns = "P"\n')
    wire = worst_result(ir, ir.presenter("P"), collection=False)
    assert wire["structuredContent"]["data"] == {
        "s": "x" * 7,
        "e": "ccc",
        "i": 1000,
        "u": "x" * 36,
        "d": "9999-12-31",
        "t": "9999-12-31T23:59:59.999999+23:59",
        "b": False,
        "x": -2.2250738585072014e-308,
        "secret": "##",
    }


def test_max_result_tokens_errors_over_it_and_warns_without_a_bound(tmp_path: Path) -> None:
    _, ir, _ = validate(BOUNDED / "bounded.toml")
    sizes = {b.tool: b for b in result_budgets(ir)}
    limit = sizes["invoice_list"].result_tokens
    assert limit is not None
    spec = _bounded_spec(tmp_path, f"max_result_tokens = {limit - 1}")
    with pytest.raises(SpecError) as raised:
        validate(spec)
    (error,) = [d for d in raised.value.diagnostics if d.is_error]
    assert error.code == "FG501"
    assert f'"invoice_list" is about {limit} tokens ({sizes["invoice_list"].result_bytes} bytes / 4)' in error.message
    spec = _bounded_spec(tmp_path, f"max_result_tokens = {limit}")
    assert [w for w in validate(spec)[2] if w.code.startswith("FG5")] == []  # both bounded and within it
    text = spec.read_text(encoding="utf-8").replace('sku = { type = "string", max_length = 8 }', 'sku = "string"')
    spec.write_text(text, encoding="utf-8")
    warnings = [w for w in validate(spec)[2] if w.code.startswith("FG5")]
    assert [w.code for w in warnings] == ["FG502", "FG502"]
    assert "data.lines[*].sku (string without max_length)" in warnings[0].message
    table = run("build", "bounded.toml", "-o", "out", "--budget", cwd=tmp_path)
    assert table.code == 0, table.stderr
    assert "unbounded: invoice_list → data[*].lines[*].sku (string without max_length)" in table.stdout


def validate_text(text: str) -> ServerIR:
    """The IR of a spec given as text (validated from a temporary folder)."""
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "spec.toml"
        spec.write_text(text, encoding="utf-8")
        return validate(spec)[1]


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -7, 12.5, 1e16, 2.0, 1 / 3, float("nan"), "naïve", [1, 2.5, "x"], {"a": "é", "b": [1]}],
)
def test_the_budget_writes_a_value_as_the_runtime_writes_it(value: object) -> None:
    """The witness sizes a placeholder with its own copy of the runtime's formatting (the generator may not import
    the runtime): the two must agree, or the bound measures some other text."""
    assert result_budget._fmt(value) == _expressions._x_fmt(value)
