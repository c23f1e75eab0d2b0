"""Reliability when the state store is down: STORE_UNAVAILABLE tool errors, a server that starts before its Redis
and recovers without a restart, and the HTTP health endpoints (/healthz, /readyz).

Real processes where the behaviour is about processes: `python -m <package> --http` in a subprocess, and a real
redis-server started after it (tests/support/redis_server.py). Nothing waits on a clock: every wait is for a
condition, with a generous timeout.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR

from fusiongen.api import Generation
from tests.support.build import GeneratedServer, build, built_server
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import free_port, http_server, run_python, server_env
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT = 60.0  # seconds to wait for a condition on a loaded machine (never a pass/fail threshold)
PASSWORD = "pw-9f3e-not-for-logs"

FLOW_SPEC = """\
[server]
name = "reliable"

[workflows.flow]
initial = "a"
[workflows.flow.states]
a = { on = { GO = "b" } }
b = { type = "final" }

[tools."flow.go"]
description = "Move the flow on."
bind_state = { workflow = "flow", states = ["a"], transition = "GO" }
"""

FLOW_HANDLERS = """\
def flow_go(args):
    return None
"""

PLAIN_SPEC = """\
[server]
name = "plain"

[tools.ping]
description = "Answers."
"""

PLAIN_HANDLERS = """\
def ping(args):
    return None
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def flow_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, Path]:
    out = tmp_path_factory.mktemp("reliable") / "out"
    return build(FLOW_SPEC, out, handlers=FLOW_HANDLERS), out


@pytest.fixture
def flow(flow_build: tuple[Generation, Path]) -> Iterator[GeneratedServer]:
    with GeneratedServer(*flow_build) as server:
        yield server


def text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def get(url: str, path: str, host: str | None = None) -> tuple[int, dict[str, object]]:
    """GET `path` on the server of `url` (an /mcp URL), with the Host header `host` if given."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=WAIT)
    try:
        connection.request("GET", path, headers={"Host": host} if host is not None else {})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    return response.status, json.loads(body) if body.startswith(b"{") else {"raw": body.decode(errors="replace")}


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {WAIT} s")
        time.sleep(0.05)


def assert_store_unavailable(result: types.CallToolResult, tool: str) -> None:
    shown = text(result)
    assert result.is_error is True and result.structured_content is None, shown
    assert shown.startswith(f'<tool_error tool="{tool}" code="STORE_UNAVAILABLE" severity="error">'), shown
    assert '<detail key="workflow">flow</detail><detail key="retry_after">2</detail>' in shown, shown
    recovery = "Retry in 2 seconds; if it keeps failing, tell the user the tool is unavailable."
    assert f"<recovery>{recovery}</recovery>" in shown, shown


# --- 1. store failures are tool errors -------------------------------------------------------------------


async def test_a_store_failure_is_store_unavailable_with_a_retry_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, flow: GeneratedServer
) -> None:
    """Bound calls, start and status: a STORE_UNAVAILABLE tool error (never a JSON-RPC error) with a recovery hint
    and `retry_after` seconds in its details, and none of the store's own text; tools/list in the handshake era is
    a JSON-RPC error with a generic message whose data names STORE_UNAVAILABLE and the same retry_after."""
    caplog.set_level(logging.ERROR)
    port, stop = start_redis(tmp_path)
    server = flow.create_server(flow.handlers, state_store=f"redis://127.0.0.1:{port}/0")
    async with connect(server, MODERN) as modern, connect(server, LEGACY) as legacy:
        started = await modern.call_tool("flow_start", {})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        stop()
        calls = [
            ("flow_go", await modern.call_tool("flow_go", {"workflow_id": handle})),
            ("flow_start", await modern.call_tool("flow_start", {})),
            ("flow_status", await modern.call_tool("flow_status", {"workflow_id": handle})),
            ("flow_go", await legacy.call_tool("flow_go", {})),
        ]
        with pytest.raises(MCPError) as listing:
            await legacy.list_tools()
    for tool, result in calls:
        assert_store_unavailable(result, tool)
        for detail in (str(port), "127.0.0.1", "Errno", "Redis", "onnect"):
            assert detail not in text(result)
    assert listing.value.error.code == INTERNAL_ERROR
    assert listing.value.error.message == "The workflow state cannot be read right now; retry in a moment."
    assert listing.value.error.data == {"code": "STORE_UNAVAILABLE", "retry_after": 2}
    assert str(port) in caplog.text  # the details are in the log


# --- 2. a server started before its store ----------------------------------------------------------------


async def test_a_server_started_before_redis_serves_then_recovers_without_restart(
    tmp_path: Path, flow: GeneratedServer
) -> None:
    """`python -m` with a Redis that is not running yet: one stderr line says so (the URL's password redacted),
    the server serves (gated calls get STORE_UNAVAILABLE, /readyz 503), and once redis-server starts on that port
    it recovers by itself: /readyz 200, a second line, and workflow calls work, in the same process."""
    port = free_port()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    log = tmp_path / "server.log"
    args = ("--state-store", url)
    with http_server(flow.out, *args, package=flow.package_name, env=server_env(flow.out), log=log) as mcp:
        wait_until(lambda: "is unreachable" in log.read_text(), "the unreachable-store line")
        status, body = get(mcp, "/readyz")
        assert (status, body) == (503, {"status": "unavailable", "reason": "the state store is unreachable"})
        assert get(mcp, "/healthz") == (200, {"status": "ok"})
        async with connect(mcp, MODERN) as client:
            assert_store_unavailable(await client.call_tool("flow_start", {}), "flow_start")
            assert [t.name for t in (await client.list_tools()).tools] == ["flow_go", "flow_start", "flow_status"]

        _, stop = start_redis(tmp_path, "--requirepass", PASSWORD, port=port)
        try:
            up = time.monotonic()
            wait_until(lambda: get(mcp, "/readyz")[0] == 200, "/readyz to turn 200")
            ready_after = time.monotonic() - up
            wait_until(lambda: "is reachable again" in log.read_text(), "the reachable-again line")
            async with connect(mcp, MODERN) as client:
                started = await client.call_tool("flow_start", {})
                assert started.is_error is False, text(started)
                handle = started.structured_content["workflow_id"]  # type: ignore[index]
                moved = await client.call_tool("flow_go", {"workflow_id": handle})
                assert (moved.is_error, text(moved)) == (False, "flow_go: done.")
            assert get(mcp, "/readyz") == (200, {"status": "ready"})
        finally:
            stop()
    print(f"/readyz turned 200 {ready_after:.2f} s after redis-server answered PING")
    logged = log.read_text()
    lines = [line for line in logged.splitlines() if "the state store" in line and "reliable:" in line]
    assert len([line for line in lines if "is unreachable" in line]) == 1, logged
    shown = f"redis://:***@127.0.0.1:{port}/0"
    assert lines[0].startswith(f"reliable: the state store {shown} is unreachable (ConnectionError: "), lines
    assert "serving anyway: workflow calls get STORE_UNAVAILABLE until it answers" in lines[0]
    assert lines[-1] == f"reliable: the state store {shown} is reachable again", lines
    assert PASSWORD not in logged


async def test_a_reachable_store_logs_no_outage_line(tmp_path: Path, flow: GeneratedServer) -> None:
    """The outage line is about an outage: a SQLite store that opens says nothing, and /readyz is 200."""
    log = tmp_path / "server.log"
    url = f"sqlite:///{tmp_path / 'state.db'}"
    args = ("--state-store", url)
    with http_server(flow.out, *args, package=flow.package_name, env=server_env(flow.out), log=log) as mcp:
        assert get(mcp, "/readyz") == (200, {"status": "ready"})
        async with connect(mcp, MODERN) as client:
            assert (await client.call_tool("flow_start", {})).is_error is False
    assert "the state store" not in log.read_text()


# --- 2b. a server installed without its redis extra -------------------------------------------------------

# Runs the server's own __main__ in a fresh interpreter in which `import redis` fails, as after
# `pip install reliable-server` without `[redis]`.
WITHOUT_REDIS_PY = """
import sys
sys.modules["redis"] = None
from reliable_server.__main__ import main, parse_arguments
from reliable_server.server import create_server
create_server(state_store="memory")  # imports and builds without redis-py
parse_arguments(["--state-store", f"sqlite:///{sys.argv[1]}"]).store
print("serves without redis-py", flush=True)
main(["--state-store", "redis://:pw-in-url@127.0.0.1:6379/0"])
"""


def test_a_server_without_redis_py_runs_and_a_redis_url_says_what_to_install(
    tmp_path: Path, flow: GeneratedServer
) -> None:
    env = server_env(flow.out)
    done = run_python(["-c", WITHOUT_REDIS_PY, str(tmp_path / "state.db")], cwd=flow.out, env=env)
    assert done.stdout == "serves without redis-py\n", done.stderr
    assert done.returncode == 2, done.stderr  # argparse's usage error, at start-up
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "python -m reliable_server: error: --state-store: a redis:// or rediss:// state store needs redis-py "
        "(redis>=5.0.8,<9), the server's 'redis' extra: pip install 'reliable-server[redis]'"
    ), done.stderr
    assert "pw-in-url" not in done.stderr and "Traceback" not in done.stderr
    pyproject = (flow.out / "pyproject.toml").read_text()
    assert 'redis = ["redis>=5.0.8,<9"]' in pyproject  # the extra the message names exists, with that range


# --- 3. health endpoints ---------------------------------------------------------------------------------


async def test_health_endpoints_of_a_server_without_workflows(tmp_path: Path) -> None:
    """/healthz and /readyz answer 200 (no workflows: always ready), also to a prober that sends a Host of its own
    (a load balancer's, a pod address), while /mcp keeps refusing that Host (421)."""
    with built_server(PLAIN_SPEC, tmp_path / "out", handlers=PLAIN_HANDLERS) as plain:
        out, package = plain.out, plain.package_name
    with http_server(out, package=package, env=server_env(out)) as mcp:
        for host in (None, "10.1.2.3:8080", "health.internal"):
            assert get(mcp, "/healthz", host) == (200, {"status": "ok"})
            assert get(mcp, "/readyz", host) == (200, {"status": "ready"})
        status, _ = get(mcp, "/mcp", "10.1.2.3:8080")
        assert status == 421
        async with connect(mcp, MODERN) as client:
            assert (await client.call_tool("ping", {})).is_error is False
