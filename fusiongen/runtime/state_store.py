"""Where workflow state lives: the pluggable store behind the server's workflow gating.

Each workflow instance is a *handle* (an unguessable string the server mints) mapped to a
:class:`Record`.  Tools read the record, decide, and write the next state back with
:meth:`StateStore.compare_and_set`, usually while holding :meth:`StateStore.lock` so that two
calls on one handle never interleave -- even when they land on different replicas.

Three stores ship, chosen at start-up by URL (:func:`open_store`): ``memory`` for one process,
``sqlite:///path`` to survive restarts, ``redis://host:port/db`` (or ``rediss://`` for TLS) for
replicas behind a load balancer.  The Redis store is its own module, ``redis_store.py``, because it
needs redis-py, the server's optional ``redis`` extra.  To add your own, write a class with the five
methods of :class:`StateStore` (no base class needed) that keeps the contract the gating code relies on:

* ``version`` starts at 1 and goes up by one on every successful save, so stale writers show;
* create, load and save count as activity; a handle idle for ``idle_ttl`` seconds is gone and
  behaves exactly like one that never existed;
* a lock excludes every holder on every replica and gives up after ``lock_wait`` seconds; it is a
  *lease* of ``lock_ttl`` seconds that a live holder renews every ``lock_ttl / 3`` seconds, so a
  slow holder keeps it while one that crashed (or stopped renewing) loses it ``lock_ttl`` seconds
  later; releasing it never frees a lock somebody else has taken since;
* taking a lock yields a *fence*, an int that grows with every acquisition of the handle, and
  ``compare_and_set(..., fence=f)`` saves only while the lease of fence ``f`` is still held, so a
  holder whose lease was lost can never commit;
* optionally, ``set_pending`` records (or clears) the transition a handler is about to run, without
  changing the state or the version, and every ``compare_and_set`` clears it.  A store without
  ``set_pending`` works, but a crash between a handler and its save then cannot be told apart from a
  call that never ran (docs/spec.md §10.7).

Handles are credentials of sorts, so no message raised here ever contains one.
"""

import asyncio
import contextlib
import itertools
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

# The contract, re-exported: custom stores and handlers import these names from here.
from ._dependencies import EXTRAS, specifier
from ._store_base import LockingStore as LockingStore
from ._store_base import LockTimeout as LockTimeout
from ._store_base import Pending as Pending
from ._store_base import PendingStore as PendingStore
from ._store_base import Record as Record
from ._store_base import StateStore as StateStore

__all__ = ["LockTimeout", "MemoryStore", "Pending", "PendingStore", "Record", "SQLiteStore", "StateStore", "open_store"]

_T = TypeVar("_T")
# Expired records nobody loads again are swept away at most this often (seconds).
_SWEEP_INTERVAL = 60.0


class MemoryStore(LockingStore):
    """Keeps everything in this process: lost on restart, invisible to other replicas."""

    _shared = False

    def __init__(self, *, idle_ttl: float = 86400.0, lock_ttl: float = 5.0, lock_wait: float = 10.0) -> None:
        super().__init__(idle_ttl, lock_ttl, lock_wait)
        self._records: dict[str, tuple[Record, float]] = {}  # handle -> (record, monotonic expiry)
        self._next_sweep = 0.0
        self._fences = itertools.count(1)  # one sequence for all handles: increasing per handle too

    # No method awaits anything, so each one is atomic with respect to other coroutines.
    def _live(self, handle: str, now: float) -> Record | None:
        record, expires_at = self._records.get(handle, (None, 0.0))
        return record if expires_at > now else None

    def _put(self, handle: str, record: Record, now: float) -> Record:
        self._records[handle] = (record, now + self._idle_ttl)
        return record

    async def create(self, handle: str, workflow: str, state: str) -> Record:
        now = time.monotonic()
        if now >= self._next_sweep:  # Otherwise handles nobody loads again would pile up.
            self._records = {h: entry for h, entry in self._records.items() if entry[1] > now}
            self._next_sweep = now + _SWEEP_INTERVAL
        if self._live(handle, now) is not None:
            raise KeyError("handle already exists")
        return self._put(handle, Record(workflow, state, 1), now)

    async def load(self, handle: str) -> Record | None:
        now = time.monotonic()
        record = self._live(handle, now)
        return None if record is None else self._put(handle, record, now)

    async def compare_and_set(
        self, handle: str, expected_version: int, state: str, *, fence: int | None = None
    ) -> Record | None:
        now = time.monotonic()
        record = self._live(handle, now)
        if record is None or record.version != expected_version:
            return None
        if fence is not None and self._fenced_token(handle, fence) is None:
            return None
        return self._put(handle, Record(record.workflow, state, expected_version + 1), now)

    async def set_pending(self, handle: str, version: int, pending: Pending | None, *, fence: int) -> Record | None:
        """Record (or, given None, clear) the transition about to run, iff the version is still ``version`` and
        the lease of ``fence`` is held; the state and the version stay. The new record, else None."""
        now = time.monotonic()
        record = self._live(handle, now)
        if record is None or record.version != version or self._fenced_token(handle, fence) is None:
            return None
        return self._put(handle, Record(record.workflow, record.state, version, pending), now)

    async def _try_lock(self, handle: str, token: str) -> int:
        return next(self._fences)  # The in-process gate already is the whole lock.

    async def _renew(self, handle: str, token: str) -> bool:
        return True

    async def _unlock(self, handle: str, token: str) -> None:
        return None

    async def ping(self) -> None:
        """Always reachable: it is this process."""

    async def close(self) -> None:
        self._records.clear()


_SQLITE_SCHEMA = """
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
CREATE TABLE IF NOT EXISTS workflow_records (handle TEXT PRIMARY KEY, workflow TEXT NOT NULL,
    state TEXT NOT NULL, version INTEGER NOT NULL, expires_at REAL NOT NULL, pending TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workflow_locks (handle TEXT PRIMARY KEY, token TEXT NOT NULL,
    expires_at REAL NOT NULL, fence INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
"""


def _private_file(path: str) -> None:
    """Create the database file (and the folders missing above it) readable by this user only.

    It holds every live handle.  SQLite creates ``-wal`` and ``-shm`` with the database file's mode, so
    they are private too.  An existing file keeps its mode: sharing it with a group was someone's choice.
    """
    missing = [p for p in [Path(path).parent, *Path(path).parent.parents] if not p.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # Another process may create it at the same moment.
            folder.mkdir(mode=0o700)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))


class SQLiteStore(LockingStore):
    """One SQLite file: survives restarts, and processes sharing the file share state and locks.

    WAL with ``synchronous=FULL`` makes every write durable before the call returns, even across
    power loss.  All calls run on one worker thread with one connection, so the event loop never
    blocks and the connection is never used concurrently.  Expiry times are wall-clock, because
    a monotonic clock means nothing to another process or after a reboot.  A new file (and any
    folder created for it) is private to this user: 0600 (0700).

    ``namespace`` (the server's name, from :func:`open_store`) keeps servers that share one file
    apart: a handle is stored as ``<namespace>:<handle>``, so one server never sees another's.
    """

    def __init__(
        self,
        path: str,
        *,
        namespace: str = "",
        idle_ttl: float = 86400.0,
        lock_ttl: float = 5.0,
        lock_wait: float = 10.0,
    ) -> None:
        super().__init__(idle_ttl, lock_ttl, lock_wait)
        self._namespace = f"{namespace}:" if namespace else ""
        if path != ":memory:":
            _private_file(path)
        # Connected now, not lazily, so that a bad path fails at start-up rather than mid-request;
        # isolation_level=None because _transaction() opens every transaction itself.
        self._db = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
        try:
            self._db.executescript(_SQLITE_SCHEMA)
            if "fence" not in [row[1] for row in self._db.execute("PRAGMA table_info(workflow_locks)")]:
                # A file from before fences.  Servers that still write 3-column lock rows then fail
                # loudly instead of taking locks that exclude nobody.
                with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                    self._db.execute("ALTER TABLE workflow_locks ADD COLUMN fence INTEGER NOT NULL DEFAULT 0")
            if "pending" not in [row[1] for row in self._db.execute("PRAGMA table_info(workflow_records)")]:
                with contextlib.suppress(sqlite3.OperationalError):  # a file from before pending transitions
                    self._db.execute("ALTER TABLE workflow_records ADD COLUMN pending TEXT")
        except BaseException:
            self._db.close()
            raise
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state-store-sqlite")
        self._next_sweep = 0.0

    async def _transaction(self, fn: Callable[[sqlite3.Connection, float], _T]) -> _T:
        """Run ``fn(db, now)`` on the worker thread, inside one write transaction."""

        def run() -> _T:
            # IMMEDIATE takes the write lock up front: read-then-write cannot race another process.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._db, time.time())
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return result

        return await asyncio.get_running_loop().run_in_executor(self._worker, run)

    async def create(self, handle: str, workflow: str, state: str) -> Record:
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> bool:
            if now >= self._next_sweep:  # Otherwise handles nobody loads again would pile up.
                self._next_sweep = now + _SWEEP_INTERVAL
                db.execute("DELETE FROM workflow_records WHERE expires_at <= ?", (now,))
                # Released lock rows stay a while, so that fences keep growing across acquisitions.
                db.execute("DELETE FROM workflow_locks WHERE expires_at <= ?", (now - self._idle_ttl,))
            cursor = db.execute(
                "INSERT INTO workflow_records (handle, workflow, state, version, expires_at) VALUES (?, ?, ?, 1, ?)"
                " ON CONFLICT (handle) DO UPDATE SET workflow = excluded.workflow, state = excluded.state,"
                " version = 1, expires_at = excluded.expires_at, pending = NULL"
                " WHERE workflow_records.expires_at <= ?",
                (handle, workflow, state, now + self._idle_ttl, now),
            )
            return cursor.rowcount == 1  # 0 if a live record kept the handle

        if not await self._transaction(run):
            raise KeyError("handle already exists")
        return Record(workflow, state, 1)

    async def load(self, handle: str) -> Record | None:
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> Record | None:
            row = db.execute(
                "SELECT workflow, state, version, pending FROM workflow_records WHERE handle = ? AND expires_at > ?",
                (handle, now),
            ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE workflow_records SET expires_at = ? WHERE handle = ?", (now + self._idle_ttl, handle))
            return Record(row[0], row[1], row[2], Pending.decode(row[3]))

        return await self._transaction(run)

    async def compare_and_set(
        self, handle: str, expected_version: int, state: str, *, fence: int | None = None
    ) -> Record | None:
        token = None if fence is None else self._fenced_token(handle, fence)
        if fence is not None and token is None:
            return None
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> Record | None:
            if (
                token is not None
                and not db.execute(
                    "SELECT 1 FROM workflow_locks WHERE handle = ? AND token = ? AND fence = ? AND expires_at > ?",
                    (handle, token, fence, now),
                ).fetchone()
            ):
                return None  # The lease was lost: somebody else may hold the lock now.
            row = db.execute(
                "SELECT workflow FROM workflow_records WHERE handle = ? AND version = ? AND expires_at > ?",
                (handle, expected_version, now),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE workflow_records SET state = ?, version = ?, expires_at = ?, pending = NULL WHERE handle = ?",
                (state, expected_version + 1, now + self._idle_ttl, handle),
            )
            return Record(row[0], state, expected_version + 1)

        return await self._transaction(run)

    async def set_pending(self, handle: str, version: int, pending: Pending | None, *, fence: int) -> Record | None:
        """Record (or, given None, clear) the transition about to run, iff the version is still ``version`` and
        the lease of ``fence`` is held, checked in the same transaction; the state and the version stay."""
        token = self._fenced_token(handle, fence)
        if token is None:
            return None
        handle = self._namespace + handle
        encoded = None if pending is None else pending.encode()

        def run(db: sqlite3.Connection, now: float) -> Record | None:
            if not db.execute(
                "SELECT 1 FROM workflow_locks WHERE handle = ? AND token = ? AND fence = ? AND expires_at > ?",
                (handle, token, fence, now),
            ).fetchone():
                return None
            row = db.execute(
                "SELECT workflow, state FROM workflow_records WHERE handle = ? AND version = ? AND expires_at > ?",
                (handle, version, now),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE workflow_records SET pending = ?, expires_at = ? WHERE handle = ?",
                (encoded, now + self._idle_ttl, handle),
            )
            return Record(row[0], row[1], version, pending)

        return await self._transaction(run)

    async def _try_lock(self, handle: str, token: str) -> int:
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> int:
            cursor = db.execute(
                "INSERT INTO workflow_locks (handle, token, expires_at, fence) VALUES (?, ?, ?, 1)"
                " ON CONFLICT (handle) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at,"
                " fence = workflow_locks.fence + 1 WHERE workflow_locks.expires_at <= ?",
                (handle, token, now + self._lock_ttl, now),
            )
            if cursor.rowcount != 1:
                return 0  # a live lock row belongs to someone else
            row = db.execute("SELECT fence FROM workflow_locks WHERE handle = ?", (handle,)).fetchone()
            return int(row[0])

        return await self._transaction(run)

    async def _renew(self, handle: str, token: str) -> bool:
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> bool:
            cursor = db.execute(
                "UPDATE workflow_locks SET expires_at = ? WHERE handle = ? AND token = ? AND expires_at > ?",
                (now + self._lock_ttl, handle, token, now),
            )
            return cursor.rowcount == 1

        return await self._transaction(run)

    async def _unlock(self, handle: str, token: str) -> None:
        handle = self._namespace + handle

        def run(db: sqlite3.Connection, now: float) -> None:
            # Expired, not deleted: the row keeps the handle's fence counter.
            db.execute(
                "UPDATE workflow_locks SET expires_at = ? WHERE handle = ? AND token = ? AND expires_at > ?",
                (now, handle, token, now),
            )

        with contextlib.suppress(sqlite3.Error):  # An unreleased lock row merely expires later.
            await self._transaction(run)

    async def ping(self) -> None:
        """Raise if the database cannot be written now (readiness)."""
        await self._transaction(lambda db, now: None)

    async def close(self) -> None:
        await self._release_held()
        await asyncio.get_running_loop().run_in_executor(self._worker, self._db.close)
        self._worker.shutdown()


def _redis_missing(distribution: str) -> str:
    """What to do when a Redis URL is given to a server installed without redis-py."""
    wanted = specifier(EXTRAS["redis"][0])  # the range pyproject.toml declares for the extra
    extra = f"pip install '{distribution}[redis]'" if distribution else f"pip install '{wanted}'"
    return f"a redis:// or rediss:// state store needs redis-py ({wanted}), the server's 'redis' extra: {extra}"


def open_store(
    url: str,
    *,
    namespace: str = "",
    distribution: str = "",
    idle_ttl: float = 86400.0,
    lock_ttl: float = 5.0,
    lock_wait: float = 10.0,
) -> StateStore:
    """Build the store named by ``--state-store``.

    ``memory``; ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``; or
    ``redis://[[user]:password@]host[:port][/db][?prefix=...]`` (``rediss://`` for TLS, which also takes
    ``ssl_ca_certs``, ``ssl_certfile`` and ``ssl_keyfile``).  Anything else: ValueError, also for a Redis
    URL when redis-py is not installed (the message names the extra of ``distribution``, the server's pip
    distribution).  ``namespace`` is the server's name (the generated server passes it): servers sharing
    one SQLite file or one Redis then never see each other's handles.  Redis keys start with
    ``fusiongen:<namespace>:``, unless the URL gives ``?prefix=``, which wins.
    """
    if url == "memory":
        return MemoryStore(idle_ttl=idle_ttl, lock_ttl=lock_ttl, lock_wait=lock_wait)
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        return SQLiteStore(path, namespace=namespace, idle_ttl=idle_ttl, lock_ttl=lock_ttl, lock_wait=lock_wait)
    if url.startswith(("redis://", "rediss://")):
        try:  # Only now: a server without redis-py runs with the other stores.
            from .redis_store import RedisStore
        except ImportError as exc:
            if exc.name != "redis":  # redis_store raises it with this name whatever redis-py lacks
                raise
            raise ValueError(_redis_missing(distribution)) from None
        prefix = f"fusiongen:{namespace}:" if namespace else "fusiongen:"
        return RedisStore(url, prefix=prefix, idle_ttl=idle_ttl, lock_ttl=lock_ttl, lock_wait=lock_wait)
    # Say what was not understood without echoing the URL, which may hold a password.
    scheme = url.partition("://")[0] if "://" in url else url
    shown = scheme if scheme.isidentifier() else "this"
    raise ValueError(
        f"unsupported state store {shown!r}: use 'memory', 'sqlite:///path/to/state.db' or 'redis://host:port/db'"
    )
