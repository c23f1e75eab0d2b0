"""OpenTelemetry: a tool call's span carries `fusiongen.*` attributes and never a value; `--otel` exports over
OTLP/HTTP (flushed at exit), and without the `otel` extra it is a usage error naming the extra.

In-process, the SDK's `tools/call` span (mcp's OpenTelemetryMiddleware) is recorded by an InMemorySpanExporter;
end to end, the server process exports to an OTLP/HTTP receiver this test runs on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import mcp.shared._otel
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fusiongen.api import Generation
from tests.support.build import GeneratedServer, build
from tests.support.client import connect
from tests.support.processes import http_server, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT = 60.0  # seconds for a reply or an exit on a loaded machine (never a pass/fail threshold)
SECRET = "s3cr3t-value-9f2c"  # sent as arguments, returned as results, raised in a handler's message

SPEC = """\
[server]
name = "traced"

[models.Echo]
description = "What was sent."
[models.Echo.fields]
text = "string"

[workflows.flow]
initial = "a"
[workflows.flow.states]
a = { on = { GO = "b" } }
b = { type = "final" }

[tools."flow.go"]
description = "Move the flow on."
bind_state = { workflow = "flow", states = ["a"], transition = "GO" }
input = { note = { type = "string", required = false } }

[tools.echo]
kind = "query"
description = "Send the text back."
returns = "Echo"
input = { text = "string" }

[tools.explode]
description = "Always fails."
input = { text = "string" }
"""

HANDLERS = """\
def flow_go(args):
    return None


def echo(args):
    return {"text": args.text}


def explode(args):
    raise RuntimeError(f"the database refused {args.text}")
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, Path]:
    out = tmp_path_factory.mktemp("traced") / "out"
    return build(SPEC, out, handlers=HANDLERS), out


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The SDK's server spans, recorded in memory for this test only: mcp's tracer is replaced by one of a
    private provider, so the process-wide provider (which can be set only once) stays untouched."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(mcp.shared._otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    yield exporter
    provider.shutdown()


@pytest.fixture
def server(traced: tuple[Generation, Path]) -> Iterator[GeneratedServer]:
    generation, out = traced
    with GeneratedServer(generation, out) as built:
        yield built


def digest(handle: str) -> str:
    return "sha256:" + hashlib.sha256(handle.encode()).hexdigest()[:8]


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call ")]


def fusiongen_attributes(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("fusiongen.")}


def everything_recorded(span: ReadableSpan) -> str:
    """Every text a span carries: name, attributes, status, events and their attributes, links."""
    parts: list[object] = [span.name, span.status.description, *(span.attributes or {}).items()]
    for event in span.events:
        parts += [event.name, *(event.attributes or {}).items()]
    for link in span.links:
        parts += [*(link.attributes or {}).items()]
    return repr(parts)


# --- in-process ------------------------------------------------------------------------------------------


async def test_a_tool_call_span_carries_the_fusiongen_attributes(
    server: GeneratedServer, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """Each call's `tools/call <tool>` span gets the tool, the outcome code, the handle's digest (passed or
    minted) and the workflow, also with info logging off (the default): the two reports are independent."""
    caplog.set_level("WARNING", logger="traced_server")
    async with connect(server.create_server()) as client:
        started = await client.call_tool("flow_start", {})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        await client.call_tool("flow_go", {"workflow_id": handle})
        await client.call_tool("flow_go", {"workflow_id": handle})
        await client.call_tool("echo", {"text": "hello"})
        await client.call_tool("echo", {"text": 7})
    assert [(s.name, fusiongen_attributes(s)) for s in tool_spans(spans)] == [
        (
            "tools/call flow_start",
            {
                "fusiongen.tool": "flow_start",
                "fusiongen.outcome": "ok",
                "fusiongen.handle": digest(handle),
                "fusiongen.workflow": "flow",
            },
        ),
        (
            "tools/call flow_go",
            {
                "fusiongen.tool": "flow_go",
                "fusiongen.outcome": "ok",
                "fusiongen.handle": digest(handle),
                "fusiongen.workflow": "flow",
            },
        ),
        (
            "tools/call flow_go",
            {
                "fusiongen.tool": "flow_go",
                "fusiongen.outcome": "FORBIDDEN",
                "fusiongen.handle": digest(handle),
                "fusiongen.workflow": "flow",
            },
        ),
        ("tools/call echo", {"fusiongen.tool": "echo", "fusiongen.outcome": "ok"}),
        ("tools/call echo", {"fusiongen.tool": "echo", "fusiongen.outcome": "VALIDATION_ERROR"}),
    ]
    assert " call tool=" not in caplog.text  # info is off: no call line, and the spans were still enriched


async def test_no_span_carries_a_value_sent_returned_or_raised(
    server: GeneratedServer, spans: InMemorySpanExporter
) -> None:
    """Secret-looking values as arguments (valid and invalid), as a result, and in a handler's exception message,
    and a workflow handle: none of them is in any span's name, attributes, status, events or links."""
    async with connect(server.create_server()) as client:
        started = await client.call_tool("flow_start", {})
        handle = started.structured_content["workflow_id"]  # type: ignore[index]
        results = [
            await client.call_tool("echo", {"text": SECRET}),
            await client.call_tool("echo", {"text": {"nested": SECRET}}),
            await client.call_tool("explode", {"text": SECRET}),
            await client.call_tool("flow_go", {"workflow_id": handle, "note": SECRET}),
            await client.call_tool("flow_status", {"workflow_id": handle}),
        ]
    # The values did reach the server and come back where they should (so their absence below means something).
    assert results[0].structured_content["data"] == {"text": SECRET}
    assert SECRET in results[1].content[0].text  # type: ignore[union-attr]  # a validation error echoes it
    assert results[2].is_error
    recorded = spans.get_finished_spans()
    assert len(tool_spans(spans)) == 6
    assert [fusiongen_attributes(s)["fusiongen.outcome"] for s in tool_spans(spans)] == [
        "ok",
        "ok",
        "VALIDATION_ERROR",
        "INTERNAL_ERROR",
        "ok",
        "ok",
    ]
    for span in recorded:
        text = everything_recorded(span)
        assert SECRET not in text, text
        assert handle not in text, text
        assert "database refused" not in text, text
        assert not span.events  # no exception recorded: the runtime lets none through


# --- --otel in a server process --------------------------------------------------------------------------


@pytest.mark.parametrize("blocked", ["opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"])
def test_otel_without_the_extra_is_a_usage_error_naming_it(traced: tuple[Generation, Path], blocked: str) -> None:
    """With the SDK or the exporter not importable (None in sys.modules makes every import of it fail, as if
    it were not installed), `--otel` exits 2 before serving, saying which extra to install."""
    out = traced[1]
    code = (
        f"import runpy, sys; sys.modules[{blocked!r}] = None; "
        "runpy.run_module('traced_server', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--otel"],
        cwd=out,
        env=server_env(out),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--otel: the OpenTelemetry SDK or its OTLP/HTTP exporter is not installed" in proc.stderr
    assert "pip install 'traced-server[otel]'" in proc.stderr
    assert proc.stdout == ""


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: keeps every export request it is sent, answers 200."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.raw: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.raw.append(body)
                    receiver.requests.append(request)
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1/traces"

    def spans(self) -> list[tuple[str, str, dict[str, str]]]:
        """(service.name, span name, string attributes) of every span received."""
        found = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: a.value.string_value for a in span.attributes}
                        found.append((resource.get("service.name", ""), span.name, attributes))
        return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    yield receiver
    receiver.http.shutdown()
    receiver.http.server_close()


def otel_env(out: Path, receiver: Receiver) -> dict[str, str]:
    """Export to the receiver; a batch delay of 10 minutes, so only the flush at exit can deliver in time."""
    env = server_env(
        out,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="600000",
        OTEL_TRACES_SAMPLER="always_on",
    )
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    return env


class StdioServer:
    """`python -m traced_server` on stdio, spoken to line by line (one JSON-RPC message per line)."""

    def __init__(self, out: Path, env: dict[str, str], log: Path, *args: str) -> None:
        self.sink = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "traced_server", *args],
            cwd=out,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.sink,
        )
        self.next_id = 1

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request_id, self.next_id = self.next_id, self.next_id + 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()
        while line := self.process.stdout.readline():  # bounded by the test's timeout
            reply = json.loads(line)
            if reply.get("id") == request_id:
                return dict(reply)
        raise AssertionError("the server closed stdout before answering")

    def initialize(self) -> None:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        self.request("initialize", hello)
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.sink.close()


def test_otel_on_stdio_exports_the_call_spans_when_sigterm_ends_it(
    tmp_path: Path, traced: tuple[Generation, Path], receiver: Receiver
) -> None:
    """SIGTERM on stdio exits at once (os._exit), after sending the spans still queued: the tool call's span
    arrives with the server's name as service.name and its fusiongen attributes, and no value."""
    out, log = traced[1], tmp_path / "server.log"
    server = StdioServer(out, otel_env(out, receiver), log, "--otel")
    try:
        server.initialize()
        started = server.request("tools/call", {"name": "flow_start", "arguments": {}})
        handle = started["result"]["structuredContent"]["workflow_id"]
        echoed = server.request("tools/call", {"name": "echo", "arguments": {"text": SECRET}})
        assert echoed["result"]["structuredContent"]["data"] == {"text": SECRET}
        server.process.terminate()
        assert server.process.wait(timeout=WAIT) == 0, log.read_text()
    finally:
        server.close()
    received = receiver.spans()
    assert ("traced", "tools/call flow_start") in [(service, name) for service, name, _ in received], log.read_text()
    calls = {name: attributes for _, name, attributes in received if name.startswith("tools/call ")}
    assert calls["tools/call flow_start"]["fusiongen.handle"] == digest(handle)
    assert calls["tools/call echo"]["fusiongen.outcome"] == "ok"
    body = b"".join(receiver.raw)
    assert SECRET.encode() not in body and handle.encode() not in body


async def test_otel_over_http_exports_the_call_spans_at_shutdown(
    tmp_path: Path, traced: tuple[Generation, Path], receiver: Receiver
) -> None:
    """Over HTTP, SIGTERM makes uvicorn shut down and raise the signal again; the spans are sent in its
    shutdown, before that, and OTEL_SERVICE_NAME overrides the default service name."""
    out = traced[1]
    env = otel_env(out, receiver) | {"OTEL_SERVICE_NAME": "traced-in-test"}
    with http_server(out, "--otel", package="traced_server", env=env, log=tmp_path / "server.log") as url:
        async with connect(url) as client:
            result = await client.call_tool("echo", {"text": "over http"})
            assert result.structured_content["data"] == {"text": "over http"}
        assert receiver.spans() == []  # nothing sent yet: the batch waits (10 minutes)
    # http_server's exit sent SIGTERM and waited for the process to end.
    received = receiver.spans()
    calls = [(service, attributes) for service, name, attributes in received if name == "tools/call echo"]
    assert len(calls) == 1, ((tmp_path / "server.log").read_text(), received)
    service, attributes = calls[0]
    assert service == "traced-in-test"
    assert attributes["fusiongen.tool"] == "echo" and attributes["fusiongen.outcome"] == "ok"
