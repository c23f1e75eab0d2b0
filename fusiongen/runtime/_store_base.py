"""The contract of a workflow state store, and the lease protocol the bundled stores share.

Kept apart from the stores themselves so that each store module (``state_store.py`` for memory and SQLite,
``redis_store.py`` for Redis) depends on this one and on nothing else of the runtime: dependencies point one
way, and ``state_store.open_store`` can import the Redis store (only for a Redis URL) without a cycle.
Custom stores and handlers import these names from ``state_store``, which re-exports them.
"""

import asyncio
import contextlib
import json
import random
import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["LockTimeout", "LockingStore", "Pending", "PendingStore", "Record", "StateStore"]

# Shared-lock polling starts fast so an uncontended hand-over is quick, and backs off so that
# many waiters on one busy handle do not hammer the database or Redis.
_POLL_MIN, _POLL_MAX = 0.005, 0.1


@dataclass(frozen=True)
class Pending:
    """A transition whose handler started but whose outcome was never saved: the server stopped, the store
    failed, or the handler raised. Until it is settled, the workflow's state is in doubt.

    ``key`` is the idempotency key every run of this transition gets; ``attempt`` counts the runs;
    ``retry`` says whether calling the tool again may run its handler again (with the same key) or is
    refused as IN_DOUBT until someone says whether the first run took effect.
    """

    tool: str
    key: str
    attempt: int
    retry: bool

    def encode(self) -> str:
        return json.dumps([self.tool, self.key, self.attempt, self.retry], separators=(",", ":"))

    @staticmethod
    def decode(text: str | bytes | None) -> "Pending | None":
        """The pending transition stored as ``text``; None for none, and for anything unreadable, which only
        a newer server could have written: its record then behaves as before this server knew of pendings."""
        if not text:
            return None
        try:
            tool, key, attempt, retry = json.loads(text)
        except (ValueError, TypeError):
            return None
        if type(tool) is str and type(key) is str and type(attempt) is int and type(retry) is bool:
            return Pending(tool, key, attempt, retry)
        return None


@dataclass(frozen=True)
class Record:
    """One workflow instance: which workflow it runs, where it is, how often it moved, and the transition
    whose outcome is in doubt, if any."""

    workflow: str
    state: str
    version: int
    pending: Pending | None = None


class LockTimeout(Exception):
    """The lock of a handle could not be taken within ``lock_wait`` seconds."""


class StateStore(Protocol):
    """The interface the generated server talks to; implement it to plug in another backend."""

    async def create(self, handle: str, workflow: str, state: str) -> Record:
        """Store a new record at version 1; raise KeyError if the handle is already live."""
        ...

    async def load(self, handle: str) -> Record | None:
        """Return the record (refreshing its idle expiry), or None if unknown or expired."""
        ...

    async def compare_and_set(
        self, handle: str, expected_version: int, state: str, *, fence: int | None = None
    ) -> Record | None:
        """Save ``state`` iff the version is still ``expected_version`` (and, given ``fence``, iff the
        lease that yielded it is still held, checked atomically with the save): the new record, else None."""
        ...

    def lock(self, handle: str) -> AbstractAsyncContextManager[int | None]:
        """Hold (and keep renewing) the handle's lease, excluding every other holder on every replica;
        yield its fence, or None from a store that has no fences (the gate then saves unfenced)."""
        ...

    async def close(self) -> None:
        """Release connections and threads; the store must not be used afterwards."""
        ...


@runtime_checkable
class PendingStore(Protocol):
    """What a store adds to keep pending transitions (all bundled stores do): see the module docstring."""

    async def set_pending(self, handle: str, version: int, pending: Pending | None, *, fence: int) -> Record | None:
        """Save ``pending`` (None: clear it) iff the version is still ``version`` and the lease of ``fence`` is
        held, checked atomically with the save; the state and the version stay. The new record, else None."""
        ...


@dataclass
class _Holder:
    token: str
    expires_at: float  # event-loop time
    released: asyncio.Event
    fence: int = 0  # set once the shared lock is taken
    lost: bool = False  # the lease could not be renewed in time: this holder must not commit


class LockingStore(ABC):
    """The lock protocol shared by the bundled stores: a local gate, then a shared lock.

    The gate excludes the coroutines of this process without polling (waiters sleep on an
    event); unlike ``asyncio.Lock`` it expires ``lock_ttl`` after its last renewal, so an abandoned
    holder wedges a handle no longer than a crashed replica would.  The shared lock (a row, a Redis
    key) then excludes other processes; it is polled with jittered backoff, and for MemoryStore it
    is void.  While held, a background task renews both every ``lock_ttl / 3`` seconds, until the
    holder releases or the task that took the lock ends without releasing (a vanished holder).
    """

    _shared = True  # whether other processes share the lock (MemoryStore: no)

    def __init__(self, idle_ttl: float, lock_ttl: float, lock_wait: float) -> None:
        if idle_ttl <= 0 or lock_ttl <= 0 or lock_wait < 0:
            raise ValueError("idle_ttl and lock_ttl must be positive and lock_wait not negative")
        self._idle_ttl, self._lock_ttl, self._lock_wait = idle_ttl, lock_ttl, lock_wait
        self._gate: dict[str, _Holder] = {}

    @property
    def idle_ttl(self) -> float:
        """Seconds a handle lives without activity: the window of the per-client cap on started records."""
        return self._idle_ttl

    @abstractmethod
    async def _try_lock(self, handle: str, token: str) -> int:
        """Take the shared lock with ``token`` if it is free or expired, never waiting: its new fence, or 0."""

    @abstractmethod
    async def _renew(self, handle: str, token: str) -> bool:
        """Extend the shared lease by ``lock_ttl`` iff it is still live and carries ``token``."""

    @abstractmethod
    async def _unlock(self, handle: str, token: str) -> None:
        """Free the shared lock if it still carries ``token``; best effort, never raise."""

    async def _release_held(self) -> None:
        """Free the shared locks this process still holds, so that a new process can take them at once (close()
        calls it: a server stopped in the middle of a call does not leave its handle locked for the lock TTL)."""
        for handle, holder in list(self._gate.items()):
            await self._unlock(handle, holder.token)

    def _timeout(self) -> LockTimeout:
        return LockTimeout(f"lock not acquired within {self._lock_wait:g} s")

    def _fenced_token(self, handle: str, fence: int) -> str | None:
        """The token of this store's live holder of ``handle`` if it holds ``fence``, else None."""
        holder = self._gate.get(handle)
        if holder is None or holder.fence != fence or holder.lost:
            return None
        return None if holder.expires_at <= asyncio.get_running_loop().time() else holder.token

    async def _keep(self, handle: str, holder: _Holder, owner: asyncio.Task[object] | None) -> None:
        """Renew ``holder``'s lease every ``lock_ttl / 3`` s while its owner lives; mark it lost if that fails."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._lock_ttl / 3)
            if owner is not None and owner.done():
                return  # The holder vanished without releasing: let the lease run out.
            asked = loop.time()
            try:
                renewed = await self._renew(handle, holder.token)
            except Exception:  # A store blip: try again next time, while the lease lasts.
                renewed = None
            if renewed:
                holder.expires_at = asked + self._lock_ttl
            elif renewed is False or loop.time() >= holder.expires_at:
                holder.lost = True
                holder.expires_at = min(holder.expires_at, loop.time())
                holder.released.set()  # Local waiters may take over at once.
                return

    async def _enter_gate(self, handle: str, deadline: float) -> _Holder:
        loop = asyncio.get_running_loop()
        while True:
            now, holder = loop.time(), self._gate.get(handle)
            if holder is None or holder.expires_at <= now:
                if holder is not None:
                    holder.released.set()  # Its waiters would find out at expiry anyway.
                mine = _Holder(secrets.token_hex(16), now + self._lock_ttl, asyncio.Event())
                self._gate[handle] = mine
                return mine
            if now >= deadline:
                raise self._timeout()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(min(deadline, holder.expires_at)):
                    await holder.released.wait()

    @asynccontextmanager
    async def lock(self, handle: str) -> AsyncIterator[int]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._lock_wait
        holder = await self._enter_gate(handle, deadline)
        owner = asyncio.current_task()
        keeper: asyncio.Task[None] | None = None
        if not self._shared:  # one process only: the gate is the whole lock, nothing to free elsewhere
            try:
                holder.fence = await self._try_lock(handle, holder.token)
                holder.expires_at = loop.time() + self._lock_ttl
                keeper = asyncio.create_task(self._keep(handle, holder, owner))
                yield holder.fence
            finally:
                if keeper is not None:
                    keeper.cancel()
                if self._gate.get(handle) is holder:
                    del self._gate[handle]
                holder.released.set()
            return
        try:
            delay = _POLL_MIN
            while True:
                asked = loop.time()
                if fence := await self._try_lock(handle, holder.token):
                    break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise self._timeout()
                # Jitter keeps replicas waiting on one handle from polling in lockstep.
                await asyncio.sleep(min(random.uniform(delay / 2, delay), remaining))
                delay = min(delay * 2, _POLL_MAX)
            holder.fence, holder.expires_at = fence, asked + self._lock_ttl
            keeper = asyncio.create_task(self._keep(handle, holder, owner))
            yield fence
        finally:
            if keeper is not None:
                keeper.cancel()
            try:
                # Also after a failed or cancelled acquisition, which may have taken the lock just
                # as it was cancelled: the token check makes that harmless.  Shielded, so that a
                # cancelled holder frees the lock rather than leave it to expire.
                await asyncio.shield(self._unlock(handle, holder.token))
            finally:
                if self._gate.get(handle) is holder:  # Not if it expired and was taken over.
                    del self._gate[handle]
                holder.released.set()
