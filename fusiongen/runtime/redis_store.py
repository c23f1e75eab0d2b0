"""The Redis state store: workflow records shared by every replica that uses the same Redis and key prefix.

Built on redis-py (``redis.asyncio``), the server's optional ``redis`` extra: a server installed without it
imports and runs with the other stores, and :func:`state_store.open_store` turns the ImportError raised here
into a message that says what to install.  The URL is redis-py's: ``redis://`` or ``rediss://`` (TLS),
``[[user]:password@]host[:port][/db]``, plus our ``?prefix=`` and the TLS file parameters.

Every operation is one Lua script (below, all in one place), so each is atomic in Redis.  redis-py runs a
command again once when its connection breaks (a Redis restart, ``CLIENT KILL``, an idle timeout), so each
script must be safe to repeat: a nonce (``op``) marks the record's last write and a token the lock, and both
recognise a repeat.
"""

import contextlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from ._store_base import LockingStore, Pending, Record

try:
    from redis.asyncio import BlockingConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError as exc:  # not installed, or too old: open_store says how to install the extra
    raise ImportError(f"redis-py >= 5.0.8 is needed for a Redis state store ({exc})", name="redis") from exc

__all__ = ["RedisStore"]

# Connections: at most this many per store (a call waits up to POOL_WAIT seconds for a free one); each
# connect, and each command's reply, may take SOCKET_TIMEOUT seconds.  A command whose connection broke or
# timed out runs once more on a new connection after a short backoff, so a restarted Redis is used again
# at once, and a dead one fails a call within about 2 * SOCKET_TIMEOUT seconds (STORE_UNAVAILABLE).
MAX_CONNECTIONS = 8
POOL_WAIT = 10.0
SOCKET_TIMEOUT = 5.0
RETRIES = 1
# Query parameters a Redis state store URL may carry: ours, and the TLS files redis-py reads (rediss:// only).
_TLS_PARAMETERS = frozenset({"ssl_ca_certs", "ssl_certfile", "ssl_keyfile"})

# --- the Lua scripts -------------------------------------------------------------------------------------
# Keys: KEYS[1] is <prefix>record:<handle> (a hash: workflow, state, version, op, and pending while a
# transition's outcome is unknown) or <prefix>lock:<handle>
# (a string: the holder's token); _LOCK's KEYS[2] is <prefix>fence:<handle> (a counter).  Times are in ms.
_LOAD = """
local r = redis.call('HMGET', KEYS[1], 'workflow', 'state', 'version', 'pending')
if r[1] then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return r
"""
_CREATE = """
local op = redis.call('HGET', KEYS[1], 'op')
if op and op ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[1], 'workflow', ARGV[1], 'state', ARGV[2], 'version', 1, 'op', ARGV[4])
redis.call('HDEL', KEYS[1], 'pending')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
_COMPARE_AND_SET = """
if KEYS[2] and redis.call('GET', KEYS[2]) ~= ARGV[5] then return false end
local r = redis.call('HMGET', KEYS[1], 'workflow', 'version', 'op')
local want = tonumber(ARGV[1])
if not r[1] or (tonumber(r[2]) ~= want and not (r[3] == ARGV[4] and tonumber(r[2]) == want + 1)) then
  return false
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'version', want + 1, 'op', ARGV[4])
redis.call('HDEL', KEYS[1], 'pending')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {r[1], want + 1}
"""
# KEYS[2] is the lock key. Setting the same pending twice is harmless, so this needs no nonce; an empty ARGV[3]
# clears it.
_SET_PENDING = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return false end
local r = redis.call('HMGET', KEYS[1], 'workflow', 'state', 'version')
if not r[1] or tonumber(r[3]) ~= tonumber(ARGV[2]) then return false end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'pending') else redis.call('HSET', KEYS[1], 'pending', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {r[1], r[2]}
"""
_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return fence
end
if redis.call('GET', KEYS[1]) == ARGV[1] then return tonumber(redis.call('GET', KEYS[2])) end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _split_url(url: str, prefix: str) -> tuple[str, str]:
    """(the URL redis-py gets, the key prefix): ``?prefix=`` taken out, everything else checked first, so that
    a mistake fails at start-up with a message that never echoes the URL (it may hold a password)."""
    parts = urlsplit(url)
    db = parts.path.strip("/") or "0"
    if parts.scheme not in ("redis", "rediss") or not db.isdigit():
        raise ValueError("expected a URL like redis://[[user]:password@]host[:port][/db] (or rediss:// for TLS)")
    parts.port  # noqa: B018 -- raises ValueError by itself when the port is malformed
    query = parse_qs(parts.query)
    allowed = {"prefix"} | (_TLS_PARAMETERS if parts.scheme == "rediss" else set())
    if unknown := set(query) - allowed:
        shown = ", ".join(sorted(allowed))
        raise ValueError(f"unknown query parameter(s) {', '.join(sorted(unknown))!r}: {parts.scheme}:// takes {shown}")
    if "prefix" in query:
        prefix = query.pop("prefix")[-1]
    rest = urlencode({name: values[-1] for name, values in query.items()})
    return urlunsplit(parts._replace(query=rest)), prefix


class RedisStore(LockingStore):
    """Records as Redis hashes, shared by every replica that uses the same Redis and prefix.

    Scripts make each operation atomic, PEXPIRE on every touch implements idle expiry, and a
    lock is a ``SET NX PX`` key holding its holder's random token, renewed by PEXPIRE; its fence
    is ``INCR`` of a ``fence:<handle>`` counter that lives ``idle_ttl`` past the last acquisition,
    and a fenced save checks the lock key's token in the same script.  The key prefix keeps servers
    that share one Redis apart: ``?prefix=`` in the URL if given, else ``prefix``; :func:`open_store`
    passes ``fusiongen:<server name>:``, so by default every server has keys of its own.

    Connects lazily; failures raise redis-py's exceptions (``redis.exceptions.RedisError`` and its
    subclasses: ``ConnectionError``, ``TimeoutError``, ``AuthenticationError``, ...).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "fusiongen:",
        idle_ttl: float = 86400.0,
        lock_ttl: float = 5.0,
        lock_wait: float = 10.0,
    ) -> None:
        super().__init__(idle_ttl, lock_ttl, lock_wait)
        client_url, self._prefix = _split_url(url, prefix)
        retried = [RedisConnectionError, RedisTimeoutError]
        pool = BlockingConnectionPool.from_url(
            client_url,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_WAIT,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), RETRIES),
            retry_on_error=retried,
        )
        self._client = Redis(connection_pool=pool)
        # EVALSHA, and EVAL once when Redis answers NOSCRIPT (a restart, SCRIPT FLUSH).
        script = self._client.register_script
        self._load, self._create, self._compare_and_set = script(_LOAD), script(_CREATE), script(_COMPARE_AND_SET)
        self._lock, self._renew_lock, self._unlock_lock = script(_LOCK), script(_RENEW), script(_UNLOCK)
        self._set_pending = script(_SET_PENDING)

    def _key(self, kind: str, handle: str) -> str:
        return f"{self._prefix}{kind}:{handle}"

    async def create(self, handle: str, workflow: str, state: str) -> Record:
        args: list[str | int] = [workflow, state, _ms(self._idle_ttl), secrets.token_hex(8)]
        if await self._create(keys=[self._key("record", handle)], args=args) != 1:
            raise KeyError("handle already exists")
        return Record(workflow, state, 1)

    async def load(self, handle: str) -> Record | None:
        reply: Any = await self._load(keys=[self._key("record", handle)], args=[_ms(self._idle_ttl)])
        match reply:
            case [bytes(workflow), bytes(state), bytes(version), bytes() | None as pending]:
                return Record(workflow.decode(), state.decode(), int(version), Pending.decode(pending))
        return None

    async def compare_and_set(
        self, handle: str, expected_version: int, state: str, *, fence: int | None = None
    ) -> Record | None:
        args: list[str | int] = [expected_version, state, _ms(self._idle_ttl), secrets.token_hex(8)]
        keys = [self._key("record", handle)]
        if fence is not None:
            if (token := self._fenced_token(handle, fence)) is None:
                return None
            keys.append(self._key("lock", handle))
            args.append(token)
        reply: Any = await self._compare_and_set(keys=keys, args=args)
        match reply:
            case [bytes(workflow), int(version)]:
                return Record(workflow.decode(), state, version)
        return None

    async def set_pending(self, handle: str, version: int, pending: Pending | None, *, fence: int) -> Record | None:
        """Record (or, given None, clear) the transition about to run, iff the version is still ``version`` and
        the lease of ``fence`` is held, checked in the same script; the state and the version stay."""
        if (token := self._fenced_token(handle, fence)) is None:
            return None
        keys = [self._key("record", handle), self._key("lock", handle)]
        encoded = "" if pending is None else pending.encode()
        reply: Any = await self._set_pending(keys=keys, args=[token, version, encoded, _ms(self._idle_ttl)])
        match reply:
            case [bytes(workflow), bytes(state)]:
                return Record(workflow.decode(), state.decode(), version, pending)
        return None

    async def _try_lock(self, handle: str, token: str) -> int:
        keys = [self._key("lock", handle), self._key("fence", handle)]
        args: list[str | int] = [token, _ms(self._lock_ttl), _ms(self._idle_ttl + self._lock_ttl)]
        fence: Any = await self._lock(keys=keys, args=args)
        return fence if isinstance(fence, int) else 0

    async def _renew(self, handle: str, token: str) -> bool:
        return bool(await self._renew_lock(keys=[self._key("lock", handle)], args=[token, _ms(self._lock_ttl)]) == 1)

    async def _unlock(self, handle: str, token: str) -> None:
        with contextlib.suppress(OSError, RedisError):  # An unreleased lock key merely expires later.
            await self._unlock_lock(keys=[self._key("lock", handle)], args=[token])

    async def ping(self) -> None:
        """Raise if Redis does not answer now (readiness)."""
        await self._client.ping()

    async def close(self) -> None:
        """Release the locks this process holds, then close every connection of the pool."""
        await self._release_held()
        await self._client.aclose(close_connection_pool=True)
