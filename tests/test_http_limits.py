"""The HTTP transport's limits are the user's to set: sessions, session idle time, request body size.

Each limit is tried against a real `python -m billing_server --http` subprocess with raw HTTP requests, as
a client that ignores the limits would send them. The idle timeout is waited for as a condition, never timed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.build import SPECS, build
from tests.support.client import LEGACY, connect
from tests.support.processes import http_server, run_python, server_env

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("limits") / "out"
    build(SPECS / "billing.toml", out)
    return out


def initialize() -> dict[str, Any]:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "many", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def open_session(url: str) -> httpx.Response:
    return httpx.post(url, json=initialize(), headers=HEADERS, timeout=30)


@pytest.mark.anyio
async def test_max_sessions_closes_the_least_recently_used_session_for_a_new_one(built: Path) -> None:
    """At --max-sessions a new session is not refused (idle sessions would lock every new client out): the least
    recently used session of the client holding the most is closed instead, so at most that many stay open."""
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    def session_of(response: httpx.Response) -> dict[str, str]:
        return {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}

    with http_server(built, "--max-sessions", "2") as url:
        first, second = open_session(url), open_session(url)
        assert first.status_code == second.status_code == 200
        assert first.headers["mcp-session-id"] != second.headers["mcp-session-id"]
        assert httpx.post(url, json=ping, headers=session_of(first), timeout=30).status_code == 200  # first: recent
        third = open_session(url)
        assert third.status_code == 200, third.text
        assert httpx.post(url, json=ping, headers=session_of(second), timeout=30).status_code == 404  # closed
        assert httpx.post(url, json=ping, headers=session_of(first), timeout=30).status_code == 200
        assert httpx.post(url, json=ping, headers=session_of(third), timeout=30).status_code == 200
        # Closing a session frees its slot for a new client, which closes nobody's.
        assert httpx.delete(url, headers=session_of(first), timeout=30).status_code in (200, 204)
        async with connect(url, LEGACY) as client:
            assert "invoice.get" in [t.name for t in (await client.list_tools()).tools]
        assert httpx.post(url, json=ping, headers=session_of(third), timeout=30).status_code == 200


def test_max_request_body_refuses_larger_bodies(built: Path) -> None:
    with http_server(built, "--max-request-body", "2000") as url:
        assert open_session(url).status_code == 200  # an ordinary initialize fits
        padded = initialize()
        padded["params"]["clientInfo"]["name"] = "x" * 4000
        too_big = httpx.post(url, json=padded, headers=HEADERS, timeout=30)
        assert too_big.status_code == 413, too_big.text
        assert "mcp-session-id" not in too_big.headers


def test_an_idle_session_is_closed_after_the_idle_timeout(built: Path, tmp_path: Path) -> None:
    """With a 1 s idle timeout, an untouched session is closed by the server and its id stops being accepted.
    The test waits for the SDK's "idle timeout" log line (any request would count as activity), never timing it."""
    log = tmp_path / "server.log"
    with http_server(built, "--session-idle-timeout", "1", "--dependency-log-level", "info", log=log) as url:
        opened = open_session(url)
        assert opened.status_code == 200
        deadline = time.monotonic() + 60
        while "idle timeout" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "idle timeout" in log.read_text(errors="replace")
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert httpx.post(url, json=ping, headers=session, timeout=30).status_code == 404  # unknown or expired


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-sessions", "0", "must be at least 1"),
        ("--max-sessions", "many", "not a whole number"),
        ("--session-idle-timeout", "0", "must be a positive number"),
        ("--session-idle-timeout", "inf", "must be a positive number"),
        ("--max-request-body", "-1", "must be at least 1"),
    ],
)
def test_unusable_limits_are_usage_errors(built: Path, option: str, value: str, message: str) -> None:
    done = run_python(["-m", "billing_server", "--http", option, value], cwd=built, env=server_env(built))
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: {message}" in done.stderr
    assert "Traceback" not in done.stderr
