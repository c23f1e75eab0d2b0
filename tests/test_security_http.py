"""The generated server's HTTP front door and its logs, attacked from outside.

Every server here is `python -m billing_server --http` as a real process; requests are real HTTP.

- Host/Origin checks (DNS rebinding): on for every bind, not only for the three loopback spellings the SDK
  recognizes. A bind to every interface (0.0.0.0) accepts only the loopback names at the bound port, a bind to
  one address only that address at the port; `--allowed-host` / `--allowed-origin` add to those; anything else
  is refused before a session opens. Beyond loopback, the server says on stderr what it exposes.
- Logs: `--log-level` is the server's own level (its package and handler module), `--dependency-log-level` the
  level of everything else (mcp, uvicorn, sse_starlette), so the server's level never opens the SDK's
  session-id lines or sse_starlette's dump of every response. Session ids and workflow handles never appear in
  clear, at any level: a short hash (`sha256:` + 8 hex digits) stands in for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tests.support.build import SPECS, build
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import LISTEN_TIMEOUT, free_port, http_server, logged, run_python, server_env, stop

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

LEGACY_VERSION = "2025-11-25"
ATTACKER = "attacker.example"
USER_ONLY_EMAIL = "alan@example.com"  # customer c-2's email: the agent sees "***", only the user block has it


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("security") / "out"
    build(SPECS / "billing.toml", out)
    return out


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def initialize(version: str = LEGACY_VERSION) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "outsider", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def modern_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "outsider", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }


def post(
    url: str, body: dict[str, Any], *, host: str | None = None, origin: str | None = None, **headers: str
) -> httpx.Response:
    """POST `body` to `url` with a Host (and Origin) of our choosing, whatever address the URL connects to."""
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    if host is not None:
        sent["Host"] = host
    if origin is not None:
        sent["Origin"] = origin
    return httpx.post(url, json=body, headers=sent, timeout=30)


def refused(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert "mcp-session-id" not in response.headers  # no session was opened for the attacker


async def list_tools_ok(url: str, mode: str = LEGACY) -> None:
    """A real client, sending the Host its URL names, gets in."""
    async with connect(url, mode) as client:
        assert "invoice_get" in [t.name for t in (await client.list_tools()).tools]


# --- Finding 5: Host/Origin validation on every bind ---------------------------------------------------------


async def test_every_interface_bind_refuses_a_forged_host_or_origin(built: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with http_server(built, "--host", "0.0.0.0", log=log) as url:
        port = port_of(url)
        # DNS rebinding: a page on attacker.example resolved to this machine. Both eras, before any session.
        refused(post(url, initialize(), host=ATTACKER, origin=f"http://{ATTACKER}"), 421)
        refused(post(url, initialize(), host=f"{ATTACKER}:{port}"), 421)
        refused(post(url, modern_call("invoice_list", {}), host=ATTACKER, **{"MCP-Protocol-Version": MODERN}), 421)
        # The wildcard address is not a name of this server ("0.0.0.0 day"), nor is loopback at another port.
        refused(post(url, initialize(), host=f"0.0.0.0:{port}"), 421)
        refused(post(url, initialize(), host=f"localhost:{port + 1 if port < 65535 else port - 1}"), 421)
        # A right Host with a foreign Origin is a browser page elsewhere: refused too.
        refused(post(url, initialize(), host=f"127.0.0.1:{port}", origin=f"http://{ATTACKER}"), 403)
        refused(post(url, initialize(), host=f"localhost:{port}", origin="null"), 403)
        # The defaults: loopback names at the bound port, with or without their own Origin.
        opened = post(url, initialize(), host=f"localhost:{port}", origin=f"http://localhost:{port}")
        assert opened.status_code == 200 and opened.headers["mcp-session-id"]
        await list_tools_ok(url)
        await list_tools_ok(url, MODERN)
        # A session id does not let a rebinding page in either: the check runs on every request of a session.
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY_VERSION}
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "invoice_list", "arguments": {}}}
        refused(post(url, call, host=ATTACKER, **session), 421)
        get = httpx.get(url, headers={"Host": ATTACKER, "Accept": "text/event-stream", **session}, timeout=30)
        delete = httpx.delete(url, headers={"Host": ATTACKER, **session}, timeout=30)
        assert (get.status_code, delete.status_code) == (421, 421)
    notice = log.read_text()
    assert (
        f"billing: serving MCP over streamable HTTP beyond loopback, on every network interface port {port}" in notice
    )
    assert "without authentication" in notice
    assert (
        f"accepted Host headers: 127.0.0.1:{port}, localhost:{port}, [::1]:{port} (more with --allowed-host)" in notice
    )
    assert f"accepted Origin headers: http://127.0.0.1:{port}, http://localhost:{port}, http://[::1]:{port}" in notice


async def test_allowed_host_and_origin_add_to_the_defaults(built: Path, tmp_path: Path) -> None:
    options = ["--host", "0.0.0.0", "--allowed-host", "mcp.example.test", "--allowed-host", "alt.example.test:*"]
    options += ["--allowed-origin", "https://app.example.test"]
    log = tmp_path / "server.log"
    with http_server(built, *options, log=log) as url:
        port = port_of(url)
        for host in ["mcp.example.test", "alt.example.test:8443", f"127.0.0.1:{port}"]:
            response = post(url, initialize(), host=host, origin="https://app.example.test")
            assert response.status_code == 200, (host, response.status_code, response.text)
        refused(post(url, initialize(), host=f"mcp.example.test:{port}"), 421)  # exactly as given, no port added
        refused(post(url, initialize(), host="alt.example.test"), 421)  # HOST:* needs a port
        refused(post(url, initialize(), host="mcp.example.test", origin="http://mcp.example.test"), 403)
        refused(post(url, initialize(), host=ATTACKER, origin="https://app.example.test"), 421)
    notice = log.read_text()
    assert f"[::1]:{port}, mcp.example.test, alt.example.test:* (more with --allowed-host)" in notice
    assert f"http://[::1]:{port}, https://app.example.test (more with --allowed-origin)" in notice


def machine_address() -> str | None:
    """This machine's non-loopback IPv4 address, if it has one (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@contextlib.contextmanager
def server_on(out: Path, address: str, *args: str) -> Iterator[str]:
    """`python -m billing_server --http --host ADDRESS --port P ARGS` until the block ends; yields its URL."""
    port = free_port()
    command = [sys.executable, "-m", "billing_server", "--http", "--host", address, "--port", str(port), *args]
    with tempfile.TemporaryFile() as sink:
        process = subprocess.Popen(command, cwd=out, env=server_env(out), stdin=subprocess.DEVNULL, stderr=sink)
        try:
            deadline = time.monotonic() + LISTEN_TIMEOUT
            while True:
                with contextlib.suppress(OSError):
                    socket.create_connection((address, port), timeout=0.2).close()
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the server did not listen on {address}:{port}:\n{logged(sink)}")
                time.sleep(0.05)
            yield f"http://{address}:{port}/mcp"
        finally:
            stop(process)


async def test_one_address_bind_accepts_only_that_address(built: Path) -> None:
    address = machine_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with server_on(built, address) as url:
        port = port_of(url)
        refused(post(url, initialize(), host=ATTACKER, origin=f"http://{ATTACKER}"), 421)
        refused(post(url, initialize(), host=f"127.0.0.1:{port}"), 421)  # not the bound address
        refused(post(url, initialize(), host=f"{address}:{port}", origin=f"http://{ATTACKER}"), 403)
        accepted = post(url, initialize(), host=f"{address}:{port}", origin=f"http://{address}:{port}")
        assert accepted.status_code == 200 and accepted.headers["mcp-session-id"]
        await list_tools_ok(url)


async def test_loopback_bind_checks_the_port_and_says_nothing(built: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with http_server(built, log=log) as url:
        port = port_of(url)
        other = port + 1 if port < 65535 else port - 1
        refused(post(url, initialize(), host=ATTACKER), 421)
        refused(post(url, initialize(), host=f"localhost:{other}"), 421)
        refused(post(url, initialize(), host=f"127.0.0.1:{port}", origin=f"http://localhost:{other}"), 403)
        await list_tools_ok(url)
    assert "beyond loopback" not in log.read_text()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--allowed-host", "*", "not a Host header value"),
        ("--allowed-host", "https://mcp.example.test", "not a Host header value"),
        ("--allowed-host", "", "not a Host header value"),
        ("--allowed-origin", ATTACKER, "not an origin"),
        ("--allowed-origin", "null", "not an origin"),
        ("--allowed-origin", "https://app.example.test/", "not an origin"),
        ("--port", "0", "not a port from 1 to 65535"),
    ],
)
def test_unusable_values_are_usage_errors(built: Path, option: str, value: str, message: str) -> None:
    done = run_python(["-m", "billing_server", "--http", option, value], cwd=built, env=server_env(built))
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: {message}" in done.stderr


# --- Finding 8: no session id, handle or dumped response in the logs ---------------------------------------


def fingerprint(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:8]


async def walk_both_eras(url: str) -> tuple[list[str], list[str]]:
    """A handshake-era session walking its own workflow and a 2026-07-28 client walking a minted handle;
    returns the session ids the server sent and the handles it minted."""
    sessions: list[str] = []
    handles: list[str] = []

    async def seen(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            sessions.append(sid)

    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [seen]})
    async with http, connect(streamable_http_client(url, http_client=http), LEGACY) as client:
        for tool in ["invoice_submit", "invoice_approve"]:
            assert not (await client.call_tool(tool, {"invoice_id": "inv-2"})).is_error
        customer = await client.call_tool("customer_get", {"id": "c-2"})
        assert USER_ONLY_EMAIL in customer.model_dump_json()  # it did go over the wire, to the user
        # a handle minted in the handshake era travels in an SSE response, the one sse_starlette dumps
        handles.append((await client.call_tool("invoice_start", {})).structured_content["workflow_id"])
        status = await client.call_tool("invoice_status", {"workflow_id": handles[-1]})
        assert status.structured_content["state"] == "draft"
    async with connect(url, MODERN) as client:
        started = await client.call_tool("invoice_start", {})
        handle = started.structured_content["workflow_id"]
        handles.append(handle)
        assert not (await client.call_tool("invoice_submit", {"invoice_id": "inv-2", "workflow_id": handle})).is_error
        status = await client.call_tool("invoice_status", {"workflow_id": handle})
        assert status.structured_content["state"] == "review"
        assert (await client.call_tool("invoice_status", {"workflow_id": "x" * 32})).is_error  # unknown handle
    assert sessions and handles
    return sorted(set(sessions)), handles


@pytest.mark.parametrize("level", ["debug", "info"])
async def test_the_servers_own_level_opens_no_dependency_logs(built: Path, tmp_path: Path, level: str) -> None:
    log = tmp_path / "server.log"
    # --user-blocks send: the user-only email does go over the wire (walk_both_eras checks), never to the log.
    with http_server(built, "--log-level", level, "--user-blocks", "send", log=log) as url:
        sessions, handles = await walk_both_eras(url)
    text = log.read_text()
    for secret in [*sessions, *handles, USER_ONLY_EMAIL]:
        assert secret not in text, f"{secret!r} is in the --log-level {level} log:\n{text}"
    # mcp (session-id lines at info), sse_starlette (every response at debug), uvicorn: all kept at warning.
    quiet = re.findall(r"^\S+ \S+ (?:DEBUG|INFO) (?!billing_server\b|billing_handlers\b)\S+:.*$", text, re.M)
    assert quiet == [], "\n".join(quiet)


async def test_dependency_debug_logs_show_credentials_only_hashed(built: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    debug = ("--log-level", "debug", "--dependency-log-level", "debug", "--user-blocks", "send")
    with http_server(built, *debug, log=log) as url:
        sessions, handles = await walk_both_eras(url)
    text = log.read_text()
    assert "mcp.server.streamable_http_manager: Created new transport with session ID: sha256:" in text
    assert "sse_starlette.sse: chunk:" in text  # the dump the user asked for is there...
    for secret in [*sessions, *handles]:
        assert secret not in text  # ...but never a credential in clear
    # The hash correlates: the session's creation and termination lines name the same fingerprint.
    for sid in sessions:
        assert f"session ID: {fingerprint(sid)}" in text and f"Terminating session: {fingerprint(sid)}" in text
    assert fingerprint(handles[0]) in text  # in the dumped start and status responses of the handshake era


def test_sdk_lines_logged_at_error_are_redacted_too(built: Path) -> None:
    """The SDK logs `Session <id> crashed` at ERROR, which any level shows; the handler hashes it. And only the
    server's package and its handler module follow --log-level."""
    sid = "0123456789abcdef0123456789abcdef"
    handle = "Zq3_-ab0123456789ABCDEFGHIJKLMNO"
    code = (
        "import logging, sys\n"
        "from billing_server.__main__ import configure_logging, parse_arguments\n"
        "configure_logging(parse_arguments(sys.argv[1:]))\n"
        f"logging.getLogger('mcp.server.streamable_http_manager').error('Session {sid} crashed')\n"
        f"logging.getLogger('mcp.server.streamable_http').info('Terminating session: {sid}')\n"
        f"logging.getLogger('billing_server').debug('own line for session:{sid}:invoice and {handle}')\n"
        "logging.getLogger('billing_handlers').debug('handler line')\n"
        "logging.getLogger('sse_starlette.sse').debug('chunk: dump')\n"
    )
    done = run_python(["-c", code, "--log-level", "debug"], cwd=built, env=server_env(built))
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 2)[2] for line in done.stderr.splitlines()]
    assert lines == [
        f"ERROR mcp.server.streamable_http_manager: Session {fingerprint(sid)} crashed",
        f"DEBUG billing_server: own line for session:{fingerprint(sid)}:invoice and {fingerprint(handle)}",
        "DEBUG billing_handlers: handler line",
    ]
