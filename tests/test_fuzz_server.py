"""Hostile arguments for every tool of the reference billing server, through one in-process MCP session.

The server is built once per module and driven through one `mcp.Client(server, mode="legacy", cache=None)`
session kept open in a blocking portal, so hypothesis can send well over a thousand calls quickly: wrong
types, 1 MB strings, 1000-level nesting, unknown keys, the guarded fields (`id`, `created_at`), the hidden
field names, NaN and infinities, nulls, empty objects, lists instead of objects, junk workflow handles and
real ones. Values the client cannot serialize (NaN, deep nesting) go through the session's raw JSON-RPC
request path, unchanged.

For every call: the server answers within a per-call timeout with a result or an `isError` result (a
JSON-RPC error is a failure, except `Unknown tool`, which the server raises on purpose), an error result is
one `<validation_error>` or `<tool_error>` text block without structured content, a success fits the tool's
`outputSchema`, and no seeded secret (hidden fields, undeclared keys, card numbers) reaches the result,
nor a customer email outside content blocks annotated for the user.

Bugs found here are pinned as `xfail(strict=True)` tests at the end (`test_known_bug_*`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.build import SPECS, GeneratedServer, build
from tests.support.client import connect

PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)
SLOW_OK = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.filter_too_much,
]

CALL_TIMEOUT = 60.0  # seconds: a call that takes longer hangs (generous: the machine may be loaded)
# What a huge or deeply nested argument may cost: linear work is milliseconds, and anything worse (quadratic in a
# megabyte) runs for hours; so a wall-clock budget would only add flakiness on a loaded machine. Such a test
# fails on its pytest timeout instead, and asserts that the session still serves afterwards.
HUGE_TIMEOUT = 120

# What the seeded handler data holds and an agent must never see: hidden fields, undeclared keys, cards.
SECRETS = (
    "legal says hold",
    "078-05-1120",
    "219-09-9999",
    "4111111111111111",
    "5500000000000004",
    "4000056655665556",
    "created by an agent",
    "B-17",
    "batch 3",
)
EMAILS = ("ada@example.com", "alan@example.com")  # redacted for the model; user-audience blocks may show them
HIDDEN_KEYS = ("internal_notes", "cost_basis", "ssn", "credit_score", "warehouse_bin")
GUARDED = ("id", "created_at")
STATUSES = ("draft", "review", "approved", "paid", "overdue")
INVOICE_IDS = ("inv-1", "inv-2", "inv-3", "inv-4", "inv-5", "inv-404")
CUSTOMER_IDS = ("c-1", "c-2", "c-404")

# tool → its declared arguments and what a plausible value looks like
TOOLS: dict[str, dict[str, str]] = {
    "invoice_get": {"id": "invoice_id"},
    "invoice_list": {"status": "status", "limit": "integer"},
    "invoice_create": {"customer_id": "customer_id", "amount_cents": "integer", "due_date": "date"},
    "invoice_update": {"id": "invoice_id", "status": "status", "due_date": "date"},
    "customer_get": {"id": "customer_id"},
    "billing_remind": {"invoice_id": "invoice_id"},
    "invoice_submit": {"invoice_id": "invoice_id", "workflow_id": "handle"},
    "invoice_approve": {"invoice_id": "invoice_id", "workflow_id": "handle"},
    "invoice_reject": {"invoice_id": "invoice_id", "reason": "text", "workflow_id": "handle"},
    "invoice_discharge": {"invoice_id": "invoice_id", "workflow_id": "handle"},
    "invoice_start": {},
    "invoice_status": {"workflow_id": "handle"},
    "invoice_resolve": {"workflow_id": "handle", "outcome": "outcome"},
}
BOUND = ("invoice_submit", "invoice_approve", "invoice_reject", "invoice_discharge")

STATS: Counter[str] = Counter()


# --- hostile values -------------------------------------------------------------------------------------


def deep_list(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_object(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    """Nesting depth, iteratively (the values themselves may be too deep for recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def safe(text: str) -> bool:
    return not any(s in text for s in (*SECRETS, *EMAILS))


MEGABYTE = "x" * 1_000_000
SPECIAL_VALUES = st.sampled_from(
    (
        None,
        True,
        False,
        0,
        -1,
        1.0,
        2.5,
        -0.0,
        1e308,
        -1e308,
        5e-324,
        2**53 + 1,
        2**63,
        -(2**63) - 1,
        2**64,
        10**30,
        10**400 + 1,
        float("nan"),
        float("inf"),
        float("-inf"),
        "",
        " ",
        "\x00",
        "\ud800",
        "inv-1",
        "c-1",
        "draft",
        "Draft",
        "2026-01-01",
        "2026-02-30",
        "2026-1-1",
        "20260101",
        "2026-01-01T00:00:00",
        "tomorrow",
        "NaN",
        "Infinity",
        "1e999",
        "null",
        "true",
        "[]",
        "{}",
        "<b>&amp;</b>",
        "]]><!--",
        "'\"\\",
        "\u202e\u200b",
        "é" * 10,
        {},
        [],
        [{}],
        [[]],
        {"id": "inv-1"},
        {"": None},
        [1, "a", None],
        {"__proto__": {"x": 1}},
        MEGABYTE,
        "é" * 500_000,
        [MEGABYTE],
        {"k": MEGABYTE},
        deep_list(200),
        deep_object(200),
        deep_list(400),
    )
)
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=20).filter(safe),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8).filter(safe), inner, max_size=4),
    max_leaves=12,
)
HOSTILE = st.one_of(SPECIAL_VALUES, JSON_VALUES)

PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "invoice_id": st.sampled_from(INVOICE_IDS),
    "customer_id": st.sampled_from(CUSTOMER_IDS),
    "status": st.sampled_from(STATUSES),
    "integer": st.one_of(st.integers(-5, 50), st.integers()),
    "date": st.dates().map(lambda d: d.isoformat()),
    "text": st.text(max_size=30).filter(safe),
    "handle": st.sampled_from(("", "junk", "session:x:invoice", ":", "a" * 32, "x" * 100_000)),
    "outcome": st.sampled_from(("completed", "not_completed")),
}
KEY_NAMES = st.one_of(
    st.sampled_from(
        (
            *GUARDED,
            *HIDDEN_KEYS,
            "workflow_id",
            "fields_set",
            "",
            " ",
            "__class__",
            "id ",
            "ID",
            "amount_cents.x",
            "lines[0]",
            "x" * 10_000,
            "<k>",
            "\u0000",
            "status",
        )
    ),
    st.text(max_size=12).filter(safe),
)


@st.composite
def arguments_for(draw: Any, tool: str) -> dict[str, Any]:
    """Plausible, mixed or hostile arguments: declared fields, unknown, guarded and hidden keys."""
    mode = draw(st.sampled_from(("plausible", "plausible", "mixed", "hostile")))
    arguments: dict[str, Any] = {}
    for name, kind in TOOLS[tool].items():
        if draw(st.integers(0, 4)) == 0:
            continue  # absent
        plausible = mode == "plausible" or (mode == "mixed" and draw(st.booleans()))
        arguments[name] = draw(PLAUSIBLE[kind] if plausible else HOSTILE)
    if mode != "plausible":
        for _ in range(draw(st.integers(0, 2))):
            arguments[draw(KEY_NAMES)] = draw(HOSTILE)
        if draw(st.integers(0, 9)) == 0:
            arguments[draw(KEY_NAMES)] = deep_list(1000)  # under an unknown key: never echoed, never walked
    return arguments


def known_bug_trigger(name: str, arguments: dict[str, Any]) -> str | None:
    """Arguments that hit an open bug pinned below; not sent by the properties. None are open now."""
    return None


# --- the session ----------------------------------------------------------------------------------------


@dataclass
class Session:
    portal: BlockingPortal
    client: Client
    server: GeneratedServer
    tools: dict[str, types.Tool]
    handles: list[str] = field(default_factory=list)
    calls: int = 0


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    out = tmp_path_factory.mktemp("fuzz_server") / "out"
    generation = build(SPECS / "billing.toml", out)
    with GeneratedServer(generation, out) as server, start_blocking_portal() as portal:
        client = connect(server.create_server())
        with portal.wrap_async_context_manager(client) as entered:
            listed = portal.call(entered.list_tools)
            # The handshake era lists only what the session's workflow state allows: every schema, from 2026.
            tools = {t.name: t for t in server.package.server.MODERN_TOOLS}
            assert set(tools) == set(TOOLS)
            assert {t.name for t in listed.tools} <= set(tools)
            state = Session(portal, entered, server, tools)
            for _ in range(3):
                started = portal.call(call_tool, state, "invoice_start", {}, False)
                assert isinstance(started, types.CallToolResult) and not started.is_error
                state.handles.append(started.structured_content["workflow_id"])
            yield state
            # still serving after everything the properties sent
            final = portal.call(call_tool, state, "invoice_get", {"id": "inv-2"}, False)
            assert isinstance(final, types.CallToolResult) and not final.is_error
    print(f"\nserver fuzzing: {state.calls} calls;", dict(sorted(STATS.items())))


async def call_tool(session: Session, name: str, arguments: Any, raw: bool) -> types.CallToolResult | MCPError:
    """One tools/call; a JSON-RPC error is returned (not raised), a hang raises TimeoutError."""
    session.calls += 1
    with anyio.fail_after(CALL_TIMEOUT + 5):
        try:
            if raw:
                data = await session.client.session._dispatcher.send_raw_request(  # the arguments as they are
                    "tools/call", {"name": name, "arguments": arguments}, {"timeout": CALL_TIMEOUT}
                )
                return types.CallToolResult.model_validate(data)
            return await session.client.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT)
        except MCPError as exc:
            return exc


def needs_raw(arguments: Any) -> bool:
    """What the client's JSON serialization would change or refuse: non-finite floats, deep nesting."""
    stack, level = [(arguments, 0)], 0
    while stack:
        item, level = stack.pop()
        if level > 100 or (isinstance(item, float) and not math.isfinite(item)):
            return True
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return False


def sent_text(arguments: Any) -> str:
    if depth_of(arguments) > 200:
        return ""
    return json.dumps(arguments, default=str)


def for_user(block: Any) -> bool:
    return bool(block.annotations and block.annotations.audience == ["user"])


def keys_of(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from keys_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys_of(item)


def check_result(session: Session, name: str, arguments: Any, result: types.CallToolResult | MCPError) -> str:
    """The contract for one call; returns a short label of the outcome for the statistics."""
    assert not isinstance(result, MCPError), f"JSON-RPC error {result.error.code}: {result.error.message[:300]}"
    sent = sent_text(arguments)
    texts = [getattr(b, "text", "") for b in result.content]
    model_seen = json.dumps([t for b, t in zip(result.content, texts, strict=True) if not for_user(b)])
    model_seen += json.dumps(result.structured_content)
    for secret in SECRETS:
        assert secret not in "".join(texts) + model_seen or secret in sent, f"{secret!r} leaked"
    for email in EMAILS:
        assert email not in model_seen or email in sent, f"{email!r} reached the model"
    hidden = set(keys_of(result.structured_content)) & set(HIDDEN_KEYS)
    assert not hidden, f"hidden keys {hidden} in structured content"
    if result.is_error:
        assert result.structured_content is None
        assert len(result.content) == 1 and result.content[0].type == "text"
        text = result.content[0].text
        assert text.startswith(("<validation_error ", "<tool_error ")), text[:200]
        code = text.split('code="', 1)[1].split('"', 1)[0] if text.startswith("<tool_error") else "VALIDATION"
        # IN_DOUBT: a bound tool whose earlier call on that state failed in its handler (the handlers raise on
        # hostile ids); every bound tool is listed now (the stable list, §10.6), so the fuzz reaches them all
        codes = ("VALIDATION", "INTERNAL_ERROR", "OUTPUT_INVALID", "FORBIDDEN", "BUSY", "NOT_FOUND", "IN_DOUBT")
        assert code in codes, text[:300]
        if code == "IN_DOUBT":  # its one way forward is the workflow's resolve tool
            assert name in BOUND and "<action>invoice_resolve</action>" in text, text[:600]
        return code
    schema = session.tools[name].output_schema
    if schema is not None:
        jsonschema.validate(result.structured_content, schema)
        data, _ = json.JSONDecoder().raw_decode(texts[0])  # the data leads the first block; guidance follows (§9.1)
        envelope = "data" in schema.get("properties", {}) and "rules" in schema.get("properties", {})
        assert data == (result.structured_content["data"] if envelope else result.structured_content)
    return "ok"


def run(session: Session, name: str, arguments: Any, raw: bool | None = None) -> str:
    raw = needs_raw(arguments) if raw is None else (raw or needs_raw(arguments))
    result = session.portal.call(call_tool, session, name, arguments, raw)
    label = check_result(session, name, arguments, result)
    STATS[f"{name}: {label}"] += 1
    if name == "invoice_start" and label == "ok" and isinstance(result, types.CallToolResult):
        session.handles.append(result.structured_content["workflow_id"])  # fresh handles, in the initial state
    return label


# --- properties -----------------------------------------------------------------------------------------


def minted(session: Session) -> st.SearchStrategy[str]:
    """A handle minted by invoice.start. The list grows while the properties run, so draw a plain index: draws
    must not depend on outside state, or hypothesis cannot replay an example."""
    return st.integers(0, 2**16).map(lambda i: session.handles[i % len(session.handles)])


@settings(max_examples=1200, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_every_tool_answers_hostile_arguments_with_a_result(session: Session, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(TOOLS)))
    arguments = data.draw(arguments_for(name))
    if name in BOUND and data.draw(st.integers(0, 3)) == 0:
        arguments["workflow_id"] = data.draw(minted(session))
    bug = known_bug_trigger(name, arguments)
    if bug is not None:
        STATS[f"known: {bug}"] += 1
        return
    label = run(session, name, arguments, raw=data.draw(st.integers(0, 4)) == 0)
    if name == "invoice_create":
        assert label != "INTERNAL_ERROR"  # its handler cannot fail: only the presenter could have


@settings(max_examples=200, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_workflow_handles_and_junk_handles(session: Session, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from((*BOUND, "invoice_status", "invoice_start", "invoice_resolve")))
    handle = data.draw(
        st.one_of(minted(session), PLAUSIBLE["handle"], HOSTILE, st.just(deep_list(1000)), st.just(deep_object(1000)))
    )
    arguments: dict[str, Any] = {"workflow_id": handle}
    if name in BOUND:
        arguments["invoice_id"] = data.draw(PLAUSIBLE["invoice_id"])
        if name == "invoice_reject":
            arguments["reason"] = "fuzz"
    label = run(session, name, arguments)
    if name == "invoice_start":
        assert label == "VALIDATION"  # it takes no arguments
    if isinstance(handle, str) and handle not in session.handles and name != "invoice_start":
        assert label in ("FORBIDDEN", "VALIDATION"), label


@settings(max_examples=60, deadline=None, phases=PHASES, suppress_health_check=SLOW_OK)
@given(
    name=st.one_of(
        st.sampled_from(
            ("", " ", "invoice.get ", "INVOICE.GET", "invoice", "invoice.start.x", "x" * 100_000, "<t>&", "\u0000")
        ),
        st.text(max_size=30),
    )
)
def test_unknown_tools_are_protocol_errors_and_the_server_keeps_serving(session: Session, name: str) -> None:
    if name in TOOLS:
        return
    result = session.portal.call(call_tool, session, name, {"id": "inv-1"}, True)
    # By design (templates/server.py.j2): an unknown tool is JSON-RPC -32602 "Unknown tool", as the MCP spec says.
    assert isinstance(result, MCPError) and result.error.code == -32602, result
    assert "Unknown tool" in result.error.message
    STATS["unknown tool: -32602"] += 1
    assert run(session, "customer_get", {"id": "c-1"}) == "ok"


# --- huge and deep arguments: fast, and still a result --------------------------------------------------

HUGE_ARGUMENTS = {
    "1 MB string": lambda key: {key: MEGABYTE},
    "1 MB of multi-byte text": lambda key: {key: "é" * 500_000},
    "a list of a million items": lambda key: {key: [0] * 1_000_000},
    "a 1 MB key": lambda key: {"k" * 1_000_000: 1},
    "ten thousand unknown keys": lambda key: {f"k{i}": i for i in range(10_000)},
    "1000 levels under an unknown key": lambda key: {"not_a_field": deep_list(1000)},
    "1000 levels of objects under an unknown key": lambda key: {"not_a_field": deep_object(1000)},
}


def first_field(name: str) -> str:
    return next(iter(TOOLS[name]), "workflow_id")


@pytest.mark.timeout(HUGE_TIMEOUT)
@pytest.mark.parametrize("case", sorted(HUGE_ARGUMENTS))
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_huge_arguments_are_answered_quickly(session: Session, name: str, case: str) -> None:
    arguments = HUGE_ARGUMENTS[case](first_field(name))
    run(session, name, arguments, raw=True)  # checks the answer's contract
    assert run(session, "customer_get", {"id": "c-1"}) == "ok", f"not serving after {name} with {case}"


@pytest.mark.timeout(HUGE_TIMEOUT)
@pytest.mark.parametrize("depth", [200, 900])
@pytest.mark.parametrize("name", sorted(n for n in TOOLS if n != "invoice_start"))
def test_deep_arguments_are_answered_quickly(session: Session, name: str, depth: int) -> None:
    for value in (deep_list(depth), deep_object(depth)):
        label = run(session, name, {first_field(name): value}, raw=True)
        assert run(session, "customer_get", {"id": "c-1"}) == "ok", f"not serving after {name} at depth {depth}"
        # the gate runs first: a bound tool may be refused before (FORBIDDEN, or IN_DOUBT when an earlier call
        # of the session's own state failed in its handler)
        assert label in ("VALIDATION", "FORBIDDEN", "IN_DOUBT")


@pytest.mark.parametrize(
    "arguments",
    [[], [{"id": "inv-1"}], "inv-1", 1, True],
    ids=["empty list", "list of objects", "string", "number", "boolean"],
)
def test_arguments_that_are_not_an_object_are_refused_by_the_protocol(session: Session, arguments: Any) -> None:
    result = session.portal.call(call_tool, session, "invoice_get", arguments, True)
    # The SDK validates `params` before the server runs: -32602 Invalid params, and the session goes on.
    assert isinstance(result, MCPError) and result.error.code == -32602
    assert run(session, "invoice_get", {"id": "inv-1"}) == "ok"


def test_null_arguments_mean_no_arguments(session: Session) -> None:
    assert run(session, "invoice_list", None, raw=True) == "ok"
    assert run(session, "invoice_get", None, raw=True) == "VALIDATION"


def test_guarded_and_hidden_fields_are_refused_without_echoing_them(session: Session) -> None:
    arguments = {
        "customer_id": "c-1",
        "amount_cents": 1,
        "due_date": "2026-01-01",
        "id": "mine",
        "created_at": "2026-01-01T00:00:00",
        "internal_notes": "NOTE-VALUE",
        "cost_basis": 12345.678,
    }
    result = session.portal.call(call_tool, session, "invoice_create", arguments, False)
    assert run(session, "invoice_create", arguments) == "VALIDATION"
    assert isinstance(result, types.CallToolResult)
    text = result.content[0].text
    assert text.count("guarded") == 2 and "NOTE-VALUE" not in text and "12345.678" not in text


# --- bugs found by the properties above, fixed: regressions ---------------------------------------------------------


@pytest.mark.parametrize("value", ["list", "object"])
def test_fixed_deeply_nested_declared_argument_is_a_validation_error(session: Session, value: str) -> None:
    """A declared argument nested 1000 levels deep was echoed back into the validation error, which broke; the
    answer is the VALIDATION error now."""
    nested = deep_list(1000) if value == "list" else deep_object(1000)
    assert run(session, "invoice_get", {"id": nested}, raw=True) == "VALIDATION"


def test_fixed_integer_too_large_for_the_number_cast_is_output_invalid(billing: GeneratedServer) -> None:
    """An integer too large for the number cast (10**400) broke the cast inside the server; the answer is the
    OUTPUT_INVALID tool error now."""

    async def create() -> types.CallToolResult:
        async with connect(billing.create_server()) as client:
            return await client.call_tool(
                "invoice_create", {"customer_id": "c-1", "amount_cents": 10**400, "due_date": "2026-01-01"}
            )

    result = anyio.run(create)
    assert result.is_error and 'code="OUTPUT_INVALID"' in result.content[0].text
