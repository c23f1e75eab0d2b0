"""Benchmark 4: per-call workflow gating of the generated server against state-machine libraries.

The generated gate of specs/billing.toml (built now, or golden/ with `--golden`): `_gate.Gate` over
`workflows.MACHINES`/`BINDINGS` (the compiled transition tables) and a `state_store` store. The calls
alternate `invoice.submit` (draft -> review) and `invoice.reject` (review -> draft) over a pool of
handles, so every call is allowed and fires a transition. Per gated call:

* table: what the compiled tables do, with the state kept in a dict per handle (load or create, check
  the state is one the binding allows, look up the transition, store the target): the dict lookups of
  `Machine`/`Binding`, nothing else.
* transitions / python-statemachine: the same with one library machine per handle (as a server would
  keep per-workflow instances): load or create the instance, check the trigger is allowed
  (`may_trigger` / `allowed_events`), fire it (`trigger` / `send`). Libraries configured lean:
  `auto_transitions=False`, no callbacks.
* gate(memory): `await gate.call(tool, {handle_key: handle}, ctx, route)` with `state_store.MemoryStore`
  and a no-op route: handle checks, the store's lock, load, the state check, the route, the transition
  lookup and compare-and-set. The same with `SQLiteStore` (temp file) and `RedisStore` (a real
  redis-server started with tests/redis_server.py's helper).

In-process variants are timed in CPU seconds and interleaved; SQLite and Redis also report wall time
(their cost is mostly waiting: fsync, round trips), and Redis the redis-server's own CPU.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import mcp_types as types
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from bench.core import Row, Samples, Settings, ainterleave, at_least, seconds

TARGET_VS_TRANSITIONS = 50.0
HANDLES = 32  # in-process variants
STORE_HANDLES = 8  # SQLite / Redis: a sweep is 2 calls per handle, and a SQLite call takes milliseconds
SUBMIT, REJECT = "invoice_submit", "invoice_reject"  # wire names (portable, the default); draft -> review -> draft
OK = types.CallToolResult(content=[types.TextContent(type="text", text="done")])


def load_gate_package(golden: bool) -> tuple[ModuleType, str]:
    from bench.presenters import billing_package  # one build of specs/billing.toml for both sections

    return billing_package(golden)


# --- the variants: (tool, handle) -> one gated call ---------------------------------------------------


def table_gate(workflows: ModuleType) -> Callable[[str, str], bool]:
    """The compiled tables alone, state in a dict: what `Gate.call` does minus the store and the route."""
    bindings, machines = workflows.BINDINGS, workflows.MACHINES
    states: dict[str, str] = {}

    def call(tool: str, handle: str) -> bool:
        binding = bindings[tool]
        machine = machines[binding.workflow]
        state = states.get(handle)
        if state is None:
            state = states[handle] = machine.initial
        if state not in binding.states:
            return False
        target = machine.transitions.get((state, binding.event))
        if target is not None and target != state:
            states[handle] = target
        return True

    return call


def transitions_gate(workflows: ModuleType) -> Callable[[str, str], bool]:
    """`transitions.Machine`, one per handle (the machine is its own model)."""
    from transitions import Machine as Library

    bindings, machines = workflows.BINDINGS, workflows.MACHINES
    instances: dict[str, Any] = {}

    def create(machine: Any) -> Any:
        states = sorted({machine.initial, *(s for s, _ in machine.transitions), *machine.transitions.values()})
        table = [[event, source, target] for (source, event), target in machine.transitions.items()]
        return Library(states=states, transitions=table, initial=machine.initial, auto_transitions=False)

    def call(tool: str, handle: str) -> bool:
        binding = bindings[tool]
        instance = instances.get(handle)
        if instance is None:
            instance = instances[handle] = create(machines[binding.workflow])
        if not instance.may_trigger(binding.event):
            return False
        instance.trigger(binding.event)
        return True

    return call


def statemachine_gate(workflows: ModuleType) -> Callable[[str, str], bool]:
    """python-statemachine: a StateMachine class built from the compiled table, one instance per handle."""
    from statemachine import State, StateMachine

    bindings, machines = workflows.BINDINGS, workflows.MACHINES
    classes: dict[str, type] = {}
    instances: dict[str, Any] = {}

    def machine_class(machine: Any) -> type:
        names = sorted({machine.initial, *(s for s, _ in machine.transitions), *machine.transitions.values()})
        namespace: dict[str, Any] = {
            name: State(initial=name == machine.initial, final=name in machine.finals) for name in names
        }
        for (source, event), target in machine.transitions.items():
            step = namespace[source].to(namespace[target])
            namespace[event] = step if event not in namespace else namespace[event] | step
        return type(f"{machine.name.title()}Machine", (StateMachine,), namespace)

    def call(tool: str, handle: str) -> bool:
        binding = bindings[tool]
        instance = instances.get(handle)
        if instance is None:
            cls = classes.get(binding.workflow)
            if cls is None:
                cls = classes[binding.workflow] = machine_class(machines[binding.workflow])
            instance = instances[handle] = cls()
        if binding.event not in instance.allowed_events:  # events are str subclasses
            return False
        instance.send(binding.event)
        return True

    return call


# --- timing ---------------------------------------------------------------------------------------------

Batch = Callable[[int], Awaitable[float]]  # n sweeps -> CPU seconds per gated call


def _sync_batch(call: Callable[[str, str], bool], handles: list[str]) -> Batch:
    async def batch(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            for tool in (SUBMIT, REJECT):
                for handle in handles:
                    call(tool, handle)
        return (time.process_time() - start) / (n * 2 * len(handles))

    return batch


def _gate_batch(
    gate: Any,
    key: str,
    handles: list[str],
    walls: list[float] | None = None,
    server_cpu: Callable[[], float] | None = None,
    server: list[float] | None = None,
) -> Batch:
    ctx = SimpleNamespace(protocol_version=LATEST_HANDSHAKE_VERSION, session=None)
    arguments = {handle: {key: handle} for handle in handles}

    async def route(args: Any, ctx: Any) -> types.CallToolResult:
        return OK

    async def batch(n: int) -> float:
        calls = n * 2 * len(handles)
        start, wall, other = time.process_time(), time.perf_counter(), server_cpu() if server_cpu else 0.0
        for _ in range(n):
            for tool in (SUBMIT, REJECT):
                for handle in handles:
                    await gate.call(tool, arguments[handle], ctx, route)
        used = (time.process_time() - start) / calls
        if walls is not None:
            walls.append((time.perf_counter() - wall) / calls)
        if server_cpu is not None and server is not None:
            server.append(server_cpu() - other)
        return used

    return batch


async def _size(batch: Batch, seconds_wanted: float, calls_per_sweep: int, wall: bool = False) -> int:
    if not wall:
        await batch(1)  # warm-up (the stores were warmed up by their checks)
    start = time.perf_counter()
    per_sweep_cpu = await batch(1)
    per_sweep = (time.perf_counter() - start) if wall else per_sweep_cpu * calls_per_sweep
    return max(1, int(seconds_wanted / max(per_sweep, 1e-9)))


def _paired(values: dict[str, list[float]], slow: str, fast: str) -> float:
    return statistics.median(a / b for a, b in zip(values[slow], values[fast], strict=True))


def _us(value: float) -> str:
    return f"{value * 1e6:.2f}us" if value < 1e-5 else f"{value * 1e6:.1f}us" if value < 1e-3 else seconds(value)


async def _check_gate(gate: Any, store: Any, key: str, handle: str, state_of: Callable[[], Awaitable[str]]) -> None:
    ctx = SimpleNamespace(protocol_version=LATEST_HANDSHAKE_VERSION, session=None)

    async def route(args: Any, ctx: Any) -> types.CallToolResult:
        return OK

    assert await state_of() == "draft"
    assert (await gate.call(SUBMIT, {key: handle}, ctx, route)) is OK
    assert await state_of() == "review", "the gate did not fire SUBMIT"
    refused = await gate.call(SUBMIT, {key: handle}, ctx, route)
    assert refused.is_error, "the gate let SUBMIT run in state review"
    assert (await gate.call(REJECT, {key: handle}, ctx, route)) is OK
    assert await state_of() == "draft", "the gate did not fire REJECT"


async def _handles(store: Any, prefix: str, count: int = HANDLES) -> list[str]:
    handles = [f"{prefix}{i:04d}bench" for i in range(count)]
    for handle in handles:
        await store.create(handle, "invoice", "draft")
    return handles


# --- the section ------------------------------------------------------------------------------------------


async def _in_process(package: ModuleType, rounds: int, batch_seconds: float) -> tuple[list[Row], Any]:
    gate_module, store_module, workflows = package._gate, package.state_store, package.workflows
    handles = [f"h{i:04d}" for i in range(HANDLES)]
    calls: dict[str, Callable[[str, str], bool]] = {
        "table": table_gate(workflows),
        "transitions": transitions_gate(workflows),
        "statemachine": statemachine_gate(workflows),
    }
    for name, call in calls.items():  # each allows and fires exactly what the tables say
        assert call(SUBMIT, "check") and not call(SUBMIT, "check") and call(REJECT, "check"), name
    store = store_module.MemoryStore()
    gate = gate_module.Gate(store, workflows.MACHINES, workflows.BINDINGS, workflows.HANDLE_KEY)
    key = workflows.HANDLE_KEY
    gate_handles = await _handles(store, "m")

    async def memory_state() -> str:
        return (await store.load(gate_handles[0])).state  # type: ignore[no-any-return]

    await _check_gate(gate, store, key, gate_handles[0], memory_state)

    batches: dict[str, Batch] = {name: _sync_batch(call, handles) for name, call in calls.items()}
    batches["gate"] = _gate_batch(gate, key, gate_handles)
    sizes = {name: await _size(batch, batch_seconds, 2 * HANDLES) for name, batch in batches.items()}
    samples = await ainterleave(
        {name: (lambda b=batch, n=sizes[name]: b(n)) for name, batch in batches.items()}, rounds
    )
    med = {name: samples.median(name) for name in batches}
    noisy = [f"{n} {samples.spread(n):.0%}" for n in batches if samples.spread(n) > 0.25]
    spread = ["round-to-round spread (max-min)/median: " + ", ".join(noisy)] if noisy else []

    def ratio(fast: str, slow: str, floor: float | None, label: str, notes: list[str]) -> Row:
        value = samples.paired_ratio(slow, fast)
        target, ok = at_least(value, floor) if floor is not None else ("", None)
        return Row(label, f"{fast} {_us(med[fast])} vs {slow} {_us(med[slow])} per call", value, target, ok, notes)

    rows = [
        Row(
            "workflow check+fire per call [CPU]",
            "  ".join(f"{name} {_us(med[name])}" for name in batches),
            notes=[
                f"{HANDLES} handles, invoice.submit / invoice.reject alternating: every call allowed and "
                "firing; table = the compiled Machine/Binding dict lookups with state in a dict; gate = "
                "Gate.call + MemoryStore (lock, load, check, no-op route, compare-and-set)",
                *spread,
            ],
        ),
        ratio("table", "transitions", TARGET_VS_TRANSITIONS, "  table vs transitions", []),
        ratio("table", "statemachine", None, "  table vs python-statemachine [info]", []),
        ratio(
            "gate",
            "transitions",
            TARGET_VS_TRANSITIONS,
            "  gate(memory) vs transitions",
            [
                "the whole gated call (store lock + load + CAS + handle checks) against the library's "
                "check+fire alone, which has no store, lock or versioning: see the breakdown row"
            ],
        ),
        ratio("gate", "statemachine", None, "  gate(memory) vs python-statemachine [info]", []),
    ]
    rows.append(await _breakdown(package, store, gate_handles, rounds))
    return rows, med["gate"]


async def _breakdown(package: ModuleType, store: Any, handles: list[str], rounds: int) -> Row:
    """Where a gated call on MemoryStore goes: the store's lock, load, compare-and-set (CPU per call)."""
    n = 200 if rounds < 5 else 1000
    handle = handles[0]
    versions = {"v": (await store.load(handle)).version}

    async def lock() -> None:
        async with store.lock(handle):
            pass

    async def load() -> None:
        await store.load(handle)

    async def cas() -> None:
        record = await store.compare_and_set(handle, versions["v"], "draft")
        versions["v"] = record.version

    async def route() -> None:
        return None

    async def shield() -> None:  # what MemoryStore.lock's exit awaits: its _unlock is a no-op
        await asyncio.shield(route())

    def timed(step: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            start = time.process_time()
            for _ in range(n):
                await step()
            return (time.process_time() - start) / n

        return run

    steps = {
        "lock enter+exit": lock,
        "of which asyncio.shield(no-op)": shield,
        "load": load,
        "compare_and_set": cas,
        "await no-op route": route,
    }
    samples = await ainterleave({name: timed(step) for name, step in steps.items()}, rounds)
    return Row(
        "  gate(memory) steps per call [info]",
        "  ".join(f"{name} {_us(samples.median(name))}" for name in steps),
        notes=[
            "MemoryStore.lock: _enter_gate (secrets.token_hex(16), asyncio.Event, loop.time) and, on "
            "exit, asyncio.shield(self._unlock(...)), which wraps the no-op coroutine in a Task and "
            "waits an event-loop iteration for it (measured alone: the 'of which' step)"
        ],
    )


def _redis_cpu(stop: Any) -> Callable[[], float] | None:
    """redis-server's own CPU seconds (from /proc), if its process can be found through `stop`."""
    import os

    proc = (getattr(stop, "__defaults__", None) or (None,))[0]
    pid = getattr(proc, "pid", None)
    if pid is None or not Path(f"/proc/{pid}/stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return used


async def _stores(package: ModuleType, settings: Settings, memory_cpu: float) -> list[Row]:
    """Gated calls on SQLite and Redis next to MemoryStore: CPU and wall per call, ratios to memory."""
    gate_module, store_module, workflows = package._gate, package.state_store, package.workflows
    key = workflows.HANDLE_KEY
    work = Path(tempfile.mkdtemp(prefix="fusiongen-bench-gating-"))
    stores: dict[str, Any] = {
        "memory": store_module.MemoryStore(),
        "sqlite": store_module.SQLiteStore(str(work / "state.db")),
    }
    notes: list[str] = []
    stop = None
    server_cpu = None
    if shutil.which("redis-server") is None:
        notes.append("redis: skipped, redis-server is not on PATH (make redis-server installs it)")
    else:
        from tests.support.redis_server import start_redis

        try:
            port, stop = start_redis(work)
        except BaseException as exc:  # pytest.fail raises an OutcomeException (a BaseException)
            if isinstance(exc, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
                raise
            notes.append(f"redis: skipped, redis-server did not start: {exc}")
        else:
            redis_store = importlib.import_module(f"{package.__name__}.redis_store")  # needs redis-py
            stores["redis"] = redis_store.RedisStore(f"redis://127.0.0.1:{port}/0", prefix="bench:")
            server_cpu = _redis_cpu(stop)
    try:
        walls: dict[str, list[float]] = {name: [] for name in stores}
        server: list[float] = []
        batches: dict[str, Batch] = {}
        for name, store in stores.items():
            gate = gate_module.Gate(store, workflows.MACHINES, workflows.BINDINGS, key)
            handles = await _handles(store, name[0], STORE_HANDLES)

            async def state_of(store: Any = store, handle: str = handles[0]) -> str:
                return (await store.load(handle)).state  # type: ignore[no-any-return]

            await _check_gate(gate, store, key, handles[0], state_of)
            batches[name] = _gate_batch(
                gate, key, handles, walls[name], server_cpu if name == "redis" else None, server
            )
        wanted = 0.05 if settings.quick else 0.25  # wall seconds per batch
        sizes = {name: await _size(batch, wanted, 2 * STORE_HANDLES, wall=True) for name, batch in batches.items()}
        rounds = 2 if settings.quick else 5
        for values in walls.values():
            values.clear()
        server.clear()
        server_calls = rounds * sizes.get("redis", 0) * 2 * STORE_HANDLES
        samples = await ainterleave(
            {name: (lambda b=batch, n=sizes[name]: b(n)) for name, batch in batches.items()}, rounds
        )
    finally:
        for store in stores.values():
            await store.close()
        if stop is not None:
            stop()
        shutil.rmtree(work, ignore_errors=True)
    wall = Samples(walls)
    rows = [
        Row(
            "gated call per store [CPU / wall]",
            "  ".join(f"{name} {_us(samples.median(name))} / {_us(wall.median(name))}" for name in stores),
            notes=[
                f"Gate.call with a no-op route, {STORE_HANDLES} handles, {rounds} rounds; CPU of this process "
                "(SQLite's worker thread included); wall includes fsync (SQLite: WAL, synchronous=FULL, "
                "temp file on this machine's disk) and Redis round trips over 127.0.0.1",
                *notes,
            ],
        )
    ]
    for name in stores:
        if name == "memory":
            continue
        extra = ""
        if name == "redis" and server and not settings.quick:  # /proc ticks are 10 ms: over all rounds
            extra = f"; redis-server CPU {_us(sum(server) / server_calls)}/call"
        rows.append(
            Row(
                f"  {name} / memory [info]",
                f"CPU {_paired(samples.by_variant, name, 'memory'):.1f}x, "
                f"wall {_paired(walls, name, 'memory'):.1f}x{extra}",
                _paired(walls, name, "memory"),
            )
        )
    rows[0].notes.append(f"memory CPU per gated call in the in-process rows above: {_us(memory_cpu)}")
    return rows


@contextmanager
def _quiet_libraries() -> Iterator[None]:
    """The libraries log every transition at INFO. MCPServer (built by other sections of this run)
    configures the root logger with a Rich handler at INFO, which would put ~1.5 ms of log rendering
    into every library call: a server would not run them like that, so their loggers are set to WARNING."""
    loggers = [logging.getLogger(name) for name in ("transitions", "statemachine")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


async def _run(settings: Settings) -> list[Row]:
    package, where = load_gate_package(settings.golden)
    rounds = 3 if settings.quick else 11
    batch_seconds = 0.01 if settings.quick else 0.04
    with _quiet_libraries():
        rows, memory_cpu = await _in_process(package, rounds, batch_seconds)
    rows[0].notes.append(
        f"generated gate: {where}; transitions and python-statemachine loggers at WARNING "
        "(their per-transition INFO logs are not part of the check)"
    )
    gc.collect()
    rows += await _stores(package, settings, memory_cpu)
    return rows


def bench_gating(settings: Settings) -> list[Row]:
    return asyncio.run(_run(settings))
