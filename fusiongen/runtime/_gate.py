"""Workflow gating at run time: which tools a session sees, and whether a call may run now.

The tables come from workflows.py (compiled by fusiongen); the state lives in a StateStore (memory,
SQLite or Redis, chosen at start-up). The call path always enforces, in both protocol eras:

* handshake era (2025-11-25 and older): a call without a handle uses the session's own state (the
  HTTP session id, or this process on stdio). Once the session holds that state (its first such call that
  passes the gate), its tools/list shows only what the state allows, and a change sends
  notifications/tools/list_changed once; a workflow it holds no state of (it walks by handle, or not yet)
  is listed stable, every tool, so clients that list once can walk by handle (docs/spec.md §10.6).
* 2026-07-28: tools/list must not vary per connection, so it shows every tool, and a bound tool
  needs an explicit handle minted by `<workflow>.start`.

Calls on one handle are serialized by the store's lock, so a transition's handler runs at most once:
of two concurrent calls that need the same state, one runs and the other is refused. The lock is a
lease the store renews while the handler runs, and the new state is saved fenced by it: a call whose
lease was lost (its process stalled) cannot commit, and is told so (CONFLICT), never "done.".

Before a transition's handler runs, the store records it as *pending* (tool, idempotency key, attempt);
the save of the new state clears it. A pending transition that is still there on the next call means a
run whose outcome nobody knows (the process died, the store failed, the handler raised): per tool, the
call either runs the handler again with the same `ctx.idempotency_key`, or is refused as IN_DOUBT until
`<workflow>.resolve` is told whether the first run took effect (docs/spec.md §10.7).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._identity import identity_of
from ._results import data_result, error_result, escape_attribute, escape_text, validation_error
from ._runtime import Route, call_outcome
from ._values import FieldError
from .state_store import LockTimeout, Pending, PendingStore, Record, StateStore

logger = logging.getLogger(__name__.rpartition(".")[0])


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    initial: str
    finals: frozenset[str]
    transitions: Mapping[tuple[str, str], str]  # (state, event) → target
    tools_by_state: Mapping[str, tuple[str, ...]]  # the bound tools each state allows
    # The names of the tools generated for it, as the model sees them: `<name>.start` and so on unless the
    # spec's `[server] tool_names` is "snake" (`<name>_start`). Every message naming one uses these.
    start_tool: str = ""
    status_tool: str = ""
    resolve_tool: str = ""

    def __post_init__(self) -> None:
        for suffix in ("start", "status", "resolve"):
            if not getattr(self, f"{suffix}_tool"):
                object.__setattr__(self, f"{suffix}_tool", f"{self.name}.{suffix}")


@dataclass(frozen=True, slots=True)
class Binding:
    workflow: str
    states: frozenset[str]
    event: str | None
    # After a run whose outcome is unknown: run the handler again with the same idempotency key (True), or
    # refuse as IN_DOUBT until <workflow>.resolve settles it (False, the default of destructive tools).
    retry_in_doubt: bool = True


# The outcomes after which a handler may have had its effects although the call failed: the transition
# stays pending. After any other error (invalid arguments, a domain error) the handler did nothing.
IN_DOUBT_OUTCOMES = frozenset({"INTERNAL_ERROR", "OUTPUT_INVALID"})


class WorkflowCall:
    """The context a bound tool's handler gets: the SDK's request context (every attribute of it, such as
    `session` and `request`), plus where the workflow stands.

    * `workflow`, `state`: the workflow and the state the call runs in;
    * `handle`: the handle passed, or None for a session's own state (handshake era);
    * `idempotency_key`: for a call that fires a transition, a key that is the same for every run of this
      transition from this state of this handle (a retry after a crash gets the same key), so a handler can
      pass it to a payment API or keep it in its database to do its effect once; None otherwise;
    * `attempt`: 1 for the first run of the transition, 2 for a run again after an unknown outcome, ...
    """

    __slots__ = ("_request", "attempt", "handle", "idempotency_key", "state", "workflow")

    def __init__(
        self, request: Any, workflow: str, handle: str | None, state: str, idempotency_key: str | None, attempt: int
    ) -> None:
        self._request = request
        self.workflow, self.handle, self.state = workflow, handle, state
        self.idempotency_key, self.attempt = idempotency_key, attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


def idempotency_key(handle: str, workflow: str, event: str, state: str, version: int) -> str:
    """The key of one transition from one visit of a state: a digest, so the handle never shows through it."""
    material = "\0".join((handle, workflow, event, state, str(version)))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class StartLimiter:
    """Two token buckets per client on `<workflow>.start`, for the last `max_clients` clients seen:

    * `per_minute` starts a minute, in bursts of as many: a loop that starts workflows without end is slowed;
    * `live` starts per `window` (the handle idle TTL), refilled at that rate: every start creates a record that
      lives for the idle TTL, so this caps the records one client can keep in the store at about `live`
      (a handle in use lives on, but it is one the client uses, not a record it piles up).

    A client is what `client_key` says identifies a caller; callers it cannot tell apart are not limited here."""

    def __init__(
        self, per_minute: int | None, max_clients: int = 10_000, *, live: int | None = None, window: float = 86400.0
    ) -> None:
        self.per_minute, self.max_clients = per_minute, max_clients
        self.live, self.window = live, window
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client → (tokens, at): per minute
        self.records: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client → (tokens, at): live records

    def wait(self, client: str) -> float:
        """Take one start for `client`: 0.0 if allowed, else the seconds until one is."""
        now = time.monotonic()
        rate = self._level(self.buckets, client, self.per_minute, 60.0, now)
        live = self._level(self.records, client, self.live, self.window, now)
        if rate >= 1.0 and live >= 1.0:
            self._store(self.buckets, client, rate - 1.0, now, self.per_minute)
            self._store(self.records, client, live - 1.0, now, self.live)
            return 0.0
        self._store(self.buckets, client, rate, now, self.per_minute)
        self._store(self.records, client, live, now, self.live)
        waits = [(1.0 - rate) * 60.0 / self.per_minute if self.per_minute and rate < 1.0 else 0.0]
        waits.append((1.0 - live) * self.window / self.live if self.live and live < 1.0 else 0.0)
        return max(waits)

    @staticmethod
    def _level(
        buckets: OrderedDict[str, tuple[float, float]], client: str, size: int | None, period: float, now: float
    ) -> float:
        if not size:
            return float("inf")  # this bucket is off
        tokens, at = buckets.pop(client, (float(size), now))
        return min(float(size), tokens + (now - at) * size / period)

    def _store(
        self, buckets: OrderedDict[str, tuple[float, float]], client: str, tokens: float, now: float, size: int | None
    ) -> None:
        if not size:
            return
        buckets[client] = (tokens, now)
        while len(buckets) > self.max_clients:
            buckets.popitem(last=False)


def client_key(ctx: Any, *, by_address: bool = False) -> str | None:
    """Who is starting workflows, as far as the server can tell callers apart: the authenticated subject (with its
    tenant), else the HTTP session (handshake era), else the process (stdio, in-process). The peer address only
    when the operator says it is the client (`by_address`, --start-limit-by-address): behind a proxy or a NAT every
    client has the same address, and one client would use up everyone's starts. None: a caller that cannot be
    told apart from others (an unauthenticated 2026-07-28 client over HTTP), which no per-client limit keys."""
    identity = identity_of(ctx)
    if identity is not None:
        material = f"{identity.tenant or ''}\0{identity.subject}".encode("utf-8", "surrogatepass")
        return "subject:" + hashlib.sha256(material).hexdigest()[:32]
    request = getattr(ctx, "request", None)
    if request is None:
        return "process"
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    if session_id:
        return "session:" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    peer = getattr(request, "client", None)
    host = getattr(peer, "host", None)
    return f"peer:{host}" if by_address and isinstance(host, str) else None


def is_modern(ctx: Any) -> bool:
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def _actions(names: tuple[str, ...] | list[str]) -> str:
    return "".join(f"<action>{escape_text(n)}</action>" for n in names)


def _details(details: dict[str, str]) -> str:
    return "".join(f'<detail key="{escape_attribute(k)}">{escape_text(v)}</detail>' for k, v in details.items())


def forbidden(
    tool: str, message: str, recovery: str, actions: tuple[str, ...] | list[str], details: dict[str, str]
) -> types.CallToolResult:
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="FORBIDDEN" severity="error">'
        f"<message>{escape_text(message)}</message><recovery>{escape_text(recovery)}</recovery>"
        f"<available_actions>{_actions(actions)}</available_actions><details>{_details(details)}</details>"
        "</tool_error>"
    )


# How long an agent should wait before retrying a call that found the state store unavailable: a lost Redis
# connection is re-opened on the next call, so a store that is back is used at once.
STORE_RETRY_AFTER = 2


def store_failed(tool: str, workflow: str, exc: Exception) -> types.CallToolResult:
    """The state store raised (Redis down, a broken database): the details go to the log, never to the client."""
    logger.error("tool %s: the state store of workflow %s failed: %s: %s", tool, workflow, type(exc).__name__, exc)
    details = {"workflow": workflow, "retry_after": str(STORE_RETRY_AFTER)}
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="STORE_UNAVAILABLE" severity="error"><message>The state '
        f'of workflow "{escape_text(workflow)}" cannot be read or saved right now.</message><recovery>Retry in '
        f"{STORE_RETRY_AFTER} seconds; if it keeps failing, tell the user the tool is unavailable.</recovery>"
        f"<details>{_details(details)}</details></tool_error>"
    )


def transition_lost(tool: str, workflow: str, target: str, status: str) -> types.CallToolResult:
    """The handler ran, but its transition could not be saved: its lease was lost, or the state moved meanwhile."""
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="CONFLICT" severity="error"><message>Tool '
        f'"{escape_text(tool)}" ran, but workflow "{escape_text(workflow)}" changed or was taken over by another '
        f'call meanwhile, so its move to state "{escape_text(target)}" was not saved.</message><recovery>Call '
        f"{escape_text(status)} to see the current state; the tool's effects may have happened, so "
        "check them before calling it again.</recovery></tool_error>"
    )


def busy(tool: str) -> types.CallToolResult:
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="BUSY" severity="error"><message>Another call '
        "on this workflow is still running.</message><recovery>Retry in a moment.</recovery></tool_error>"
    )


def in_doubt(tool: str, workflow: str, pending: Pending, resolve: str) -> types.CallToolResult:
    """A transition of a tool that must not simply run again has an unknown outcome: say which, and how to
    settle it. Every transition of the workflow waits for that (only the tool's own author knows whether
    another one would be safe meanwhile)."""
    first = pending.tool
    recovery = (
        f"Do not simply retry: check whether {first} took effect (ask the user, or look it up), then call "
        f'{resolve} with outcome "completed" if it did, or "not_completed" if it did not.'
    )
    actions = [resolve]
    details = {"workflow": workflow, "pendingTool": first, "attempts": str(pending.attempt)}
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="IN_DOUBT" severity="error"><message>An earlier '
        f'call of {escape_text(first)} on workflow "{escape_text(workflow)}" started but its outcome is unknown '
        "(the server stopped, the state store failed or the handler failed while it ran): its effects may or "
        f"may not have happened.</message><recovery>{escape_text(recovery)}</recovery>"
        f"<available_actions>{_actions(actions)}</available_actions><details>{_details(details)}</details>"
        "</tool_error>"
    )


def not_yours(tool: str, pending_tool: str, reason: str) -> types.CallToolResult:
    """`<workflow>.resolve` of a call the caller may not make itself: refused, and nothing changes."""
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="FORBIDDEN" severity="error"><message>You may not settle '
        f"the call in doubt, a call of {escape_text(pending_tool)}: {escape_text(reason)}.</message><recovery>Do "
        "not retry with the same credentials; ask someone who may call it to check and resolve it.</recovery>"
        "</tool_error>"
    )


def rate_limited(tool: str, wait: float) -> types.CallToolResult:
    seconds = max(1, int(wait + 0.999))
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="RATE_LIMITED" severity="error"><message>Too many '
        "workflows started from this client.</message><recovery>Reuse a handle you already have, or retry in "
        f'{seconds} seconds.</recovery><details><detail key="retry_after">{seconds}</detail></details></tool_error>'
    )


def session_key(session_id: str, workflow: str) -> str:
    """Where a session's own state of `workflow` is kept. The session id is a credential, so the store
    holds only a digest of it: whoever can read the store cannot replay a live session from it."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"session:{digest}:{workflow}"


def tenant_scoped(ctx: Any, key: str) -> str:
    """Where a handle's (or a session's) state is kept for this caller: under its tenant when its identity has
    one ([auth] tenant_claim), so a handle minted for tenant A is unknown to tenant B, as if it did not exist;
    the key itself unchanged otherwise. The tenant appears as a digest: store keys are not a place for names."""
    identity = identity_of(ctx)
    if identity is None or identity.tenant is None:
        return key
    digest = hashlib.sha256(identity.tenant.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"tenant:{digest}:{key}"


@dataclass
class _Listed:
    """Whether a call changed the calling session's handshake-era list (set by `Gate.gated`)."""

    changed: bool = False


class Gate:
    def __init__(
        self,
        store: StateStore,
        machines: Mapping[str, Machine],
        bindings: Mapping[str, Binding],
        handle_key: str,
        *,
        starts_per_minute: int | None = None,
        refusal: Callable[[str, Any], str | None] | None = None,
        live_starts: int | None = None,
        limit_by_address: bool = False,
    ) -> None:
        self.store = store
        # Why the caller may not call a tool (its `requires`, checked by `_auth`), or None: `<workflow>.resolve`
        # settles a call of that tool, so whoever may not call it may not settle it either.
        self.refusal = refusal
        self.machines = machines
        self.bindings = bindings
        self.handle_key = handle_key
        # The workflow each of its tools belongs to (bound tools, W.start, W.status), for the call's span.
        self.workflow_of: dict[str, str] = {tool: binding.workflow for tool, binding in bindings.items()}
        for name in machines:
            self.workflow_of.update({machines[name].start_tool: name, machines[name].status_tool: name})
        # A store written for the fence-less interface (§10.9), or a wrapper around a bundled store that
        # forwards lock() but not fence=, is saved unfenced: only the version then protects the save.
        self.fenced = "fence" in inspect.signature(store.compare_and_set).parameters
        # Pending transitions need fences too: a stale holder must not clear a pending it no longer owns.
        self.pending_store = store if self.fenced and isinstance(store, PendingStore) else None
        self.pends = self.pending_store is not None
        window = getattr(store, "idle_ttl", None)  # a custom store (§10.9) may not say: the default TTL
        window = float(window) if isinstance(window, float | int) else 86400.0
        limited = starts_per_minute or live_starts
        self.limiter = StartLimiter(starts_per_minute, live=live_starts, window=window) if limited else None
        self.limit_by_address = limit_by_address
        # <workflow>.resolve exists for the workflows with a tool that refuses to run again when in doubt.
        self.resolvable = frozenset(b.workflow for b in bindings.values() if not b.retry_in_doubt)
        # stdio and in-process connections have no session id: one session state per server instance.
        self.process_session = secrets.token_hex(8)

    # --- whose state --------------------------------------------------------------------------------
    def session_handle(self, ctx: Any, workflow: str) -> str | None:
        """The implicit handle of the caller's session (handshake era only)."""
        if is_modern(ctx):
            return None
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        return tenant_scoped(ctx, session_key(session_id or self.process_session, workflow))

    async def session_states(self, ctx: Any) -> dict[str, str]:
        """Every workflow's state for the caller's session: its own state where it holds one, else the initial."""
        held = await self.held_states(ctx)
        return {name: held.get(name, machine.initial) for name, machine in self.machines.items()}

    async def held_states(self, ctx: Any) -> dict[str, str]:
        """The workflows the caller's session walks by session (handshake era), and the state of each.

        A session holds a workflow's state from its first call of one of the workflow's bound tools without a
        handle (the gate creates the record then, docs/spec.md §10.5); `W.start` mints a handle and creates
        nothing for the session. A workflow the session holds no state of is listed stable (every tool, the
        gate refusing on call), so a client that lists once can walk it by handle; one it holds is listed as
        its state allows, with notifications/tools/list_changed on each transition."""
        states: dict[str, str] = {}
        for name in self.machines:
            handle = self.session_handle(ctx, name)
            try:
                record = await self.store.load(handle) if handle else None
            except Exception as exc:  # the store failed: say so without its details, which go to the log
                logger.error("tools/list: the state store of workflow %s failed: %s: %s", name, type(exc).__name__, exc)
                message = "The workflow state cannot be read right now; retry in a moment."
                data = {"code": "STORE_UNAVAILABLE", "retry_after": STORE_RETRY_AFTER}
                raise MCPError(INTERNAL_ERROR, message, data) from None
            if record is not None and record.workflow == name:
                states[name] = record.state
        return states

    def allowed(self, machine: Machine, state: str) -> tuple[str, ...]:
        return machine.tools_by_state.get(state, ())

    # --- refusals -----------------------------------------------------------------------------------
    def needs_handle(self, tool: str, machine: Machine) -> types.CallToolResult:
        start = machine.start_tool
        return forbidden(
            tool,
            f'Tool "{tool}" needs a workflow handle: pass "{self.handle_key}".',
            f"Call {start} to get a {self.handle_key}, then call this tool with it.",
            [start],
            {"workflow": machine.name},
        )

    def unknown_handle(self, tool: str, machine: Machine) -> types.CallToolResult:
        start = machine.start_tool
        return forbidden(
            tool,
            f'Unknown or expired {self.handle_key} for workflow "{machine.name}".',
            f"Call {start} for a new one; handles are never created implicitly.",
            [start],
            {"workflow": machine.name},
        )

    def wrong_state(self, tool: str, machine: Machine, binding: Binding, state: str) -> types.CallToolResult:
        """Refused outside the tool's states. A workflow in a final state is done for good (docs/spec.md §10.5):
        the way on is another one, from `W.start`, which the refusal offers."""
        allowed = self.allowed(machine, state)
        done = not allowed and state in machine.finals
        return forbidden(
            tool,
            f'Tool "{tool}" is not available in the current state ("{state}") of workflow "{machine.name}".',
            "Call one of the available actions first."
            if allowed
            else f'Workflow "{machine.name}" is in its final state: nothing more can be done with it. For another '
            f"one, call {machine.start_tool} and pass the {self.handle_key} it returns."
            if done
            else f'No tool of workflow "{machine.name}" can run in state "{state}".',
            [machine.start_tool] if done else allowed,
            {"workflow": machine.name, "currentState": state, "requiredStates": ", ".join(sorted(binding.states))},
        )

    # --- the call path ------------------------------------------------------------------------------
    async def known(self, handle: str, machine: Machine) -> bool:
        """Whether the store holds `handle` for `machine`: read before the lock is taken, because taking it writes
        (a lock and a fence for the handle), and nothing may be written for a handle the store does not know:
        random handles would otherwise grow the store. A record that goes between this and the lock is found
        gone under the lock, as before."""
        record = await self.store.load(handle)
        return record is not None and record.workflow == machine.name

    def resolve_tool(self, machine: Machine) -> str | None:
        return machine.resolve_tool if machine.name in self.resolvable else None

    async def call(self, tool: str, arguments: Mapping[str, Any], ctx: Any, route: Route) -> types.CallToolResult:
        """A bound call through the gate; `notifications/tools/list_changed` after it when the session's own
        list changed: its state moved, or this call made the session hold the workflow's state (§10.5), which
        turns the workflow's part of the list from the stable one to the state's."""
        listed = _Listed()
        result = await self.gated(tool, arguments, ctx, route, listed)
        if listed.changed:
            await ctx.session.send_tool_list_changed()
        return result

    async def gated(
        self, tool: str, arguments: Mapping[str, Any], ctx: Any, route: Route, listed: _Listed
    ) -> types.CallToolResult:
        binding = self.bindings[tool]
        machine = self.machines[binding.workflow]
        rest = dict(arguments)
        handle = rest.pop(self.handle_key, None)
        if handle is not None and type(handle) is not str:
            return validation_error(
                tool, [FieldError(self.handle_key, f"expected a string handle from {machine.start_tool}.")]
            )
        implicit = handle is None
        if handle is not None and ":" in handle:  # minted handles never hold ":"; session keys do and stay private
            return self.unknown_handle(tool, machine)
        if implicit:
            handle = self.session_handle(ctx, machine.name)
            if handle is None:
                return self.needs_handle(tool, machine)
        shown = None if implicit else handle  # what the caller passed; `handle` from here on is the store's key
        handle = handle if implicit else tenant_scoped(ctx, handle)
        if not implicit:
            try:
                known = await self.known(handle, machine)
            except Exception as exc:
                return store_failed(tool, machine.name, exc)
            if not known:
                return self.unknown_handle(tool, machine)
        changed: Record | None = None
        lost: str | None = None  # the target of a transition that could not be saved
        routing = False  # whether an exception comes from the route (it propagates) or from the store
        try:
            async with self.store.lock(handle) as fence:
                record = await self.store.load(handle)
                fresh = record is None and implicit  # the session's first session-mode call of this workflow
                if fresh:
                    record = Record(machine.name, machine.initial, 0)
                if record is None or record.workflow != machine.name:
                    return self.unknown_handle(tool, machine)
                if record.state not in binding.states:
                    return self.wrong_state(tool, machine, binding, record.state)  # a refusal creates nothing
                if fresh:  # it passes the gate: the session holds the workflow's state from now on (§10.5)
                    record = await self.store.create(handle, machine.name, machine.initial)
                    listed.changed = True
                target = machine.transitions.get((record.state, binding.event)) if binding.event else None
                if target is None or target == record.state:  # no transition: nothing to record or save
                    routing = True
                    return await route(rest, WorkflowCall(ctx, machine.name, shown, record.state, None, 1))
                pending = self.this_run(tool, binding, machine, handle, record)
                if not isinstance(pending, Pending):
                    return pending  # IN_DOUBT
                store = self.pending_store
                if (
                    store is not None
                    and fence is not None
                    and not await store.set_pending(handle, record.version, pending, fence=fence)
                ):
                    return busy(tool)  # the lease was lost before the handler even started
                call = WorkflowCall(ctx, machine.name, shown, record.state, pending.key, pending.attempt)
                routing = True
                result = await route(rest, call)
                routing = False
                if result.is_error:
                    if store is not None and fence is not None and call_outcome(result) not in IN_DOUBT_OUTCOMES:
                        await self.settle_failure(store, tool, handle, record.version, fence)
                    return result
                if fence is None or not self.fenced:  # a custom store without fences (§10.9)
                    changed = await self.store.compare_and_set(handle, record.version, target)
                else:
                    changed = await self.store.compare_and_set(handle, record.version, target, fence=fence)
                if changed is None:  # only if the lease was lost while the handler ran
                    lost = target
                    logger.error(
                        "tool %s: workflow %s changed while its handler ran; transition to %s lost",
                        tool,
                        machine.name,
                        target,
                    )
        except LockTimeout:
            return busy(tool)
        except Exception as exc:
            if routing:
                raise
            return store_failed(tool, machine.name, exc)
        if lost is not None:
            return transition_lost(tool, machine.name, lost, machine.status_tool)
        if changed is not None and implicit:
            listed.changed = True
        return result

    def this_run(
        self, tool: str, binding: Binding, machine: Machine, handle: str, record: Record
    ) -> Pending | types.CallToolResult:
        """What this call of a transition is, given what the record says is pending: a first run (a new key), a
        run again of the same transition (its key, the next attempt), or IN_DOUBT."""
        found = record.pending if self.pends else None
        if found is not None and not found.retry:  # every transition waits for <workflow>.resolve
            return in_doubt(tool, machine.name, found, machine.resolve_tool)
        if found is not None and found.tool == tool:
            return Pending(tool, found.key, found.attempt + 1, found.retry)
        # Nothing pending, or a tool safe to run again was abandoned for another one: a first run.
        key = idempotency_key(handle, machine.name, str(binding.event), record.state, record.version)
        return Pending(tool, key, 1, binding.retry_in_doubt)

    async def settle_failure(self, store: PendingStore, tool: str, handle: str, version: int, fence: int) -> None:
        """The handler failed without effect (invalid arguments, a domain error): nothing is in doubt."""
        try:
            cleared = await store.set_pending(handle, version, None, fence=fence)
        except Exception as exc:
            cleared = None
            logger.error("tool %s: its pending transition could not be cleared: %s: %s", tool, type(exc).__name__, exc)
        if cleared is None:
            logger.warning("tool %s: its failed call stays pending (in doubt) on the state store", tool)

    # --- generated tools: <workflow>.start and <workflow>.status ---------------------------------------
    def describe(self, machine: Machine, handle: str | None, record: Record) -> types.CallToolResult:
        data: dict[str, Any] = {
            self.handle_key: handle,
            "workflow": machine.name,
            "state": record.state,
            "allowed_tools": list(self.allowed(machine, record.state)),
            "final": record.state in machine.finals,
            "pending": None,
        }
        if record.pending is not None and self.pends:
            resolve = self.resolve_tool(machine)
            data["pending"] = {
                "tool": record.pending.tool,
                "attempts": record.pending.attempt,
                "next": f"call {record.pending.tool} again"
                if record.pending.retry or resolve is None
                else f"check whether it took effect, then call {resolve}",
            }
        return data_result(data, data)

    async def start(self, machine: Machine, arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        if arguments:
            names = ", ".join(sorted(arguments))
            return validation_error(
                machine.start_tool, [FieldError(names, "unknown field; this tool takes no arguments.")]
            )
        client = client_key(ctx, by_address=self.limit_by_address) if self.limiter is not None else None
        if self.limiter is not None and client is not None and (wait := self.limiter.wait(client)) > 0:
            return rate_limited(machine.start_tool, wait)
        handle = secrets.token_urlsafe(24)
        try:
            record = await self.store.create(tenant_scoped(ctx, handle), machine.name, machine.initial)
        except Exception as exc:
            return store_failed(machine.start_tool, machine.name, exc)
        return self.describe(machine, handle, record)

    async def status(self, machine: Machine, arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        tool = machine.status_tool
        unknown = [
            FieldError(k, f'unknown field; the only argument is "{self.handle_key}".')
            for k in arguments
            if k != self.handle_key
        ]
        handle = arguments.get(self.handle_key)
        if handle is not None and type(handle) is not str:
            unknown.append(FieldError(self.handle_key, "expected a string handle."))
        if unknown:
            return validation_error(tool, unknown)
        if handle is None:
            handle = self.session_handle(ctx, machine.name)
            if handle is None:
                return self.needs_handle(tool, machine)
            try:
                record = await self.store.load(handle)
            except Exception as exc:
                return store_failed(tool, machine.name, exc)
            # The session's own state has no handle to show; before its first call it is the initial state.
            return self.describe(machine, None, record or Record(machine.name, machine.initial, 0))
        try:
            record = None if ":" in handle else await self.store.load(tenant_scoped(ctx, handle))
        except Exception as exc:
            return store_failed(tool, machine.name, exc)
        if record is None or record.workflow != machine.name:
            return self.unknown_handle(tool, machine)
        return self.describe(machine, handle, record)

    async def resolve(self, machine: Machine, arguments: Mapping[str, Any], ctx: Any) -> types.CallToolResult:
        """`<workflow>.resolve`: settle a transition in doubt, on the word of whoever checked its effects.

        "completed": its effects happened, so the workflow moves on as if the call had succeeded (no handler
        runs). "not_completed": they did not, so the next call of that tool runs its handler again, with the
        same idempotency key (in case they did after all). Only a pending transition can be resolved, and only
        a handler that started leaves one: this never moves a workflow along a transition nobody attempted.
        """
        tool = machine.resolve_tool
        problems = [
            FieldError(k, f'unknown field; the arguments are "{self.handle_key}" and "outcome".')
            for k in arguments
            if k not in (self.handle_key, "outcome")
        ]
        given, outcome = arguments.get(self.handle_key), arguments.get("outcome")
        if given is not None and type(given) is not str:
            problems.append(FieldError(self.handle_key, "expected a string handle."))
        if outcome not in ("completed", "not_completed"):
            problems.append(FieldError("outcome", 'expected "completed" or "not_completed".'))
        if problems:
            return validation_error(tool, problems)
        implicit = given is None
        handle = self.session_handle(ctx, machine.name) if given is None else str(given)
        if handle is None:
            return self.needs_handle(tool, machine)
        if not implicit and ":" in handle:
            return self.unknown_handle(tool, machine)
        shown = None if implicit else handle  # what the caller passed; `handle` from here on is the store's key
        handle = handle if implicit else tenant_scoped(ctx, handle)
        moved = False
        try:
            if not implicit and not await self.known(handle, machine):
                return self.unknown_handle(tool, machine)
            async with self.store.lock(handle) as fence:
                record = await self.store.load(handle)
                if record is None or record.workflow != machine.name:
                    return self.unknown_handle(tool, machine)
                store = self.pending_store
                pending = record.pending if store is not None else None
                binding = self.bindings.get(pending.tool) if pending is not None else None
                target = machine.transitions.get((record.state, binding.event)) if binding and binding.event else None
                if store is None or pending is None or target is None or fence is None:
                    return forbidden(
                        tool,
                        f'Nothing is in doubt on workflow "{machine.name}": no call has an unknown outcome.',
                        "Call one of the available actions.",
                        self.allowed(machine, record.state),
                        {"workflow": machine.name, "currentState": record.state},
                    )
                reason = self.refusal(pending.tool, ctx) if self.refusal is not None else None
                if reason is not None:  # settling it is calling it: "completed" would fire its transition
                    return not_yours(tool, pending.tool, reason)
                if outcome == "completed":
                    saved = await self.store.compare_and_set(handle, record.version, target, fence=fence)
                    moved = saved is not None
                else:
                    retry = Pending(pending.tool, pending.key, pending.attempt, True)
                    saved = await store.set_pending(handle, record.version, retry, fence=fence)
                if saved is None:
                    return busy(tool)
        except LockTimeout:
            return busy(tool)
        except Exception as exc:
            return store_failed(tool, machine.name, exc)
        if moved and implicit:
            await ctx.session.send_tool_list_changed()
        return self.describe(machine, shown, saved)


def handshake_listing(
    tools: list[types.Tool],
    compact: Mapping[str, types.Tool],
    bindings: Mapping[str, Binding],
    machines: Mapping[str, Machine],
    states: Mapping[str, str],
    stable: Mapping[str, types.Tool] | None = None,
) -> list[types.Tool]:
    """A session's tools in the handshake era (docs/spec.md §10.6): unbound ones; the bound tools of a workflow
    the session holds state of (`states`) as that state allows; every bound tool of any other workflow, as a
    session in the initial state would see it (its compact form) or else in its `stable` form (the 2026-07-28
    listing's, which names its states and the handle), so that a client listing once can walk by handle."""
    visible: list[types.Tool] = []
    for tool in tools:
        binding = bindings.get(tool.name)
        if binding is None:
            visible.append(tool)
            continue
        state = states.get(binding.workflow)
        initial = machines[binding.workflow].initial
        if state is None:  # as in the initial state (its compact form) where it runs there, else the stable form
            short = compact.get(tool.name) if initial in binding.states else None
            visible.append(short or (stable or {}).get(tool.name, tool))
            continue
        if state in binding.states:
            short = compact.get(tool.name)
            visible.append(short if short is not None and state == initial else tool)
    return visible


def omissible_handle(tool: types.Tool, handle_key: str) -> types.Tool:
    """The tool as the handshake era lists it: its handle argument also marked `"nullable": true`.

    On older protocols a bound call may leave the handle out (the session's own state) or send null (the
    same), and a client that reads only `nullable` to tell an optional argument (smolagents refuses, before
    calling, one left out otherwise) must be able to. Only the handshake era: the 2026-07-28 list keeps plain
    JSON Schema, since strict function-calling converters refuse keywords they do not know."""
    schema = tool.input_schema
    properties = schema.get("properties")
    handle = properties.get(handle_key) if isinstance(properties, dict) else None
    if not isinstance(properties, dict) or not isinstance(handle, dict):
        return tool
    marked = {**schema, "properties": {**properties, handle_key: {**handle, "nullable": True}}}
    return tool.model_copy(update={"input_schema": marked})


def handshake_forms(tools: Sequence[types.Tool], gated: Collection[str], handle_key: str) -> list[types.Tool]:
    """`tools` in their handshake-era form: each of the `gated` ones (bound tools, `W.status`: those that take
    the session's own state without a handle) with its handle omissible (`omissible_handle`)."""
    return [omissible_handle(tool, handle_key) if tool.name in gated else tool for tool in tools]
