"""Scale-out through a real load balancer: three replicas of the billing server behind HAProxy.

The replicas are `python -m billing_server --http` processes sharing one real redis-server; HAProxy (Debian's
package) runs examples/haproxy/haproxy.cfg itself, the shipped file, only its addresses given through the
environment variables it reads. Through the proxy:

* 2026-07-28: every request is balanced round-robin; workflows walked with handles complete whichever replica
  serves each step, and the call logs show the steps really were spread.
* the handshake era: sessions stick to the replica that opened them (HAProxy's stick table on Mcp-Session-Id),
  so each walks its session-implicit workflow with list_changed notifications as on one server, while the
  sessions themselves are spread over the replicas.
* a replica killed: its session gets "Session not found" from the replica HAProxy redispatches to, a new session
  starts over in the initial state, and a handle from before walks on.

A missing haproxy or redis-server fails the module: it never skips.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.build import ROOT, SPECS, build
from tests.support.client import LEGACY, MODERN, connect
from tests.support.processes import free_port, logged, server_env, stop, wait_for_port
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CONFIG = ROOT / "examples" / "haproxy" / "haproxy.cfg"
BACKEND = "mcp_replicas"  # the backend's name in CONFIG
REPLICAS = 3
MODERN_WALKS = 20
SESSIONS = 6
STEP_TIMEOUT = 20.0  # seconds for one MCP call through the proxy, however loaded the machine
READY_TIMEOUT = 30.0  # seconds for HAProxy to see every replica up

# Over HTTP without --auth: invoice.update requires invoices:write, which no caller has, so it is not listed.
UNBOUND = ["invoice_get", "invoice_list", "invoice_create", "customer_get", "billing_remind"]
GENERATED = ["invoice_start", "invoice_status", "invoice_resolve"]
ALLOWED = {
    "draft": ["invoice_submit"],
    "review": ["invoice_approve", "invoice_reject"],
    "approved": ["invoice_discharge"],
    "discharged": [],
}
WALK = [("invoice_submit", "review"), ("invoice_approve", "approved"), ("invoice_discharge", "discharged")]
CALL_LINE = re.compile(r"INFO billing_server: call tool=(\S+) outcome=(\S+) duration_ms=\S+ handle=(\S+)$")

T = TypeVar("T")


# --- HAProxy --------------------------------------------------------------------------------------------


def haproxy_executable() -> str:
    """Debian installs it in /usr/sbin, which a non-root PATH may lack."""
    exe = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if exe is None:
        pytest.fail(
            "haproxy is not installed: install Debian's haproxy package (apt-get install haproxy, or make "
            "haproxy); the scale-out tests run the shipped example config in a real HAProxy",
            pytrace=False,
        )
    return exe


def runtime_api(sock: Path, command: str) -> str:
    """One command on HAProxy's runtime API (the `stats socket` of the config), its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(str(sock))
        conn.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def server_rows(sock: Path) -> dict[str, dict[str, str]]:
    """`show stat` of the replicas' backend: one CSV row per server (not the backend's own), by server name."""
    lines = runtime_api(sock, "show stat").lstrip("# ").splitlines()
    rows = csv.DictReader(lines)
    return {row["svname"]: row for row in rows if row["pxname"] == BACKEND and row["svname"] != "BACKEND"}


def sticky_sessions(sock: Path) -> dict[str, int]:
    """The stick table: session id → the number of the replica it sticks to (replicaN in CONFIG, on BACKENDN)."""
    replica_of = {row["sid"]: int(name.removeprefix("replica")) for name, row in server_rows(sock).items()}
    table = runtime_api(sock, f"show table {BACKEND}")
    return {key: replica_of[sid] for key, sid in re.findall(r"key=(\S+) .*?server_id=(\d+)", table)}


def all_up(sock: Path) -> bool:
    """Whether HAProxy's health checks (GET /readyz, 200) have passed on every replica."""
    try:
        rows = server_rows(sock)
    except OSError:  # the socket is not there yet
        return False
    return len(rows) == REPLICAS and all(r["status"] == "UP" and r["check_status"] == "L7OK" for r in rows.values())


def wait_until_all_up(process: subprocess.Popen[bytes], sock: Path, log: Any) -> None:
    """Until HAProxy sees every replica up; AssertionError (with what it logged) if it exits or never does."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not all_up(sock):
        if process.poll() is not None:
            raise AssertionError(f"haproxy exited with {process.returncode}:\n{logged(log)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"haproxy did not see {REPLICAS} replicas up within {READY_TIMEOUT} s:\n{logged(log)}")
        time.sleep(0.05)


@contextlib.contextmanager
def haproxy(root: Path, port: int, backends: list[int]) -> Iterator[Path]:
    """HAProxy on CONFIG, listening on `port` and balancing over `backends`, until the block ends; yields the
    path of its runtime API socket."""
    sock = root / "haproxy.sock"
    env = {
        **os.environ,
        "MCP_BIND": f"127.0.0.1:{port}",
        "HAPROXY_SOCKET": str(sock),
        **{f"BACKEND{i}": f"127.0.0.1:{p}" for i, p in enumerate(backends, 1)},
    }
    command = [haproxy_executable(), "-db", "-f", str(CONFIG)]  # -db: in the foreground, not as a daemon
    with (root / "haproxy.log").open("w+b") as log:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            wait_for_port(process, port, log=log, what="haproxy")
            wait_until_all_up(process, sock, log)
            yield sock
        finally:
            stop(process)


# --- the cluster -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    url: str  # the proxy's MCP endpoint
    sock: Path  # HAProxy's runtime API
    replicas: list[subprocess.Popen[bytes]]  # replicaN in CONFIG is replicas[N - 1]
    logs: list[Path]  # each replica's stderr, at --log-level info

    def calls(self) -> list[tuple[int, str, str, str]]:
        """Every call line the replicas logged: (replica number from 1, tool, outcome, handle digest)."""
        found = []
        for number, log in enumerate(self.logs, 1):
            for line in log.read_text(errors="replace").splitlines():
                if match := CALL_LINE.search(line):
                    found.append((number, *match.groups()))
        return found


@contextlib.contextmanager
def replicas(out: Path, args: list[str], logs: list[Path]) -> Iterator[list[tuple[subprocess.Popen[bytes], int]]]:
    """`python -m billing_server --http` on a free port per log file, until the block ends: their processes and
    ports. Started all at once, then waited for: each spends its first second importing."""
    with contextlib.ExitStack() as stack:
        started = []
        for log in logs:
            port, sink = free_port(), stack.enter_context(log.open("w+b"))  # a file, never an unread pipe
            command = [sys.executable, "-m", "billing_server", "--http", "--port", str(port), *args]
            process = subprocess.Popen(
                command, cwd=out, env=server_env(out), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink
            )
            stack.callback(stop, process)
            started.append((process, port, sink))
        for process, port, sink in started:
            wait_for_port(process, port, log=sink, what=f"the replica on {port}")
        yield [(process, port) for process, port, _ in started]


@contextlib.contextmanager
def running_cluster(root: Path, out: Path, redis_url: str) -> Iterator[Cluster]:
    """REPLICAS replicas of the server built in `out`, on one Redis, behind HAProxy, until the block ends."""
    proxy_port = free_port()
    # Clients name the proxy in their Host header, which the replicas refuse unless told to accept it.
    args = ["--state-store", redis_url, "--allowed-host", f"127.0.0.1:{proxy_port}", "--log-level", "info"]
    logs = [root / f"replica{n}.log" for n in range(1, REPLICAS + 1)]
    with replicas(out, args, logs) as started, haproxy(root, proxy_port, [port for _, port in started]) as sock:
        yield Cluster(f"http://127.0.0.1:{proxy_port}/mcp", sock, [process for process, _ in started], logs)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, stop_redis = start_redis(tmp_path_factory.mktemp("redis"))  # pytest.fail if redis-server is missing
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_redis()


@pytest.fixture(scope="module")
def billing_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("billing") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, billing_out: Path, redis_url: str) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster"), billing_out, redis_url) as running:
        yield running


# --- helpers ---------------------------------------------------------------------------------------------


async def bounded(step: Awaitable[T]) -> T:
    """One step through the proxy, failing instead of hanging if it never answers."""
    with anyio.fail_after(STEP_TIMEOUT):
        return await step


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def ok(c: Client, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await bounded(c.call_tool(tool, arguments))
    assert not result.is_error, f"{tool}: {text(result)}"
    return result


def digest(handle: str) -> str:
    """A handle as the call log shows it."""
    return "sha256:" + hashlib.sha256(handle.encode()).hexdigest()[:8]


def status_in(state: str, handle: str | None) -> dict[str, Any]:
    """What invoice.status answers in `state` (handle None: a session's own state)."""
    allowed, final = ALLOWED[state], state == "discharged"
    return {
        "workflow_id": handle,
        "workflow": "invoice",
        "state": state,
        "allowed_tools": allowed,
        "final": final,
        "pending": None,
    }


# --- 2026-07-28: stateless, round-robin ----------------------------------------------------------------------


async def test_modern_walks_complete_whichever_replica_serves_each_step(cluster: Cluster) -> None:
    finals: dict[str, dict[str, Any]] = {}

    async def walk(index: int) -> None:
        async with connect(cluster.url, MODERN) as c:
            started = await ok(c, "invoice_start", {})
            handle: str = started.structured_content["workflow_id"]
            for tool, state in WALK:
                await ok(c, tool, {"invoice_id": f"inv-{index % 3 + 1}", "workflow_id": handle})
                status = await ok(c, "invoice_status", {"workflow_id": handle})
                assert status.structured_content["state"] == state
            finals[handle] = dict(status.structured_content)

    async with anyio.create_task_group() as group:
        for index in range(MODERN_WALKS):
            group.start_soon(walk, index)

    assert len(finals) == MODERN_WALKS  # every walk completed, each with its own handle
    assert all(status == status_in("discharged", handle) for handle, status in finals.items())
    calls = cluster.calls()
    served_by: dict[str, set[int]] = defaultdict(set)
    for replica, _tool, outcome, handle in calls:
        assert outcome == "ok"
        served_by[handle].add(replica)
    per_walk = [sorted(served_by[digest(h)]) for h in finals]
    # Each walk made 7 calls (start, then a transition and a status three times), every one logged once.
    assert sum(1 for _, _, _, h in calls if h in {digest(f) for f in finals}) == 7 * MODERN_WALKS
    # Round-robin really spread the calls, and walks really moved between replicas mid-way.
    assert len(set().union(*map(set, per_walk))) > 1, per_walk
    assert any(len(replicas) > 1 for replicas in per_walk), per_walk
    print("modern calls per replica:", Counter(r for r, *_ in calls), "replicas per walk:", per_walk)


# --- the handshake era: sticky sessions --------------------------------------------------------------------


class Session:
    """A handshake-era client over streamable HTTP that records its Mcp-Session-Id and its notifications."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session_ids: set[str] = set()
        self.messages: list[Any] = []

    async def _response(self, response: httpx2.Response) -> None:
        if session_id := response.headers.get("mcp-session-id"):
            self.session_ids.add(session_id)

    async def _message(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def list_changed(self) -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in self.messages)

    async def notified(self, expected: int) -> None:
        """Until `expected` list_changed notifications have arrived (bounded)."""
        with anyio.fail_after(STEP_TIMEOUT):
            while self.list_changed < expected:
                await anyio.sleep(0.02)

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(timeout=httpx2.Timeout(STEP_TIMEOUT), event_hooks={"response": [self._response]})

    def client(self, http: httpx2.AsyncClient) -> Client:
        return connect(streamable_http_client(self.url, http_client=http), LEGACY, message_handler=self._message)


async def names(c: Client) -> list[str]:
    return [t.name for t in (await bounded(c.list_tools())).tools]


async def test_handshake_sessions_stick_to_their_replica_and_walk_their_own_state(cluster: Cluster) -> None:
    sessions = [Session(cluster.url) for _ in range(SESSIONS)]
    finished: list[Session] = []

    async def walk(session: Session, index: int) -> None:
        async with session.http() as http, session.client(http) as c:
            # No workflow state of its own yet: every tool (docs/spec.md §10.6)
            assert await names(c) == [
                *UNBOUND,
                *(t for s in ("draft", "review", "approved") for t in ALLOWED[s]),
                *GENERATED,
            ]
            for notified, (tool, state) in enumerate(WALK, 1):
                await ok(c, tool, {"invoice_id": f"inv-{index % 3 + 1}"})  # no handle: the session's own state
                await session.notified(notified)  # its list changed, on its own stream through the proxy
                assert await names(c) == [*UNBOUND, *ALLOWED[state], *GENERATED]
                status = await ok(c, "invoice_status", {})
                assert status.structured_content == status_in(state, None)
            assert session.list_changed == len(WALK)
            finished.append(session)

    async with anyio.create_task_group() as group:
        for index, session in enumerate(sessions):
            group.start_soon(walk, session, index)

    assert len(finished) == SESSIONS  # every session walked its workflow to the end, none hit "Session not found"
    ids = [s.session_ids for s in sessions]
    assert all(len(i) == 1 for i in ids), ids  # one session each, never re-opened
    table = sticky_sessions(cluster.sock)
    stuck_to = [table.get(session_id) for [session_id] in ids]
    assert None not in stuck_to, table  # HAProxy pinned every session to a replica ...
    assert len(set(stuck_to)) > 1, stuck_to  # ... and spread them over more than one
    # ... and each session's calls (six without a handle: three transitions, three statuses) ran there.
    implicit = Counter(replica for replica, _tool, _outcome, handle in cluster.calls() if handle == "-")
    assert implicit == Counter({replica: 6 * n for replica, n in Counter(stuck_to).items()}), (implicit, stuck_to)
    print("handshake sessions per replica:", Counter(stuck_to))


# --- a replica dies ---------------------------------------------------------------------------------------


async def test_a_dead_replicas_sessions_start_over_and_handles_survive(
    tmp_path: Path, billing_out: Path, redis_url: str
) -> None:
    with running_cluster(tmp_path, billing_out, redis_url) as cluster:
        doomed = Session(cluster.url)
        async with doomed.http() as http, doomed.client(http) as c:
            await ok(c, "invoice_submit", {"invoice_id": "inv-1"})  # the session's own state: review
            started = await ok(c, "invoice_start", {})
            handle: str = started.structured_content["workflow_id"]
            await ok(c, "invoice_submit", {"invoice_id": "inv-1", "workflow_id": handle})  # the handle: review
            [session_id] = doomed.session_ids
            victim = cluster.replicas[sticky_sessions(cluster.sock)[session_id] - 1]
            victim.kill()
            victim.wait(timeout=STEP_TIMEOUT)
            # HAProxy cannot reach the session's replica, so another one gets the request: it has no such session.
            with pytest.raises(MCPError, match="Session not found"):
                await bounded(c.call_tool("invoice_status", {}))
        again = Session(cluster.url)  # what a client does on 404: initialize again, a new session
        async with again.http() as http, again.client(http) as c:
            assert (await ok(c, "invoice_status", {})).structured_content == status_in("draft", None)  # over
            assert (await ok(c, "invoice_status", {"workflow_id": handle})).structured_content == status_in(
                "review", handle
            )  # the handle lives in Redis: it survived
            for tool, _state in WALK[1:]:
                await ok(c, tool, {"invoice_id": "inv-1", "workflow_id": handle})
            assert (await ok(c, "invoice_status", {"workflow_id": handle})).structured_content == status_in(
                "discharged", handle
            )
        assert again.session_ids.isdisjoint(doomed.session_ids)
