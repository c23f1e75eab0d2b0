"""Token budgets: `build --budget`, `[server] max_list_tokens` (FG500) and `max_result_tokens` (FG501, FG502), that
the list estimate is the real entry, and that the worst-case result is an upper bound of real results (and close)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio

from fusiongen.api import validate
from fusiongen.codegen.budget import tokens, tool_budgets
from tests.support.build import SPECS, built_server
from tests.support.client import MODERN, connect
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
    assert lines[0].split() == "tool list bytes list tokens result bytes result tokens over budget".split()
    row = next(line.split() for line in lines if line.startswith(largest.tool + " "))
    assert row == [largest.tool, str(largest.list_bytes), str(largest.list_tokens), "unbounded", "unbounded"]
    assert lines[1 + len(tool_budgets(ir))].split()[0] == "total"


def test_tokens_round_up() -> None:
    assert [tokens(n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
