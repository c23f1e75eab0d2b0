"""The generated server as a real process: `python -m <package>` over stdio, and over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import SPECS, build

pytestmark = pytest.mark.anyio


@pytest.fixture
def built(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    build(SPECS / "billing.toml", out)
    return out


def server_env(out: Path) -> dict[str, str]:
    # Only the output dir is importable: the handler module is found beside the spec by the server itself.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(out)
    return env


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_stdio_subprocess(built: Path, mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "billing_server"], cwd=str(built),
                                   env=server_env(built))
    async with Client(params, mode=mode, cache=None) as client:
        tools = await client.list_tools()
        assert "invoice.get" in [t.name for t in tools.tools]
        result = await client.call_tool("invoice.get", {"id": "inv-1"})
        bad = await client.call_tool("invoice.get", {"id": 1})
        again = await client.call_tool("customer.get", {"id": "c-2"})
    assert result.structured_content["amount_cents"] == 123400.0
    assert "legal says hold" not in result.model_dump_json()
    assert bad.is_error and not again.is_error


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(built: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "billing_server", "--http", "--port", str(port)],
        cwd=built, env=server_env(built), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"server exited: {process.stderr.read().decode() if process.stderr else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("server did not listen in 20 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_streamable_http(http_server: str, mode: str) -> None:
    async with Client(http_server, mode=mode, cache=None) as client:
        tools = await client.list_tools()
        assert len(tools.tools) == (9 if mode == "legacy" else 12)
        result = await client.call_tool("invoice.list", {"status": "overdue"})
    assert [i["id"] for i in result.structured_content["items"]] == ["inv-1"]
    assert "078-05-1120" not in result.model_dump_json()
