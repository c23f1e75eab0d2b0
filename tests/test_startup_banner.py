"""Every generated server says on stderr, as it starts, what it serves, over which transport and where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.build import SPECS, build
from tests.support.processes import http_server, server_env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("banner") / "out"
    build(SPECS / "billing.toml", out)
    return out


def test_stdio_says_it_serves_stdio(built: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "billing_server"],
        cwd=built,
        env=server_env(built),
        input="",  # EOF at once: the server starts, says so, and ends
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the protocol's
    assert done.stderr.splitlines()[0] == "billing: serving MCP over stdio (JSON-RPC on stdin/stdout; logs on stderr)"


def test_http_says_where(built: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with http_server(built, log=log) as url:
        first = log.read_text().splitlines()[0]
    assert first == (
        f"billing: serving MCP over streamable HTTP at {url} (probes: /healthz, /readyz); "
        "responses: SSE streams (--http-response auto: a handler takes ctx)"
    )
