"""Red-team regressions of the runtime and the input code: every test attacks a real generated server.

Each spec is built with `tests/support/build.py`, its package imported fresh from a temp dir, and driven
by a real `mcp.Client` (in-process, or over stdio / streamable HTTP where the finding is about the process),
with a real redis-server for the Redis findings. The finding each test pins is named in its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import stat
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from fusiongen.api import Generation
from tests.support.build import GeneratedServer, build, built_server, imported, write_spec
from tests.support.client import LEGACY, MODERN, connect, stdio_params
from tests.support.processes import free_port, http_server, run, server_env
from tests.support.redis_server import start_redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SECRET = "s3cr3t-value-7f2c"
SECRET_NUMBER = 918273645


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


def module_of(name: str, source: str) -> ModuleType:
    """A handler module made from source, as `create_server(handlers=...)` takes one."""
    module = ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


# --- a workflow whose one bound tool fires a transition ------------------------------------------------

FLOW_SPEC = """\
[server]
name = "{name}"

[workflows.flow]
initial = "a"
[workflows.flow.states]
a = {{ on = {{ GO = "b" }} }}
b = {{ type = "final" }}

[tools."flow.go"]
description = "Move the flow on."
bind_state = {{ workflow = "flow", states = ["a"], transition = "GO" }}

[tools.ping]
description = "Answers."
"""

FLOW_HANDLERS = """\
RAN = []


def flow_go(args):
    RAN.append("flow_go")


def ping(args):
    return None
"""


def flow_server(root: Path, name: str = "flowprobe", handlers: str = FLOW_HANDLERS) -> GeneratedServer:
    return built_server(FLOW_SPEC.format(name=name), root / "out", handlers=handlers)


@pytest.fixture(scope="module")
def flow_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, Path]:
    out = tmp_path_factory.mktemp("flow") / "out"
    return build(FLOW_SPEC.format(name="flowprobe"), out, handlers=FLOW_HANDLERS), out


@pytest.fixture
def flow(flow_build: tuple[Generation, Path]) -> Iterator[GeneratedServer]:
    with GeneratedServer(*flow_build) as server:
        yield server


async def start(client: Client, workflow: str = "flow") -> str:
    result = await client.call_tool(f"{workflow}.start", {})
    assert not result.is_error, text(result)
    handle = result.structured_content["workflow_id"]  # type: ignore[index]
    assert isinstance(handle, str)
    return handle


async def state_of(client: Client, handle: str, workflow: str = "flow") -> str:
    result = await client.call_tool(f"{workflow}.status", {"workflow_id": handle})
    assert not result.is_error, text(result)
    return str(result.structured_content["state"])  # type: ignore[index]


# --- #3: a transition fires although the handler never ran ------------------------------------------

RAN_HANDLERS = {
    "async __call__ object": """
        RAN = []
        class Handler:
            async def __call__(self, args):
                RAN.append("ran")
        flow_go = Handler()
    """,
    "async __call__ object with ctx": """
        RAN = []
        class Handler:
            async def __call__(self, args, ctx):
                RAN.append("ran")
        flow_go = Handler()
    """,
    "sync decorator around async def": """
        import functools
        RAN = []
        def logged(function):
            @functools.wraps(function)
            def wrapper(args):
                return function(args)
            return wrapper
        @logged
        async def flow_go(args):
            RAN.append("ran")
    """,
    "functools.partial of async def": """
        import functools
        RAN = []
        async def go(args, prefix):
            RAN.append(prefix)
        flow_go = functools.partial(go, prefix="ran")
    """,
    "async def (args, ctx) returning a coroutine": """
        RAN = []
        async def inner():
            RAN.append("ran")
        async def flow_go(args, ctx):
            return inner()
    """,
}

NEVER_RUN_HANDLERS = {
    "generator function": """
        RAN = []
        def flow_go(args):
            RAN.append("ran")
            yield
    """,
    "async generator function": """
        RAN = []
        async def flow_go(args):
            RAN.append("ran")
            yield
    """,
    "object whose __call__ is a generator": """
        RAN = []
        class Handler:
            def __call__(self, args):
                RAN.append("ran")
                yield
        flow_go = Handler()
    """,
}


@pytest.mark.parametrize("source", RAN_HANDLERS.values(), ids=RAN_HANDLERS.keys())
async def test_an_async_handler_of_any_form_runs_before_its_transition_fires(
    flow: GeneratedServer, source: str
) -> None:
    """#3: what a handler call returns is awaited, whatever made it awaitable; the transition follows."""
    handlers = module_of("flow_async_handlers", textwrap.dedent(source) + "\ndef ping(args):\n    return None\n")
    server = flow.create_server(handlers)
    with warnings_as_errors():
        async with connect(server, MODERN) as client:
            handle = await start(client)
            result = await client.call_tool("flow.go", {"workflow_id": handle})
            assert (result.is_error, text(result)) == (False, "flow.go: done."), text(result)
            assert handlers.RAN == ["ran"]
            assert await state_of(client, handle) == "b"


@pytest.mark.parametrize("source", NEVER_RUN_HANDLERS.values(), ids=NEVER_RUN_HANDLERS.keys())
async def test_a_generator_handler_is_an_error_and_fires_no_transition(
    flow: GeneratedServer, source: str, caplog: pytest.LogCaptureFixture
) -> None:
    """#3: a generator's body never runs, so the call must fail and the workflow must stay where it is."""
    caplog.set_level(logging.ERROR)
    handlers = module_of("flow_gen_handlers", textwrap.dedent(source) + "\ndef ping(args):\n    return None\n")
    server = flow.create_server(handlers)
    async with connect(server, MODERN) as client:
        handle = await start(client)
        result = await client.call_tool("flow.go", {"workflow_id": handle})
        assert result.is_error is True
        assert 'code="INTERNAL_ERROR"' in text(result)
        assert handlers.RAN == []
        assert await state_of(client, handle) == "a"
    assert "generator instead of its result" in caplog.text


async def test_check_reports_a_generator_handler(tmp_path: Path) -> None:
    """#3, statically: `fusiongen check` names a handler that is a generator or async generator function."""
    handlers = FLOW_HANDLERS.replace(
        'def flow_go(args):\n    RAN.append("flow_go")\n', "def flow_go(args):\n    yield 1\n"
    ).replace("def ping(args):\n    return None\n", "async def ping(args):\n    yield None\n")
    spec = write_spec(tmp_path, FLOW_SPEC.format(name="flowprobe"), handlers=handlers)
    built = run("build", spec, "-o", tmp_path / "out", cwd=tmp_path)
    # `build` writes the server and reports the same handler problems `check` does (exit 2): they agree.
    assert built.code == 2, built.stderr
    assert 'error[FG410]: handler "flow_go" of tool "flow.go" is a generator function' in built.stderr
    checked = run("check", spec, "-o", tmp_path / "out", cwd=tmp_path)
    assert checked.code == 1, checked.stderr
    assert 'error[FG410]: handler "flow_go" of tool "flow.go" is a generator function' in checked.stderr
    assert 'error[FG410]: handler "ping" of tool "ping" is an async generator function' in checked.stderr


@contextlib.contextmanager
def warnings_as_errors() -> Iterator[None]:
    """A coroutine nobody awaits is only a RuntimeWarning: make it fail the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


# --- #7: a handler raising a BaseException takes the service down -------------------------------------

BASE_HANDLERS = f"""\
import os


class Custom(BaseException):
    pass


RAISED = {{
    "SystemExit": lambda: SystemExit({SECRET!r}),
    "KeyboardInterrupt": lambda: KeyboardInterrupt({SECRET!r}),
    "GeneratorExit": lambda: GeneratorExit({SECRET!r}),
    "Custom": lambda: Custom({SECRET!r}),
}}


def flow_go(args):
    raise RAISED[os.environ.get("FG_RAISE", "SystemExit")]()


def ping(args):
    return None
"""

BASE_EXCEPTIONS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "Custom"]


@pytest.mark.parametrize("raised", BASE_EXCEPTIONS)
async def test_a_handler_raising_a_base_exception_fails_only_its_call(
    tmp_path: Path, raised: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """#7 in-process: INTERNAL_ERROR, no transition, and the server keeps answering."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("FG_RAISE", raised)
    with flow_server(tmp_path, handlers=BASE_HANDLERS) as flow:
        async with connect(flow.create_server(), MODERN) as client:
            handle = await start(client)
            result = await client.call_tool("flow.go", {"workflow_id": handle})
            assert result.is_error is True and 'code="INTERNAL_ERROR"' in text(result)
            assert await state_of(client, handle) == "a"
            assert text(await client.call_tool("ping", {})) == "ping: done."
    assert f"handler raised {raised}" in caplog.text
    assert SECRET not in caplog.text


async def test_a_base_exception_while_reading_handler_data_fails_only_its_call(tmp_path: Path) -> None:
    """#7, sibling: a property that raises SystemExit while the presenter reads the handler's object."""
    spec = """\
[server]
name = "readprobe"

[models.Thing]
fields = { id = "string" }

[tools."thing.get"]
returns = "Thing"
"""
    handlers = f"""\
class Thing:
    @property
    def id(self):
        raise SystemExit({SECRET!r})


def thing_get(args):
    return Thing()
"""
    with built_server(spec, tmp_path / "out", handlers=handlers) as server:
        async with connect(server.create_server(), LEGACY) as client:
            for _ in range(2):
                result = await client.call_tool("thing.get", {})
                assert result.is_error is True and 'code="INTERNAL_ERROR"' in text(result)


@pytest.mark.parametrize("raised", BASE_EXCEPTIONS)
async def test_a_base_exception_does_not_end_the_stdio_process(tmp_path: Path, raised: str) -> None:
    """#7 over stdio: the process keeps serving, and the exception's text never reaches stderr."""
    with flow_server(tmp_path, handlers=BASE_HANDLERS) as flow:
        params = stdio_params(flow.out, package=flow.package_name, env=server_env(flow.out, FG_RAISE=raised))
    with tempfile.TemporaryFile("w+") as errlog, anyio.fail_after(60):  # before the fix: the process exits
        async with Client(stdio_client(params, errlog=errlog), mode=LEGACY, cache=None) as client:
            for _ in range(2):
                result = await client.call_tool("flow.go", {})
                assert result.is_error is True and 'code="INTERNAL_ERROR"' in text(result), texts(result)
            assert text(await client.call_tool("ping", {})) == "ping: done."
        errlog.seek(0)
        logged = errlog.read()
    assert SECRET not in logged
    assert "Traceback" not in logged


async def test_a_base_exception_does_not_stop_the_http_server(tmp_path: Path) -> None:
    """#7 over streamable HTTP: after the failing call, a new client is still served."""
    with flow_server(tmp_path, handlers=BASE_HANDLERS) as flow:
        out, package = flow.out, flow.package_name
    log = tmp_path / "server.log"
    with http_server(out, package=package, env=server_env(out, FG_RAISE="SystemExit"), log=log) as url:
        async with connect(url, LEGACY) as client:
            result = await client.call_tool("flow.go", {})
            assert result.is_error is True and 'code="INTERNAL_ERROR"' in text(result)
        async with connect(url, LEGACY) as client:
            assert text(await client.call_tool("ping", {})) == "ping: done."
    assert SECRET not in log.read_text()


# --- #6: a value sent to a hidden model-typed input field is echoed -----------------------------------

HIDDEN_SPEC = """\
[server]
name = "hiddenprobe"

[models.Address]
fields = { street = "string", zip = "integer", tags = { type = "list", items = "string" } }

[models.Person]
hidden = ["home", "homes", "pin", "codes"]
fillable = { create = ["name", "home", "homes", "pin", "codes"] }
[models.Person.fields]
name = "string"
home = { type = "Address", required = false }
homes = { type = "list", items = "Address", required = false }
pin = { type = "integer", required = false }
codes = { type = "list", items = "integer", required = false }

[tools."person.create"]
input_from = "Person.create"
"""

HIDDEN_HANDLERS = "def person_create(args):\n    return None\n"


@pytest.fixture(scope="module")
def hidden_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hidden")
    build(HIDDEN_SPEC, root / "out", handlers=HIDDEN_HANDLERS)
    return root


HIDDEN_ARGUMENTS = {
    "not an object": {"home": SECRET},
    "nested fields": {"home": {"street": SECRET_NUMBER, "zip": SECRET, "tags": ["ok", SECRET_NUMBER]}},
    "unknown key in it": {"home": {"street": "x", "zip": 1, "tags": [], SECRET: 1}},
    "list item not an object": {"homes": [SECRET]},
    "list item fields": {"homes": [{"street": "x", "zip": SECRET, "tags": [SECRET_NUMBER]}]},
    "list not a list": {"homes": {SECRET: SECRET}},
    "scalar": {"pin": SECRET, "codes": [1, SECRET]},
}


@pytest.mark.parametrize("arguments", HIDDEN_ARGUMENTS.values(), ids=HIDDEN_ARGUMENTS.keys())
async def test_no_value_inside_a_hidden_input_field_is_echoed(hidden_build: Path, arguments: dict[str, Any]) -> None:
    """#6: a hidden field's value, its nested model's fields, its list items and keys are never shown."""
    with imported(hidden_build / "out", "hiddenprobe_server") as package:
        server = package.create_server(module_of("h", HIDDEN_HANDLERS))
        async with connect(server) as client:
            result = await client.call_tool("person.create", {"name": "n", **arguments})
    assert result.is_error is True
    shown = text(result)
    assert shown.startswith('<validation_error tool="person.create">')
    assert SECRET not in shown and str(SECRET_NUMBER) not in shown, shown


async def test_a_hidden_object_still_says_what_is_wrong(hidden_build: Path) -> None:
    """#6: the errors inside a hidden object keep their paths and what was expected, only not the values."""
    with imported(hidden_build / "out", "hiddenprobe_server") as package:
        server = package.create_server(module_of("h", HIDDEN_HANDLERS))
        async with connect(server) as client:
            arguments = {"name": "n", "home": {"street": 1, "zip": 2, "tags": [3], "extra": 4}}
            result = await client.call_tool("person.create", arguments)
    assert re.findall(r'<field name="([^"]*)">([^<]*)</field>', text(result)) == [
        ("home", "this object holds unknown fields. Accepted fields: street, tags, zip."),
        ("home.street", "expected a string; you sent an integer."),
        ("home.tags[0]", "expected a string; you sent an integer."),
    ]


# --- #9: SQLite state files are world-readable ---------------------------------------------------------


async def test_sqlite_state_files_are_private(flow: GeneratedServer, tmp_path: Path) -> None:
    """#9: the database, its -wal and -shm, and the folders the store creates are this user's only."""
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "deeper" / "state.db"
        server = flow.create_server(flow.handlers, state_store=f"sqlite:///{path}")
        async with connect(server, MODERN) as client:
            handle = await start(client)
            assert (await client.call_tool("flow.go", {"workflow_id": handle})).is_error is False
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
            assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


async def test_servers_sharing_one_sqlite_file_do_not_share_handles(tmp_path: Path) -> None:
    """#4, sibling: like Redis, one SQLite file named by two servers keeps their handles apart."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with flow_server(tmp_path / "a", "billing") as a:
        server_a = a.create_server(state_store=url)
        async with connect(server_a, MODERN) as client:
            handle = await start(client)
    with flow_server(tmp_path / "b", "other") as b:
        async with connect(b.create_server(state_store=url), MODERN) as client:
            result = await client.call_tool("flow.go", {"workflow_id": handle})
            assert result.is_error and "Unknown or expired workflow_id" in text(result)
    with flow_server(tmp_path / "a2", "billing") as a:
        async with connect(a.create_server(state_store=url), MODERN) as client:
            assert await state_of(client, handle) == "a"  # the same server (a replica) still knows it


# --- #4 and #14: Redis ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port, stop = start_redis(tmp_path_factory.mktemp("redis"))  # pytest.fail if redis-server is missing
    try:
        yield port
    finally:
        stop()


async def test_redis_handles_of_one_server_are_unknown_to_another(tmp_path: Path, redis_port: int) -> None:
    """#4: billing's handle does not drive another server's workflow of the same name; replicas share."""
    url = f"redis://127.0.0.1:{redis_port}/0"
    with flow_server(tmp_path / "billing", "billing") as billing:
        billing_out, billing_package = billing.out, billing.package_name
        async with connect(billing.create_server(state_store=url), MODERN) as client:
            handle = await start(client)
    with flow_server(tmp_path / "other", "other") as other:
        other_out, other_package = other.out, other.package_name
        async with connect(other.create_server(state_store=url), MODERN) as client:
            result = await client.call_tool("flow.go", {"workflow_id": handle})
            assert result.is_error and "Unknown or expired workflow_id" in text(result)
            result = await client.call_tool("flow.status", {"workflow_id": handle})
            assert result.is_error and "Unknown or expired workflow_id" in text(result)
    # `python -m` namespaces the same way as create_server: its replica accepts the handle, the other not.
    args = ("--state-store", url)
    with http_server(other_out, *args, package=other_package, env=server_env(other_out)) as other_url:
        async with connect(other_url, MODERN) as client:
            result = await client.call_tool("flow.go", {"workflow_id": handle})
            assert result.is_error and "Unknown or expired workflow_id" in text(result)
    with http_server(billing_out, *args, package=billing_package, env=server_env(billing_out)) as billing_url:
        async with connect(billing_url, MODERN) as client:
            result = await client.call_tool("flow.go", {"workflow_id": handle})
    assert (result.is_error, text(result)) == (False, "flow.go: done."), text(result)


async def test_an_explicit_redis_prefix_still_wins(tmp_path: Path, redis_port: int) -> None:
    """#4: `?prefix=` in the URL is the operator's choice, also when it makes two servers share keys."""
    url = f"redis://127.0.0.1:{redis_port}/0?prefix=shared-by-choice:"
    with flow_server(tmp_path / "billing", "billing") as billing:
        async with connect(billing.create_server(state_store=url), MODERN) as client:
            handle = await start(client)
    with flow_server(tmp_path / "other", "other") as other:
        async with connect(other.create_server(state_store=url), MODERN) as client:
            assert await state_of(client, handle) == "a"


async def test_redis_down_gives_a_clean_tool_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, flow: GeneratedServer
) -> None:
    """#14: with Redis gone, bound calls, start and status are STORE_UNAVAILABLE without the store's error text
    (address, errno), and the handshake-era tools/list fails with a generic message; details are logged."""
    caplog.set_level(logging.ERROR)
    port, stop = start_redis(tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    server = flow.create_server(flow.handlers, state_store=url)
    async with connect(server, MODERN) as modern, connect(server, LEGACY) as legacy:
        handle = await start(modern)
        stop()
        results = [
            await modern.call_tool("flow.go", {"workflow_id": handle}),
            await modern.call_tool("flow.start", {}),
            await modern.call_tool("flow.status", {"workflow_id": handle}),
            await legacy.call_tool("flow.go", {}),
            await legacy.call_tool("flow.status", {}),
        ]
        with pytest.raises(MCPError) as listing:
            await legacy.list_tools()
    for result in results:
        shown = text(result)
        assert result.is_error is True and 'code="STORE_UNAVAILABLE"' in shown, shown
        for detail in (str(port), "127.0.0.1", "Errno", "Redis", "onnect"):
            assert detail not in shown, shown
    assert listing.value.error.message == "The workflow state cannot be read right now; retry in a moment."
    assert str(port) in caplog.text  # the details are in the log
    assert handle not in caplog.text


async def test_redis_down_over_a_port_nobody_listens_on(flow: GeneratedServer) -> None:
    """#14: the same when Redis was never reachable at all."""
    server = flow.create_server(flow.handlers, state_store=f"redis://127.0.0.1:{free_port()}/0")
    async with connect(server, MODERN) as client:
        result = await client.call_tool("flow.start", {})
    assert result.is_error is True and 'code="STORE_UNAVAILABLE"' in text(result)
    assert "127.0.0.1" not in text(result)


# --- the unit-test findings, attacked through a whole server -----------------------------------------------

NUMBER_SPEC = """\
[server]
name = "numberprobe"

[tools.measure]
input = { amount = "number", amounts = { type = "list", items = "number", required = false } }
"""


async def test_a_number_argument_refuses_nan_and_infinity_sent_as_raw_json(tmp_path: Path) -> None:
    """in_number: `NaN`, `Infinity` and `-Infinity` written into the JSON-RPC line itself (mcp.Client never
    sends them; the stdio transport's parser accepts them) are no JSON numbers: the handler never runs."""
    handlers = "def measure(args):\n    return None\n"
    with built_server(NUMBER_SPEC, tmp_path / "out", handlers=handlers) as server:
        out, package = server.out, server.package_name
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", package, cwd=out, env=server_env(out),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def request(request_id: int, method: str, params: str) -> dict[str, Any]:
        stdin.write(f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "{method}", "params": {params}}}\n'.encode())
        await stdin.drain()
        while True:
            message = json.loads(await asyncio.wait_for(stdout.readline(), 60))
            if message.get("id") == request_id:
                return dict(message)

    try:
        hello = '{"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}'
        await request(1, "initialize", hello)
        stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for number, literal in enumerate(["NaN", "Infinity", "-Infinity", "[1, NaN]"], start=2):
            arguments = f'{{"amount": {literal}}}' if "[" not in literal else f'{{"amount": 1, "amounts": {literal}}}'
            reply = await request(number, "tools/call", f'{{"name": "measure", "arguments": {arguments}}}')
            shown = reply["result"]["content"][0]["text"]
            assert reply["result"]["isError"] is True and "expected a number; you sent" in shown, shown
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_a_missing_dependency_of_the_handler_module_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """import_handlers: a missing module whose name prefixes the handler module's is not mistaken for it."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # import_handlers adds the spec's folder
    spec = '[server]\nname = "depprobe"\nhandlers = "depprobe_handlers"\n\n[tools.ping]\n'
    build(spec, tmp_path / "out", handlers="import depprobe  # not installed anywhere\n\ndef ping(args):\n    pass\n")
    with imported(tmp_path / "out", "depprobe_server") as package, pytest.raises(ModuleNotFoundError) as info:
        package.create_server()
    assert info.value.name == "depprobe"
    assert "is not importable" not in str(info.value)


async def test_a_string_cast_of_a_huge_integer_is_output_invalid(tmp_path: Path) -> None:
    """cast_string: an integer too long for str() is data that does not fit, not an internal error."""
    spec = """\
[server]
name = "castprobe"

[models.Thing]
casts = { code = "string" }
fields = { code = "integer" }

[tools."thing.get"]
returns = "Thing"
"""
    with built_server(spec, tmp_path / "out", handlers="def thing_get(args):\n    return {'code': 10**5000}\n") as s:
        async with connect(s.create_server()) as client:
            result = await client.call_tool("thing.get", {})
    assert result.is_error is True
    assert 'code="OUTPUT_INVALID"' in text(result) and "at result.code (expected a value that can be cast" in text(
        result
    )


BLOCKS_SPEC = """\
[server]
name = "blockprobe"

[models.Note]
fields = { title = "string", body = "string" }

[presenters.Note]
model = "Note"

[[presenters.Note.ui]]
type = "table"
columns = ["Field", "Value"]
rows = [["Title", "{title}"], ["Body", "{body}"]]

[[presenters.Note.ui]]
type = "list"
items = ["Title: {title}", "Body: {body}"]

[[presenters.Note.ui]]
type = "code"
language = "text"
text = "{body}"

[[presenters.Note.ui]]
type = "mermaid"
text = "graph LR; {title}"

[tools."note.get"]
returns = "Note"
"""


@pytest.fixture(scope="module")
def blocks_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("blocks")
    build(BLOCKS_SPEC, root / "out", handlers="NOTE = {}\n\ndef note_get(args):\n    return NOTE\n")
    return root


FORGED = {
    "carriage return": "ok\r| Admin | yes |",
    "crlf": "ok\r\n| Admin | yes |",
    "newline": "ok\n| Admin | yes |",
    "unicode line separator": "ok\u2028| Admin | yes |",
    "escaped backslash before a pipe": "ok\\| Admin | yes",
    "fence": "ok\n```\n# Forged heading\n- forged entry\n```",
    "long fence": "ok\n`````\n# Forged heading",
}


@pytest.mark.parametrize("value", FORGED.values(), ids=FORGED.keys())
async def test_handler_values_cannot_forge_table_rows_list_entries_or_close_fences(
    blocks_build: Path, value: str
) -> None:
    """table_text, list_text, fenced: a value stays inside its cell, its entry, its code block."""
    with imported(blocks_build / "out", "blockprobe_server") as package:
        handlers = module_of("b", "NOTE = {}\ndef note_get(args):\n    return NOTE\n")
        handlers.NOTE.update(title=value, body=value)
        async with connect(package.create_server(handlers)) as client:
            result = await client.call_tool("note.get", {})
    assert result.is_error is False
    table, listing, code, mermaid = (
        re.sub(r"^<ui_passthrough[^>]*>|</ui_passthrough>$", "", t) for t in texts(result)[1:]
    )
    rows = table.splitlines()
    assert len(rows) == 4, rows
    assert all(unescaped_pipes(row) == 3 for row in rows), rows
    assert len(listing.splitlines()) == 2, listing
    for block in (code, mermaid):
        lines = block.split("\n")
        fence = re.match(r"`{3,}", lines[0])
        assert fence is not None
        closing = [i for i, line in enumerate(lines) if re.match(rf" {{0,3}}`{{{len(fence.group())},}}\s*$", line)]
        assert closing == [len(lines) - 1], block


def unescaped_pipes(row: str) -> int:
    """Pipes that end a cell: those not preceded by an odd number of backslashes (markdown-it's rule)."""
    return sum(1 for m in re.finditer(r"(\\*)\|", row) if len(m.group(1)) % 2 == 0)
