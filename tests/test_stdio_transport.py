"""The stdio transport of generated servers (fusiongen/runtime/_stdio.py): framing as the SDK frames, at most
--max-in-flight requests read and not yet answered (reading stops meanwhile), slots freed by cancellation, lines
over --max-request-body skipped with a warning, requests read before EOF answered, and the SDK's threaded
transport when stdin is not a pipe. Every test that runs a server runs it twice: on the fast path (`_fast_path.py`)
and through the SDK's public API alone (`MCP_SERVER_FAST_PATH=off`, as on an SDK the fast path was not tested on).

The servers run as real subprocesses on pipes. The `hold` handler counts how many of its calls run at once and
waits for a file the test creates; it creates a file itself when `GATED_LIMIT` calls run. No sleeps decide a
pass or a failure: every wait is for a file or a line, bounded only so that a broken server fails the test.
"""

from __future__ import annotations

import asyncio
import io
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fusiongen.runtime._stdio import EarlyRoute, LineReader, parsed_lines
from tests.support.build import SPECS, build
from tests.support.processes import server_env

WAIT = 60.0  # seconds to wait for a file, a line or an exit on a loaded machine (never a pass/fail threshold)

SPEC = """\
[server]
name = "gated"

[models.Echo.fields]
n = "integer"

[models.Peak.fields]
peak = "integer"
calls = "string"

[tools.hold]
description = "Waits for the test's go-ahead, then echoes n."
returns = "Echo"
input = { n = "integer", pad = "string" }

[tools.peak]
description = "The most hold calls that ran at once so far."
returns = "Peak"
"""

HANDLERS = """\
import asyncio
import os
from pathlib import Path

RUNNING = 0
PEAK = 0
CALLS = []


async def hold(args):
    global RUNNING, PEAK
    CALLS.append(args.n)
    RUNNING += 1
    PEAK = max(PEAK, RUNNING)
    try:
        if RUNNING == int(os.environ["GATED_LIMIT"]):
            Path(os.environ["GATED_FULL"]).touch()
        while not Path(os.environ["GATED_RELEASE"]).exists():
            await asyncio.sleep(0.01)
    finally:
        RUNNING -= 1
    return {"n": args.n}


def peak(args):
    return {"peak": PEAK, "calls": " ".join(map(str, CALLS))}
"""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gated") / "out"
    build(SPEC, out, handlers=HANDLERS)
    return out


class Server:
    """`python -m gated_server` on pipes; a thread reads its stdout, stderr goes to a file."""

    def __init__(self, out: Path, tmp_path: Path, *args: str, limit: int = 0, stdin: Any = subprocess.PIPE) -> None:
        self.full, self.release, self.log = tmp_path / "full", tmp_path / "release", tmp_path / "server.log"
        env = server_env(
            out, GATED_LIMIT=str(limit), GATED_FULL=str(self.full), GATED_RELEASE=str(self.release)
        )  # fmt: skip
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gated_server", "--log-level", "info", *args],
                cwd=out, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=sink,
            )  # fmt: skip
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        for message in messages:
            self.process.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def message(self) -> dict[str, Any]:
        line = self.lines.get(timeout=WAIT)
        assert line is not None, f"stdout closed; stderr: {self.log.read_text()[-3000:]}"
        return dict(json.loads(line))

    def response(self, request_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response to `request_id` and every message before it."""
        others = []
        while (message := self.message()).get("id") != request_id or "method" in message:
            others.append(message)
        return message, others

    def initialize(self) -> None:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        self.send(request("init", "initialize", hello))
        assert self.response("init")[0]["result"]["serverInfo"]["name"] == "gated"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def exit_code(self) -> int:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        return self.process.wait(timeout=WAIT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


FAST_PATH_OFF = "{}: serving through the SDK's public API (slower, the same answers): MCP_SERVER_FAST_PATH=off"


@pytest.fixture(params=["fast-path", "public-api"])
def sdk_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The serving path of the servers a test starts (they inherit this environment)."""
    if request.param == "public-api":
        monkeypatch.setenv("MCP_SERVER_FAST_PATH", "off")
    else:
        monkeypatch.delenv("MCP_SERVER_FAST_PATH", raising=False)
    return str(request.param)


@pytest.fixture
def servers(sdk_path: str) -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


def hold(n: int, pad: int = 0) -> dict[str, Any]:
    return request(n, "tools/call", {"name": "hold", "arguments": {"n": n, "pad": "x" * pad}})


def appeared(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def peak(server: Server) -> int:
    """The most `hold` calls that ran at once."""
    return int(stats(server)["peak"])


def calls(server: Server) -> list[int]:
    """The `n` of every `hold` call that started, in order."""
    return [int(n) for n in str(stats(server)["calls"]).split()]


def stats(server: Server) -> dict[str, Any]:
    server.send(request("peak", "tools/call", {"name": "peak", "arguments": {}}))
    return dict(server.response("peak")[0]["result"]["structuredContent"]["data"])


# --- framing: the same messages as the SDK's transport ---------------------------------------------------

FRAMING_CASES = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\r\n{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\r{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\r\r\n\n',
    b'{"jsonrpc": "2.0",\r "id": 3, "method": "ping"}\n',
    b'{"jsonrpc": "2.0", "id": "\xff\xfe", "method": "ping"}\n',
    b"\xef\xbb\xbf" + b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}\n',
    b"\n\n \t \n",
    b"not json\n[]\n{}\nnull\n",
    b'{"jsonrpc": "2.0", "id": 5, "method": "ping"}',  # the last line, without a newline
    b'{"jsonrpc": "2.0", "id": 6, "method": "ping"}\r',
    b'{"jsonrpc": "2.0", "id": 7, "result": {}}\n{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]


def framed(items: list[Any]) -> list[str]:
    return [
        "error" if isinstance(item, Exception) else item.message.model_dump_json(by_alias=True, exclude_unset=True)
        for item in items
    ]


def sdk_framing(data: bytes) -> list[str]:
    """What mcp.server.stdio makes of `data`: text lines (UTF-8, errors replaced, universal newlines), parsed."""
    items: list[Any] = []
    for line in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace"):
        try:
            items.append(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as exc:
            items.append(exc)
    return [
        "error" if isinstance(i, Exception) else i.model_dump_json(by_alias=True, exclude_unset=True) for i in items
    ]


@pytest.mark.parametrize("data", FRAMING_CASES)
def test_lines_are_framed_as_the_sdk_frames_them(data: bytes) -> None:
    *complete, rest = data.split(b"\n")
    lines = [line + b"\n" for line in complete] + ([rest] if rest else [])
    assert framed([item for line in lines for item in parsed_lines(line)]) == sdk_framing(data)


# --- the early route: whole lines offered to the bypass as they arrive ----------------------------------------


class PipeStub:
    """What LineReader needs of its read transport: pause and resume, counted."""

    def __init__(self) -> None:
        self.paused = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.paused -= 1


def odd_requests(seen: list[tuple[str, str]]) -> Any:
    """An early route's `taken` that takes the requests with an odd integer id, and records what it takes."""

    def taken(item: Any) -> bool:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest) and isinstance(message.id, int) and message.id % 2:
            seen.append(("early", framed([item])[0]))
            return True
        return False

    return taken


async def read_through(data: bytes, chunk: int, max_line: int = 1 << 20) -> list[tuple[str, str]]:
    """Feed `data` to a LineReader `chunk` bytes at a time (the reading task runs between some chunks and not
    others); every item in the order it was handled, by the early route or by the reading task."""
    seen: list[tuple[str, str]] = []
    early = EarlyRoute()
    early.taken = odd_requests(seen)
    reader = LineReader(max_line, early)
    reader.connection_made(PipeStub())  # type: ignore[arg-type]

    async def read() -> None:
        while (items := await reader.next_items()) is not None:
            seen.extend(("read", text) for text in framed(items))

    task = asyncio.create_task(read())
    await asyncio.sleep(0)  # the reading task waits for bytes
    for index, start in enumerate(range(0, len(data), chunk)):
        reader.data_received(data[start : start + chunk])
        if index % 3 != 1:  # let the reading task catch up (it is then waiting for bytes again)
            await asyncio.sleep(0)
    reader.eof_received()
    await asyncio.wait_for(task, WAIT)
    return seen


PIPELINED = b"".join(
    json.dumps(request(n, "ping")).encode() + end
    for n, end in zip(range(1, 9), [b"\n", b"\r\n", b"\n", b"\r", b"\n", b"\n", b"\n", b"\n"], strict=True)
)


@pytest.mark.parametrize("chunk", [1, 5, 47, 1 << 16])
@pytest.mark.parametrize("data", [*FRAMING_CASES, PIPELINED, b"not json\n" + PIPELINED + b"[]\n" + PIPELINED])
def test_the_early_route_keeps_the_order_and_the_framing(data: bytes, chunk: int) -> None:
    seen = asyncio.run(read_through(data, chunk))
    assert [text for _, text in seen] == sdk_framing(data)
    if data.startswith(PIPELINED):  # id 1 arrived while the reader waited
        assert seen[0][0] == "early"


def test_the_early_route_takes_requests_only_while_the_reader_waits() -> None:
    """Lines that arrive while the reading task has items to handle are left to it: nothing overtakes them."""
    seen = asyncio.run(read_through(PIPELINED, len(PIPELINED)))
    assert seen[0][0] == "early"  # id 1, taken as it arrived
    assert [how for how, _ in seen[1:]] == ["read"] * 7  # id 2 was not taken: it and all behind it are the reader's


def test_a_line_over_the_limit_is_left_to_the_reader(caplog: pytest.LogCaptureFixture) -> None:
    long = json.dumps(request(3, "ping", {"pad": "x" * 200})).encode() + b"\n"
    data = json.dumps(request(1, "ping")).encode() + b"\n" + long + json.dumps(request(5, "ping")).encode() + b"\n"
    seen = asyncio.run(read_through(data, len(data), max_line=100))
    assert [(how, json.loads(text)["id"]) for how, text in seen] == [("early", 1), ("read", 5)]
    assert "skipped a line longer than 100 bytes" in caplog.text


def test_a_failure_of_the_early_route_is_raised_by_the_reading_task() -> None:
    async def scenario() -> None:
        early = EarlyRoute()

        def taken(item: Any) -> bool:
            raise RuntimeError("the bypass broke")

        early.taken = taken
        reader = LineReader(1 << 20, early)
        reader.connection_made(PipeStub())  # type: ignore[arg-type]
        task = asyncio.create_task(reader.next_items())
        await asyncio.sleep(0)
        reader.data_received(json.dumps(request(1, "ping")).encode() + b"\n")
        with pytest.raises(RuntimeError, match="the bypass broke"):
            await asyncio.wait_for(task, WAIT)

    asyncio.run(scenario())


# --- backpressure --------------------------------------------------------------------------------------


def test_no_more_than_max_in_flight_requests_run_and_all_are_answered(
    gated: Path, tmp_path: Path, servers: list[Server]
) -> None:
    """2000 pipelined calls (4 MB, far more than a pipe and the transport's read-ahead hold): while the first 8
    wait, the client's writes stay blocked; released, all 2000 are answered with their own n, and no more than 8
    ever ran at once."""
    limit, count = 8, 2000
    server = Server(gated, tmp_path, "--max-in-flight", str(limit), limit=limit)
    servers.append(server)
    server.initialize()
    writer = threading.Thread(target=server.send, args=[hold(n, pad=2000) for n in range(count)], daemon=True)
    writer.start()
    appeared(server.full)
    assert writer.is_alive()  # the server stopped reading: the pipe is full and the client blocks
    server.release.touch()
    answers = {}
    while len(answers) < count:
        message = server.message()
        answers[message["id"]] = message
    writer.join(WAIT)
    assert sorted(answers) == list(range(count))
    assert all(m["result"]["structuredContent"]["data"] == {"n": n} for n, m in answers.items())
    assert peak(server) == limit
    assert server.exit_code() == 0
    assert "Traceback" not in server.log.read_text()


def test_a_cancelled_request_frees_its_slot(gated: Path, tmp_path: Path, servers: list[Server]) -> None:
    """With both slots taken by waiting calls, a third request is read only once the client cancels them (the SDK
    answers a cancelled request with nothing, so the slot is freed when the SDK settles it unanswered)."""
    server = Server(gated, tmp_path, "--max-in-flight", "2", limit=2)
    servers.append(server)
    server.initialize()
    server.send(hold(1), hold(2))
    appeared(server.full)
    server.send(request("p", "ping"))
    for n in (1, 2):
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": n}})
    reply, before = server.response("p")
    assert reply["result"] == {} and before == []
    server.release.touch()
    assert peak(server) == 2
    server.send(request("last", "ping"))
    assert server.response("last")[1] == []  # the cancelled calls were never answered
    assert server.exit_code() == 0


def test_a_request_cancelled_while_it_waits_for_a_slot_never_runs(
    gated: Path, tmp_path: Path, servers: list[Server]
) -> None:
    """One slot, taken by call 1; call 2 waits behind it. Cancelling 2 removes it (the cancellation skips the
    queue); cancelling 1 frees the slot for the ping behind them. 2 never starts and neither is answered."""
    server = Server(gated, tmp_path, "--max-in-flight", "1", limit=1)
    servers.append(server)
    server.initialize()
    server.send(hold(1))
    appeared(server.full)
    server.send(hold(2))
    for n in (2, 1):
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": str(n)}})
    server.send(request("p", "ping"))
    assert server.response("p") == ({"jsonrpc": "2.0", "id": "p", "result": {}}, [])
    server.release.touch()
    assert calls(server) == [1]
    assert server.exit_code() == 0


def test_a_reused_id_counts_twice(gated: Path, tmp_path: Path, servers: list[Server]) -> None:
    server = Server(gated, tmp_path, "--max-in-flight", "2", limit=2)
    servers.append(server)
    server.initialize()
    server.send(hold(7), hold(7))
    appeared(server.full)  # both ran: one id does not take one slot
    server.release.touch()
    assert [server.message()["id"], server.message()["id"]] == [7, 7]
    assert peak(server) == 2
    assert server.exit_code() == 0


# --- long lines, EOF, the fallback -----------------------------------------------------------------------


def test_a_line_over_the_limit_is_skipped_with_a_warning(gated: Path, tmp_path: Path, servers: list[Server]) -> None:
    """--max-request-body 1000: longer lines (one that arrives at once, one of 1 MB that arrives in many reads)
    are dropped with a warning; a line of exactly 1000 bytes and everything after is served."""
    server = Server(gated, tmp_path, "--max-request-body", "1000", limit=0)
    servers.append(server)
    server.release.touch()
    server.initialize()
    exact = hold(1)
    exact["params"]["arguments"]["pad"] = "x" * (1000 - len(json.dumps(exact)))
    assert len(json.dumps(exact)) == 1000
    server.send(hold(2, pad=5000), hold(3, pad=1_000_000), exact, hold(4))
    assert sorted(server.message()["id"] for _ in range(2)) == [1, 4]
    server.send(request("p", "ping"))
    assert server.response("p")[1] == []  # nothing for the skipped lines
    assert server.exit_code() == 0
    log = server.log.read_text()
    assert log.count("stdio: skipped a line longer than 1000 bytes (--max-request-body); it gets no answer") == 2
    assert "Traceback" not in log


def test_requests_read_before_eof_are_answered(gated: Path, tmp_path: Path, servers: list[Server]) -> None:
    """The client closes stdin while 5 calls wait: they are answered, then the server exits 0."""
    server = Server(gated, tmp_path, limit=5)
    servers.append(server)
    server.initialize()
    server.send(*[hold(n) for n in range(5)])
    appeared(server.full)
    assert server.process.stdin is not None
    server.process.stdin.close()
    server.release.touch()
    answers = [server.message() for _ in range(5)]
    assert sorted(m["result"]["structuredContent"]["data"]["n"] for m in answers) == list(range(5))
    assert server.exit_code() == 0
    assert server.lines.get(timeout=WAIT) is None


def test_the_start_up_says_once_which_path_serves(
    gated: Path, tmp_path: Path, servers: list[Server], sdk_path: str
) -> None:
    server = Server(gated, tmp_path)
    servers.append(server)
    server.initialize()
    server.send(hold(1))
    server.release.touch()
    assert server.response(1)[0]["result"]["structuredContent"]["data"] == {"n": 1}
    assert server.exit_code() == 0
    log = server.log.read_text()
    assert log.count("serving through the SDK's public API") == (sdk_path == "public-api")
    if sdk_path == "public-api":
        assert FAST_PATH_OFF.format("gated") in log.splitlines()


def test_stdin_from_a_file_uses_the_sdk_transport(gated: Path, tmp_path: Path, servers: list[Server]) -> None:
    """A regular file cannot be watched by the event loop: the SDK's threaded transport serves it, under the same
    bound, and every request in it is answered before the server exits 0 at its end."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    lines = [request("init", "initialize", hello), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [hold(n) for n in range(20)]
    (tmp_path / "requests").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "release").touch()
    with (tmp_path / "requests").open("rb") as stdin:
        server = Server(gated, tmp_path, "--max-in-flight", "3", limit=3, stdin=stdin)
        servers.append(server)
        answers = {m["id"]: m for m in (server.message() for _ in range(21))}
        assert server.exit_code() == 0
    assert sorted(answers, key=str) == sorted(["init", *range(20)], key=str)
    assert all(answers[n]["result"]["structuredContent"]["data"] == {"n": n} for n in range(20))
    log = server.log.read_text()
    assert "stdio: stdin or stdout is not a pipe or socket; using the SDK's threaded transport" in log
    assert "Traceback" not in log


# --- the option ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def billing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("billing") / "out"
    build(SPECS / "billing.toml", out)
    return out


def run_billing(billing: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "billing_server", *args],
        cwd=billing, env=server_env(billing), capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_max_in_flight_is_documented(billing: Path) -> None:
    helped = run_billing(billing, "--help")
    assert helped.returncode == 0
    assert "--max-in-flight N" in helped.stdout and "(default 64)" in " ".join(helped.stdout.split())


@pytest.mark.parametrize(("value", "message"), [("0", "must be at least 1"), ("many", "not a whole number")])
def test_unusable_max_in_flight_is_a_usage_error(billing: Path, value: str, message: str) -> None:
    done = run_billing(billing, "--max-in-flight", value)
    assert done.returncode == 2, done.stderr
    assert f"argument --max-in-flight: {message}" in done.stderr
