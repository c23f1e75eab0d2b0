"""The generated server as a real process: `python -m <package>` over stdio, and over streamable HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.build import SPECS, build
from tests.support.client import connect, stdio
from tests.support.processes import http_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def built(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_stdio_subprocess(built: Path, mode: str) -> None:
    async with stdio(built, mode) as client:
        tools = await client.list_tools()
        assert "invoice_get" in [t.name for t in tools.tools]
        result = await client.call_tool("invoice_get", {"id": "inv-1"})
        bad = await client.call_tool("invoice_get", {"id": 1})
        again = await client.call_tool("customer_get", {"id": "c-2"})
    assert result.structured_content["data"]["amount_cents"] == 123400.0
    assert "legal says hold" not in result.model_dump_json()
    assert bad.is_error and not again.is_error


@pytest.fixture
def http_url(built: Path) -> Iterator[str]:
    with http_server(built) as url:
        yield url


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_streamable_http(http_url: str, mode: str) -> None:
    async with connect(http_url, mode) as client:
        tools = await client.list_tools()
        # A fresh session holds no workflow state: every bound tool in both eras (the stable list, §10.6). Without
        # --auth no caller has invoices:write, so the handshake era does not list invoice_update (requires), and
        # 2026-07-28's list, the same for everyone, does (refused on call).
        assert len(tools.tools) == (12 if mode == "legacy" else 13)
        assert ("invoice_update" in [t.name for t in tools.tools]) is (mode != "legacy")
        result = await client.call_tool("invoice_list", {"status": "overdue"})
    assert [i["id"] for i in result.structured_content["data"]] == ["inv-1"]
    assert "078-05-1120" not in result.model_dump_json()
