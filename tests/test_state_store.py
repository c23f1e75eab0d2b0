"""Tests for fusiongen/runtime/state_store.py and redis_store.py, the workflow state stores copied into generated
servers.

The runtime is a real module, imported directly (a server's copy is the same bytes).  Every contract test
runs against all three stores: memory, SQLite in tmp_path, and a real redis-server (each test
gets its own key prefix).
"""

import asyncio
import contextlib
import itertools
import json
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio
import redis.exceptions

from fusiongen.runtime import redis_store, state_store
from tests.support.processes import free_port
from tests.support.redis_server import start_redis

SOURCE = Path(state_store.__file__)
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(scope="session")
def ss() -> ModuleType:
    return state_store


@pytest.fixture(scope="session")
def rs() -> ModuleType:
    return redis_store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Which store the test runs against, as the URL open_store() would get."""
    if request.param == "redis":
        url: str = request.getfixturevalue("redis_url")
        return url
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'state.db'}"


Factory = Callable[..., Any]


@pytest.fixture
async def make_store(ss: ModuleType, rs: ModuleType, backend: str) -> AsyncIterator[Factory]:
    """Build stores of the test's backend; two built by one test share state (except memory)."""
    stores: list[Any] = []
    prefix = f"test:{uuid.uuid4().hex}:"

    def make(**timing: float) -> Any:
        if backend.startswith("redis://"):
            store = rs.RedisStore(backend, prefix=prefix, **timing)
        else:
            store = ss.open_store(backend, **timing)
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()


def new_handle() -> str:
    return uuid.uuid4().hex


# --- the contract, for every store ----------------------------------------------------------


async def test_create_load_and_compare_and_set(ss: ModuleType, make_store: Factory) -> None:
    store = make_store()
    h = new_handle()
    assert await store.create(h, "order", "draft") == ss.Record("order", "draft", 1)
    assert await store.load(h) == ss.Record("order", "draft", 1)
    assert await store.compare_and_set(h, 1, "placed") == ss.Record("order", "placed", 2)
    assert await store.compare_and_set(h, 1, "cancelled") is None  # stale version refused
    assert await store.load(h) == ss.Record("order", "placed", 2)
    assert await store.compare_and_set(h, 2, "paid") == ss.Record("order", "paid", 3)
    assert await store.compare_and_set(h, 9, "nonsense") is None
    assert await store.load(h) == ss.Record("order", "paid", 3)


async def test_duplicate_create_is_refused(ss: ModuleType, make_store: Factory) -> None:
    store = make_store()
    h = new_handle()
    await store.create(h, "order", "draft")
    await store.compare_and_set(h, 1, "placed")
    with pytest.raises(KeyError) as excinfo:
        await store.create(h, "other", "start")
    assert h not in str(excinfo.value)  # handles never appear in messages
    assert await store.load(h) == ss.Record("order", "placed", 2)


async def test_unknown_handle(make_store: Factory) -> None:
    store = make_store()
    assert await store.load(new_handle()) is None
    assert await store.compare_and_set(new_handle(), 1, "x") is None


async def test_text_round_trips_unchanged(ss: ModuleType, make_store: Factory) -> None:
    store = make_store()
    h = new_handle()
    workflow, state = "naïve\r\nflow", "état\r\n$3\r\n*1\r\n 🚀 " + "x" * 100_000
    await store.create(h, workflow, "")
    assert await store.compare_and_set(h, 1, state) == ss.Record(workflow, state, 2)
    assert await store.load(h) == ss.Record(workflow, state, 2)


class SteppedClock:
    """The `time` module as the memory and SQLite stores see it, except that time moves only when told.
    Their expiry is then tested exactly, however loaded the machine is."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


async def test_idle_expiry(ss: ModuleType, make_store: Factory, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend.startswith("redis://"):  # Redis expires keys on its own clock: real time, with wide margins
        ttl = 2.0

        async def wait(seconds: float) -> None:
            await asyncio.sleep(seconds)
    else:
        ttl = 0.3
        clock = SteppedClock()
        monkeypatch.setattr(ss, "time", clock)

        async def wait(seconds: float) -> None:
            clock.now += seconds

    store = make_store(idle_ttl=ttl)
    h = new_handle()
    await store.create(h, "order", "draft")
    for _ in range(3):  # each load is activity and pushes expiry further out
        await wait(ttl / 2)
        assert await store.load(h) is not None
    await wait(ttl / 2)
    assert await store.compare_and_set(h, 1, "placed") is not None  # so is a save
    await wait(ttl * 1.5)
    assert await store.load(h) is None
    assert await store.compare_and_set(h, 2, "paid") is None
    # An expired handle behaves like one that never existed: it can be created afresh.
    assert await store.create(h, "order", "draft") == ss.Record("order", "draft", 1)


async def test_handles_are_independent(ss: ModuleType, make_store: Factory) -> None:
    store = make_store(lock_wait=0.2)
    a, b = new_handle(), new_handle()
    await store.create(a, "wf-a", "a0")
    await store.create(b, "wf-b", "b0")
    await store.compare_and_set(a, 1, "a1")
    assert await store.load(b) == ss.Record("wf-b", "b0", 1)
    async with store.lock(a), store.lock(b):  # a's lock does not block b's
        pass


async def test_lock_excludes_a_second_holder(make_store: Factory) -> None:
    store = make_store(lock_wait=5.0)
    h = new_handle()
    events: list[str] = []
    first_in = asyncio.Event()

    async def first() -> None:
        async with store.lock(h):
            first_in.set()
            events.append("first in")
            await asyncio.sleep(0.2)
            events.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with store.lock(h):
            events.append("second in")

    await asyncio.gather(first(), second())
    assert events == ["first in", "first out", "second in"]


async def test_lock_wait_gives_up_with_lock_timeout(ss: ModuleType, make_store: Factory) -> None:
    store = make_store(lock_wait=0.2)
    h = new_handle()
    async with store.lock(h):
        started = time.monotonic()
        with pytest.raises(ss.LockTimeout) as excinfo:
            async with store.lock(h):
                pytest.fail("entered a lock that is held")
        assert 0.15 <= time.monotonic() - started < 2.0
        assert h not in str(excinfo.value)
    async with store.lock(h):  # free again once released
        pass


async def vanished_holder(store: Any, h: str) -> Any:
    """Take h's lock in a task that then ends without releasing: a holder that crashed (nothing renews it)."""

    async def crash() -> Any:
        crashed = store.lock(h)
        await crashed.__aenter__()
        return crashed  # kept referenced: a collected generator would release on finalisation

    return await asyncio.create_task(crash())


async def test_lock_of_a_vanished_holder_expires(make_store: Factory) -> None:
    store = make_store(lock_ttl=0.3, lock_wait=5.0)
    h = new_handle()
    crashed = await vanished_holder(store, h)  # a holder that crashes and never releases
    started = time.monotonic()
    async with store.lock(h):
        waited = time.monotonic() - started
    assert 0.2 <= waited < 2.0
    await crashed.__aexit__(None, None, None)  # a late release is harmless
    async with store.lock(h):
        pass


async def test_release_never_frees_another_holders_lock(make_store: Factory, backend: str) -> None:
    # Where stores can share, the three holders use three stores (as three replicas would), so
    # that the shared lock's token check is what is tested, not just the in-process gate.
    stores = [make_store(lock_ttl=0.4, lock_wait=5.0) for _ in range(1 if backend == "memory" else 3)]
    first, second, third = (stores * 3)[:3]
    h = new_handle()
    stale = await vanished_holder(first, h)  # holds until its lease runs out 0.4 s later
    b_in, b_release, c_in = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def b() -> None:
        async with second.lock(h):
            b_in.set()
            await b_release.wait()

    async def c() -> None:
        async with third.lock(h):
            c_in.set()

    task_b = asyncio.create_task(b())
    await asyncio.wait_for(b_in.wait(), 3)  # b took over the expired lock
    await stale.__aexit__(None, None, None)  # the stale holder "releases" late
    task_c = asyncio.create_task(c())
    await asyncio.sleep(1.0)  # b renews its lease, so it stays valid for all of 2.5 lease periods
    assert not c_in.is_set(), "the stale release freed the current holder's lock"
    b_release.set()
    await asyncio.wait_for(asyncio.gather(task_b, task_c), 3)
    assert c_in.is_set()


async def test_a_cancelled_holder_frees_the_lock(make_store: Factory) -> None:
    store = make_store(lock_wait=1.0)  # lock_ttl stays 5 s: expiry cannot be what frees it
    h = new_handle()
    entered = asyncio.Event()

    async def hold() -> None:
        async with store.lock(h):
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(hold())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with store.lock(h):
        pass


async def test_concurrent_read_modify_write_loses_nothing(ss: ModuleType, make_store: Factory) -> None:
    store = make_store(lock_wait=30.0)
    h = new_handle()
    await store.create(h, "counter", "0")

    async def bump(i: int) -> int:
        async with store.lock(h):
            record = await store.load(h)
            await asyncio.sleep(0)  # give the others every chance to interfere
            saved = await store.compare_and_set(h, record.version, str(int(record.state) + 1))
            assert saved is not None, "a compare_and_set under the lock failed"
            return int(record.version)

    seen = await asyncio.gather(*(bump(i) for i in range(50)))
    assert sorted(seen) == list(range(1, 51))
    assert await store.load(h) == ss.Record("counter", "50", 51)


async def test_compare_and_set_alone_lets_exactly_one_writer_win(make_store: Factory) -> None:
    store = make_store()
    h = new_handle()
    await store.create(h, "wf", "s")
    results = await asyncio.gather(*(store.compare_and_set(h, 1, f"s{i}") for i in range(20)))
    assert sum(result is not None for result in results) == 1


# --- open_store --------------------------------------------------------------------------------


async def test_open_store_understands_the_documented_urls(
    ss: ModuleType, rs: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(ss.open_store("memory"), ss.MemoryStore)
    monkeypatch.chdir(tmp_path)
    relative = ss.open_store("sqlite:///data/rel.db", idle_ttl=5)
    absolute = ss.open_store(f"sqlite:///{tmp_path / 'abs.db'}")  # sqlite:////abs/path
    for store in (relative, absolute):
        assert isinstance(store, ss.SQLiteStore)
        await store.close()
    assert (tmp_path / "data" / "rel.db").exists() and (tmp_path / "abs.db").exists()
    # Redis connects lazily, so these need no server.
    for url in (
        "redis://127.0.0.1:6379/0",
        "redis://:pw@localhost",
        "redis://u:p@h:1/2?prefix=app:",
        "rediss://u:p@h:6380/0",
        f"rediss://h/0?ssl_ca_certs={tmp_path / 'ca.pem'}&prefix=app:",
    ):
        store = ss.open_store(url)
        assert isinstance(store, rs.RedisStore)
        await store.close()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "memory://",
        "Memory",
        "sqlite://",
        "sqlite:///",
        "postgres://u:secret@h/db",
        "unix://:secret@/tmp/redis.sock",
        "redis://:secret@h/notadb",
        "redis://:secret@h/0?db=1",
        "redis://:secret@h/0?socket_timeout=1",
        "redis://:secret@h/0?ssl_ca_certs=/ca.pem",  # TLS files only with rediss://
        "rediss://:secret@h/0?ssl_cert_reqs=none",  # certificates are always checked
        "redis://:secret@h:port/0",
    ],
)
def test_open_store_rejects_anything_else(ss: ModuleType, url: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        ss.open_store(url)
    assert "secret" not in str(excinfo.value)


def test_open_store_rejects_nonsense_timing(ss: ModuleType) -> None:
    for timing in ({"idle_ttl": 0}, {"lock_ttl": -1}, {"lock_wait": -0.1}):
        with pytest.raises(ValueError):
            ss.open_store("memory", **timing)


def test_store_module_stands_alone_without_fusiongen() -> None:
    """A server's copy imports only the standard library (redis-py is optional and imported lazily)."""
    source = SOURCE.read_text()
    for marker in ("{{", "{%", "{#"):
        assert marker not in source
    compile(source, str(SOURCE), "exec")
    assert "import fusiongen" not in source and "from fusiongen" not in source


# --- SQLite ----------------------------------------------------------------------------------

CHILD = """
import asyncio, importlib.util, json, os, signal, sys, time

template, db, mode = sys.argv[1:4]
# The runtime folder as a package of its own, as a generated server holds its copy (state_store imports siblings).
runtime = os.path.dirname(template)
spec = importlib.util.spec_from_file_location(
    "srv", os.path.join(runtime, "__init__.py"), submodule_search_locations=[runtime]
)
package = importlib.util.module_from_spec(spec)
sys.modules["srv"] = package
spec.loader.exec_module(package)
import srv.state_store as ss

async def crash_after_commit():
    store = ss.SQLiteStore(db)
    await store.create("h", "order", "draft")
    assert await store.compare_and_set("h", 1, "paid") is not None
    print("committed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

async def contend():
    store = ss.SQLiteStore(db, lock_wait=20.0)
    open(db + ".ready." + str(os.getpid()), "w").close()
    while not os.path.exists(db + ".go"):
        time.sleep(0.005)
    spans = []
    for _ in range(8):
        async with store.lock("shared"):
            entered = time.time()
            record = await store.load("shared")
            time.sleep(0.01)  # a non-async pause: it holds the whole process, not just the lock
            assert await store.compare_and_set("shared", record.version, "x") is not None
            spans.append((entered, time.time()))
    await store.close()
    print(json.dumps(spans))

asyncio.run(crash_after_commit() if mode == "crash" else contend())
"""


def run_child(db: Path, mode: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", CHILD, str(SOURCE), str(db), mode]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_sqlite_survives_closing_and_reopening(ss: ModuleType, tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    store = ss.SQLiteStore(db)
    await store.create("h", "order", "draft")
    await store.compare_and_set("h", 1, "placed")
    await store.close()
    store = ss.SQLiteStore(db)
    assert await store.load("h") == ss.Record("order", "placed", 2)
    # What the durability promise rests on: WAL, and a full fsync at every commit.
    assert store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    await store.close()


async def test_sqlite_loses_nothing_when_killed_after_a_commit(ss: ModuleType, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    child = run_child(db, "crash")
    out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err
    assert out.strip() == "committed"
    store = ss.SQLiteStore(str(db))
    assert await store.load("h") == ss.Record("order", "paid", 2)
    await store.close()


async def test_sqlite_lock_excludes_other_processes(ss: ModuleType, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = ss.SQLiteStore(str(db))
    await store.create("shared", "counter", "x")
    await store.close()
    children = [run_child(db, "contend") for _ in range(2)]
    deadline = time.monotonic() + 20
    while len(list(tmp_path.glob("state.db.ready.*"))) < 2:  # start both at once, to contend
        assert time.monotonic() < deadline and all(c.poll() is None for c in children)
        await asyncio.sleep(0.01)
    (tmp_path / "state.db.go").touch()
    spans = []
    for child in children:
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        spans += json.loads(out)
    spans.sort()
    for (_, left_exit), (right_enter, _) in itertools.pairwise(spans):
        assert left_exit <= right_enter, "two processes were inside the lock at once"
    store = ss.SQLiteStore(str(db))
    record = await store.load("shared")
    assert record is not None and record.version == 17
    await store.close()


async def test_sqlite_stores_on_one_file_share_state_and_locks(ss: ModuleType, tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    a, b = ss.SQLiteStore(db, lock_wait=0.2), ss.SQLiteStore(db, lock_wait=0.2)
    await a.create("h", "wf", "s0")
    assert await b.compare_and_set("h", 1, "s1") is not None
    assert await a.load("h") == ss.Record("wf", "s1", 2)
    async with a.lock("h"):
        with pytest.raises(ss.LockTimeout):
            async with b.lock("h"):
                pass
    async with b.lock("h"):
        pass
    await a.close()
    await b.close()


# --- Redis -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def redis_admin(url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A plain redis-py client beside the store, to look at and meddle with what the store wrote."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_redis_replicas_share_state_and_locks(ss: ModuleType, rs: ModuleType, redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    a = rs.RedisStore(redis_url, prefix=prefix, lock_wait=0.2)
    b = rs.RedisStore(redis_url, prefix=prefix, lock_wait=0.2)
    other = rs.RedisStore(redis_url, prefix=f"other:{uuid.uuid4().hex}:")
    h = new_handle()
    await a.create(h, "order", "draft")
    assert await b.load(h) == ss.Record("order", "draft", 1)
    assert await b.compare_and_set(h, 1, "placed") == ss.Record("order", "placed", 2)
    assert await a.compare_and_set(h, 1, "lost") is None
    assert await other.load(h) is None  # another prefix is another store
    async with a.lock(h):
        with pytest.raises(ss.LockTimeout):
            async with b.lock(h):
                pass
    async with b.lock(h):
        pass
    for store in (a, b, other):
        await store.close()


async def test_redis_key_layout_and_idle_expiry(rs: ModuleType, redis_url: str) -> None:
    """The keys are <prefix>record:<handle> (a hash), <prefix>lock:<handle> and <prefix>fence:<handle>: servers
    of an older version sharing the Redis during a rolling upgrade must find the same keys."""
    prefix = f"test:{uuid.uuid4().hex}:"
    store = rs.RedisStore(f"{redis_url}?prefix={prefix}", prefix="ignored:", idle_ttl=100.0)
    async with redis_admin(redis_url) as admin:
        await store.create("h", "wf", "s")
        assert 99_000 < await admin.pttl(f"{prefix}record:h") <= 100_000
        fields = await admin.hgetall(f"{prefix}record:h")
        assert {k: v for k, v in fields.items() if k != b"op"} == {b"workflow": b"wf", b"state": b"s", b"version": b"1"}
        async with store.lock("h") as fence:
            assert await admin.get(f"{prefix}fence:h") == str(fence).encode()
            assert await admin.exists(f"{prefix}lock:h") == 1
        assert await admin.exists(f"{prefix}lock:h") == 0
        assert await admin.keys("ignored:*") == []
    await store.close()


async def test_redis_store_reloads_scripts_after_a_script_flush(ss: ModuleType, rs: ModuleType, redis_url: str) -> None:
    store = rs.RedisStore(redis_url, prefix=f"test:{uuid.uuid4().hex}:")
    async with redis_admin(redis_url) as admin:
        await store.create("h", "wf", "s0")
        await admin.script_flush()  # EVALSHA now answers NOSCRIPT
        assert await store.compare_and_set("h", 1, "s1") == ss.Record("wf", "s1", 2)
    await store.close()


def kill_normal_clients_blocking(redis_url: str) -> int:
    """CLIENT KILL over a plain blocking socket, so the event loop cannot notice in between."""
    port = urlsplit(redis_url).port
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"*4\r\n$6\r\nCLIENT\r\n$4\r\nKILL\r\n$4\r\nTYPE\r\n$6\r\nnormal\r\n")
        reply = sock.recv(64)
    assert reply.startswith(b":"), reply
    return int(reply[1:].strip())


async def test_redis_store_reconnects_after_its_connections_are_killed(
    ss: ModuleType, rs: ModuleType, redis_url: str
) -> None:
    store = rs.RedisStore(redis_url, prefix=f"test:{uuid.uuid4().hex}:")
    async with redis_admin(redis_url) as admin:
        await store.create("h", "wf", "s0")
        await asyncio.gather(*(store.load("h") for _ in range(6)))  # several pooled connections
        # Killed while the loop runs: the client may notice the closed sockets before reusing them.
        assert await admin.client_kill_filter(_type="normal") >= 1  # the caller is spared
        await asyncio.sleep(0.05)
        assert await asyncio.gather(*(store.load("h") for _ in range(6))) == [ss.Record("wf", "s0", 1)] * 6
    # Killed behind the loop's back: the next command meets a dead connection and must retry.
    assert kill_normal_clients_blocking(redis_url) >= 2
    assert await asyncio.gather(*(store.load("h") for _ in range(6))) == [ss.Record("wf", "s0", 1)] * 6
    kill_normal_clients_blocking(redis_url)
    assert await store.compare_and_set("h", 1, "s1") == ss.Record("wf", "s1", 2)  # applied once
    kill_normal_clients_blocking(redis_url)
    async with store.lock("h"):
        pass
    assert await store.load("h") == ss.Record("wf", "s1", 2)
    await store.close()


def test_redis_store_retries_once_and_bounds_its_pool_and_timeouts(rs: ModuleType, redis_url: str) -> None:
    """What makes a broken connection harmless and a dead Redis fail in bounded time: redis-py's own retry
    (once, on a connection or timeout error), socket timeouts, and a bounded pool that waits."""
    store = rs.RedisStore(redis_url)
    pool = store._client.connection_pool
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert pool.max_connections == rs.MAX_CONNECTIONS == 8
    kwargs = pool.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == rs.SOCKET_TIMEOUT
    assert kwargs["retry"]._retries == rs.RETRIES == 1  # get_retries() is redis-py 6+
    assert set(kwargs["retry_on_error"]) == {redis.exceptions.ConnectionError, redis.exceptions.TimeoutError}


async def test_redis_store_is_used_again_after_a_redis_restart(ss: ModuleType, tmp_path: Path) -> None:
    port, stop = start_redis(tmp_path)
    store = ss.open_store(f"redis://127.0.0.1:{port}/0")
    try:
        await store.create("h", "wf", "s0")
        stop()
        with pytest.raises(redis.exceptions.ConnectionError):
            await store.load("h")
        port, stop = start_redis(tmp_path, port=port)  # an empty Redis: nothing was saved
        assert await store.load("h") is None
        await store.create("h", "wf", "s1")
        assert await store.load("h") == ss.Record("wf", "s1", 1)
    finally:
        await store.close()
        stop()


async def test_a_redis_that_never_answers_fails_with_a_timeout(rs: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung Redis (it accepts connections and never answers) is a TimeoutError after the socket timeout and
    one retry, not a call that hangs: the gate makes it STORE_UNAVAILABLE."""
    monkeypatch.setattr(rs, "SOCKET_TIMEOUT", 0.2)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody reads or writes
        store = rs.RedisStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        with pytest.raises(redis.exceptions.TimeoutError):
            await store.load("h")
        await store.close()


async def test_redis_scripts_are_safe_to_repeat(rs: ModuleType, redis_url: str) -> None:
    """A reply lost with its connection makes redis-py run a script again; that must be harmless."""
    record, lock = f"test:{uuid.uuid4().hex}:record", f"test:{uuid.uuid4().hex}:lock"
    fence = f"test:{uuid.uuid4().hex}:fence"
    async with redis_admin(redis_url) as client:

        async def run(script: str, keys: list[str], args: list[object]) -> Any:
            return await client.eval(script, len(keys), *keys, *args)  # type: ignore[arg-type]

        for _ in range(2):
            assert await run(rs._CREATE, [record], ["wf", "s0", 10_000, "op-1"]) == 1
        assert await run(rs._CREATE, [record], ["wf", "s0", 10_000, "op-2"]) == 0
        for _ in range(2):
            assert await run(rs._COMPARE_AND_SET, [record], [1, "s1", 10_000, "op-3"]) == [b"wf", 2]
        assert await run(rs._COMPARE_AND_SET, [record], [1, "s1", 10_000, "op-4"]) is None
        assert await client.hmget(record, ["state", "version"]) == [b"s1", b"2"]
        for _ in range(2):  # a repeated acquisition yields the same fence, it does not take a new one
            assert await run(rs._LOCK, [lock, fence], ["token-1", 10_000, 20_000]) == 1
        assert await run(rs._LOCK, [lock, fence], ["token-2", 10_000, 20_000]) == 0
        for _ in range(2):
            assert await run(rs._RENEW, [lock], ["token-1", 10_000]) == 1
        assert await run(rs._RENEW, [lock], ["token-2", 10_000]) == 0
        for _ in range(2):  # a fenced save repeats like an unfenced one
            args: list[object] = [2, "s2", 10_000, "op-5", "token-1"]
            assert await run(rs._COMPARE_AND_SET, [record, lock], args) == [b"wf", 3]
        assert await run(rs._COMPARE_AND_SET, [record, lock], [3, "s3", 10_000, "op-6", "token-2"]) is None
        assert await run(rs._UNLOCK, [lock], ["token-2"]) == 0
        assert await run(rs._UNLOCK, [lock], ["token-1"]) == 1
        assert await run(rs._LOCK, [lock, fence], ["token-2", 10_000, 20_000]) == 2  # fences grow
        await client.delete(record, lock, fence)


async def test_redis_password_and_database(ss: ModuleType, tmp_path: Path) -> None:
    port, stop = start_redis(tmp_path, "--requirepass", "s3cr:t@")
    try:
        store = ss.open_store(f"redis://:s3cr%3At%40@127.0.0.1:{port}/3")
        await store.create("h", "wf", "s")
        async with redis_admin(f"redis://:s3cr%3At%40@127.0.0.1:{port}/3") as admin:
            assert await admin.exists("fusiongen:record:h") == 1  # default prefix, database 3
        async with redis_admin(f"redis://:s3cr%3At%40@127.0.0.1:{port}/0") as admin:
            assert await admin.exists("fusiongen:record:h") == 0  # not in database 0
        await store.close()
        wrong = ss.open_store(f"redis://:wrong@127.0.0.1:{port}/0")
        with pytest.raises(redis.exceptions.AuthenticationError):
            await wrong.load("h")
        await wrong.close()
    finally:
        stop()


async def test_redis_acl_user(ss: ModuleType, tmp_path: Path) -> None:
    """redis://user:password@host/db logs in as an ACL user; the keys it may touch are all the store needs."""
    acl = ["--user", "default", "off", "--user", "billing", "on", ">p%ss w0rd", "~fusiongen:billing:*", "+@all"]
    port, stop = start_redis(tmp_path, *acl)
    try:
        store = ss.open_store(f"redis://billing:p%25ss%20w0rd@127.0.0.1:{port}/0", namespace="billing")
        await store.create("h", "wf", "s")
        async with store.lock("h") as fence:
            assert await store.compare_and_set("h", 1, "t", fence=fence) == ss.Record("wf", "t", 2)
        assert await store.load("h") == ss.Record("wf", "t", 2)
        await store.close()
        for login in ("billing:wrong@", "", "nobody:p%25ss%20w0rd@"):
            wrong = ss.open_store(f"redis://{login}127.0.0.1:{port}/0", namespace="billing")
            with pytest.raises(redis.exceptions.AuthenticationError) as excinfo:
                await wrong.load("h")
            assert "p%ss" not in str(excinfo.value)
            await wrong.close()
        outside = ss.open_store(f"redis://billing:p%25ss%20w0rd@127.0.0.1:{port}/0", namespace="other")
        with pytest.raises(redis.exceptions.NoPermissionError):  # ACL: not this user's keys
            await outside.create("h", "wf", "s")
        await outside.close()
    finally:
        stop()


async def test_redis_unreachable_raises_connection_error(ss: ModuleType, tmp_path: Path) -> None:
    port, stop = start_redis(tmp_path)
    stop()
    store = ss.open_store(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(redis.exceptions.ConnectionError):
        await store.load("h")
    await store.close()


def without_redis_py(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import redis` (and every `redis.*`) fail in this process, as on a server without the extra."""
    for name in [n for n in sys.modules if n == "redis" or n.startswith("redis.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.delitem(sys.modules, redis_store.__name__)


def test_a_redis_url_without_redis_py_says_what_to_install(ss: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    without_redis_py(monkeypatch)
    with pytest.raises(ImportError):
        import redis  # noqa: F401  -- the premise: redis-py is out of reach
    for url in ("redis://:secret@127.0.0.1:6379/0", "rediss://:secret@h/0"):
        with pytest.raises(ValueError) as excinfo:
            ss.open_store(url, distribution="billing-server")
        message = str(excinfo.value)
        assert "pip install 'billing-server[redis]'" in message and "redis>=5.0.8" in message, message
        assert "secret" not in message
        with pytest.raises(ValueError, match=re.escape("pip install 'redis>=5.0.8,<9'")):
            ss.open_store(url)  # a store opened by hand: no distribution to name
    assert isinstance(ss.open_store("memory"), ss.MemoryStore)  # the other stores do not need it


# --- Redis over TLS ------------------------------------------------------------------------------


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a certificate it signed for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fusiongen test CA")])
    ca = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, public_key=ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]),
            issuer_name=ca_name,
            public_key=key.public_key(),
        )
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """A redis-server with TLS on one port (and plain TCP on another, which start_redis probes): (TLS port,
    plain port, the CA's certificate). Debian's redis-server is built with TLS; if it were not, this fails."""
    ca, cert, key = make_certificates(tmp_path)
    tls_port = free_port()
    tls = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    tls += ["--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no", "--requirepass", "tls-pw"]
    port, stop = start_redis(tmp_path, *tls)
    yield tls_port, port, ca
    stop()


async def test_rediss_with_the_ca_given_in_the_url(ss: ModuleType, tls_redis: tuple[int, int, Path]) -> None:
    tls_port, plain_port, ca = tls_redis
    store = ss.open_store(f"rediss://:tls-pw@127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}", namespace="billing")
    await store.create("h", "wf", "s")
    assert await store.load("h") == ss.Record("wf", "s", 1)
    await store.ping()
    await store.close()
    async with redis_admin(f"redis://:tls-pw@127.0.0.1:{plain_port}/0") as admin:  # the same server
        assert await admin.exists("fusiongen:billing:record:h") == 1
        # The store closed its pool: only this client is left (Redis may see the close a moment later).
        deadline = time.monotonic() + 30
        while (await admin.info("clients"))["connected_clients"] != 1:
            assert time.monotonic() < deadline, "the store's TLS connections stayed open after close()"
            await asyncio.sleep(0.02)


async def test_rediss_refuses_a_server_it_cannot_verify(ss: ModuleType, tls_redis: tuple[int, int, Path]) -> None:
    """Without the CA (only the system's trusted ones) the throw-away certificate fails verification: TLS is
    never silently unverified. And plain redis:// to the TLS port does not get through either."""
    tls_port, _, _ = tls_redis
    store = ss.open_store(f"rediss://:tls-pw@127.0.0.1:{tls_port}/0")
    with pytest.raises(redis.exceptions.ConnectionError, match=r"(?i)certificate"):
        await store.load("h")
    await store.close()
    plain = ss.open_store(f"redis://:tls-pw@127.0.0.1:{tls_port}/0")
    with pytest.raises(redis.exceptions.RedisError):
        await plain.load("h")
    await plain.close()
