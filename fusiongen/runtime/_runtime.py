"""The call path shared by the generated modules: the call log and the audit log, handler binding, `run_tool`
(validate, run the handler, present). What a call answers is in `_results.py`, how a result reads in
`_presenting.py`, values (checks, casts, reading handler data) in `_values.py`.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib
import inspect
import json
import logging
import re
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Final, NamedTuple, TextIO, TypeVar

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR
from opentelemetry.trace import Span, get_current_span

from ._identity import Identity, presented_as, presented_identity, with_identity
from ._results import (
    NotAHandler,
    ToolError,
    domain_error,
    done_result,
    handler_failed,
    no_result,
    not_a_handler,
    output_invalid,
    tool_error,
    unknown_tool,
    validation_error,
)
from ._values import InvalidArguments, OutputError

logger = logging.getLogger(__name__.rpartition(".")[0])

# <workflow>.start calls a client (an authenticated subject, a handshake session: see _gate.client_key) may make
# per minute, in one burst too: ten a second, more than any agent (or a team behind one token) working through
# workflows starts, and it slows a loop that starts without end.
DEFAULT_STARTS_PER_MINUTE = 600
# Records one client may start per handle idle TTL (each lives that long): what bounds the store one client can
# fill. Far more handles than an agent holds at once.
DEFAULT_LIVE_STARTS = 10_000

# --- call log ----------------------------------------------------------------------------------------

_ERROR_CODE = re.compile(r'<tool_error [^>]*?code="([A-Z0-9_]+)"')


def call_outcome(result: types.CallToolResult) -> str:
    """`ok`, or the error's code: a `<tool_error>`'s `code`, `VALIDATION_ERROR` for invalid arguments."""
    if not result.is_error:
        return "ok"
    first = result.content[0] if result.content else None
    shown = first.text if isinstance(first, types.TextContent) else ""
    if shown.startswith("<validation_error"):
        return "VALIDATION_ERROR"
    match = _ERROR_CODE.match(shown)
    return match.group(1) if match else "ERROR"


def handle_digest(handle: object) -> str:
    """How a workflow handle appears in the call log: `sha256:` and 8 hex digits, never the handle itself."""
    if not isinstance(handle, str):
        return "-"
    return "sha256:" + hashlib.sha256(handle.encode("utf-8", "surrogatepass")).hexdigest()[:8]


class AuditUnavailable(Exception):
    """The audit log could not be written (a full disk, a closed file): the request must not go on unaudited."""


class AuditLog:
    """`--audit-log FILE`: two JSON lines per request that reaches data or a handler (tools/call, resources/read,
    prompts/get, completion/complete), sharing a random `request` id: `"phase": "begin"`, written and flushed
    before anything runs, and `"phase": "end"` with the outcome code. Each names when (UTC), who (subject,
    tenant: null without identity), which method and name (null for a name the server does not have: a client's
    text is never written) and `arguments_sha256`, the SHA-256 of the arguments' canonical JSON (sorted keys, no
    spaces, UTF-8). Never a value: the digest proves which arguments a request had to whoever holds them, and
    tells nobody else what they were.

    Fail closed: a begin line that cannot be written raises `AuditUnavailable`, and the request is refused
    before its handler runs. Lines are ASCII (`\\u` escapes), so no subject a token carries (a lone surrogate,
    U+2028, NEL) can fail to encode or split a line for a reader."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()  # the threaded stdio transport may call from other threads

    def begin(
        self, method: str, name: str | None, identity: Identity | None, arguments: Mapping[str, Any]
    ) -> AuditEntry:
        """Write the request's begin line; `AuditUnavailable` if it cannot be written (the request must stop)."""
        entry = AuditEntry(
            secrets.token_hex(8),
            method,
            name,
            identity.subject if identity is not None else None,
            identity.tenant if identity is not None else None,
            arguments_digest(arguments),
        )
        self._write(entry, "begin", None)
        return entry

    def end(self, entry: AuditEntry, outcome: str) -> None:
        """Write the request's end line. Its effect has happened: a line that cannot be written is logged (the
        begin line already says the request was made), and the answer still goes to the client."""
        try:
            self._write(entry, "end", outcome)
        except AuditUnavailable as exc:
            logger.error("--audit-log: the end line of request %s could not be written: %s", entry.request, exc)

    def _write(self, entry: AuditEntry, phase: str, outcome: str | None) -> None:
        line = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "request": entry.request,
            "phase": phase,
            "subject": entry.subject,
            "tenant": entry.tenant,
            "method": entry.method,
            "name": entry.name,
            "outcome": outcome,
            "arguments_sha256": entry.digest,
        }
        text = json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n"
        with self._lock:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError) as exc:  # ENOSPC, EIO, a closed stream
                raise AuditUnavailable(str(exc)) from exc


class AuditEntry(NamedTuple):
    """One audited request, between its begin and end lines."""

    request: str
    method: str
    name: str | None
    subject: str | None
    tenant: str | None
    digest: str


# What a request whose begin line could not be written gets instead of running: no detail of the failure.
AUDIT_UNAVAILABLE_MESSAGE: Final = "The request was not carried out: the server cannot write its audit log."
AUDIT_UNAVAILABLE_RECOVERY: Final = "Retry later; if it keeps failing, tell the user the server cannot record requests."


def audit_unavailable(tool: str, exc: AuditUnavailable) -> types.CallToolResult:
    logger.error("--audit-log: cannot write: %s; tool %s refused", exc, tool)
    return tool_error(tool, "AUDIT_UNAVAILABLE", AUDIT_UNAVAILABLE_MESSAGE, AUDIT_UNAVAILABLE_RECOVERY)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments: sorted keys, compact, UTF-8."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class _AuditSink:
    """Where calls are audited: set once at start-up by `--audit-log` (None: no audit)."""

    log: AuditLog | None = None


AUDIT: Final = _AuditSink()


def audit_to(log: AuditLog | None) -> None:
    AUDIT.log = log


async def logged_call(
    tool: str,
    handle_key: str | None,
    arguments: Mapping[str, Any],
    call: Callable[[], Awaitable[types.CallToolResult]],
    workflow: str | None = None,
    ctx: Any = None,
) -> types.CallToolResult:
    """Run one tool call and report it, never with an argument or result value: one line at info (the tool, the
    outcome code, the duration, the handle's digest: the one passed, or the one `<workflow>.start` minted), and
    the same as `fusiongen.*` attributes of the current OpenTelemetry span (the SDK's `tools/call` span).

    Either report is made only if someone listens: with info off and no tracing configured (the defaults, where
    the current span is OpenTelemetry's non-recording one) the call pays for no clock, digest or attribute.
    With `--audit-log`, the call's audit line too (`ctx`: the request, whose caller it names)."""
    span = get_current_span()
    tracing = span.is_recording()
    logging_calls = logger.isEnabledFor(logging.INFO)
    audit = AUDIT.log
    if not (tracing or logging_calls or audit is not None):
        return await call()
    entry = None
    if audit is not None:
        try:
            entry = audit.begin("tools/call", tool, with_identity(ctx).identity if ctx is not None else None, arguments)
        except AuditUnavailable as exc:  # before the handler: a call that cannot be audited is not made
            return audit_unavailable(tool, exc)
    started = time.perf_counter()
    outcome, handle = "EXCEPTION", arguments.get(handle_key) if handle_key else None
    try:
        result = await call()
        outcome = call_outcome(result)
        if handle is None and handle_key and isinstance(result.structured_content, dict):
            handle = result.structured_content.get(handle_key)
        return result
    except BaseException as exc:
        outcome = "CANCELLED" if isinstance(exc, anyio.get_cancelled_exc_class()) else "EXCEPTION"
        raise
    finally:
        elapsed = (time.perf_counter() - started) * 1000
        digest = handle_digest(handle)
        if tracing:
            annotate_span(span, tool, outcome, digest, workflow)
        if logging_calls:
            logger.info("call tool=%s outcome=%s duration_ms=%.1f handle=%s", tool, outcome, elapsed, digest)
        if audit is not None and entry is not None:
            audit.end(entry, outcome)


_Answer = TypeVar("_Answer")


class SurfaceError(MCPError):
    """A JSON-RPC error of resources/read, prompts/get or completion/complete, with the outcome code the audit
    line and the log give it (`NOT_FOUND`, `VALIDATION_ERROR`, `FORBIDDEN`, a tool error's code)."""

    def __init__(self, code: int, message: str, data: Any = None, *, outcome: str) -> None:
        super().__init__(code, message, data)
        self.outcome = outcome


async def unknown_tool_call(
    name: str, known: list[str], arguments: Mapping[str, Any], ctx: Any
) -> types.CallToolResult:
    """A tools/call of a tool the server does not serve: the protocol error (`unknown_tool`), audited like every
    request (name null: the client's text is never written), so probing for tool names leaves a trail too."""

    async def refuse() -> types.CallToolResult:
        error = unknown_tool(name, known)
        raise SurfaceError(error.code, error.message, outcome="NOT_FOUND")

    return await audited("tools/call", None, arguments, ctx, refuse)


async def audited(
    method: str, name: str | None, arguments: Mapping[str, Any], ctx: Any, call: Callable[[], Awaitable[_Answer]]
) -> _Answer:
    """Run one request of the surface beside tools (resources/read, prompts/get, completion/complete) and, with
    `--audit-log`, audit it as a tool call: the same caller, outcome and digest of its arguments, the begin line
    before anything runs (a log that cannot be written refuses the request: INTERNAL_ERROR, AUDIT_UNAVAILABLE)."""
    audit = AUDIT.log
    if audit is None:
        return await call()
    try:
        entry = audit.begin(method, name, with_identity(ctx).identity, arguments)
    except AuditUnavailable as exc:
        logger.error("--audit-log: cannot write: %s; %s refused", exc, method)
        text = tool_error(name or method, "AUDIT_UNAVAILABLE", AUDIT_UNAVAILABLE_MESSAGE, AUDIT_UNAVAILABLE_RECOVERY)
        message = "".join(block.text for block in text.content if isinstance(block, types.TextContent))
        raise SurfaceError(INTERNAL_ERROR, message, outcome="AUDIT_UNAVAILABLE") from None
    outcome = "EXCEPTION"
    try:
        answer = await call()
        outcome = "ok"
        return answer
    except SurfaceError as exc:
        outcome = exc.outcome
        raise
    except BaseException as exc:
        outcome = "CANCELLED" if isinstance(exc, anyio.get_cancelled_exc_class()) else "EXCEPTION"
        raise
    finally:
        audit.end(entry, outcome)


def annotate_span(span: Span, tool: str, outcome: str, digest: str, workflow: str | None) -> None:
    """The call's `fusiongen.*` span attributes: names from the spec, the outcome code and the handle's digest,
    all of them known to hold no value sent or returned. `fusiongen.handle` and `fusiongen.workflow` are set
    only when the call has one."""
    attributes = {"fusiongen.tool": tool, "fusiongen.outcome": outcome}
    if digest != "-":
        attributes["fusiongen.handle"] = digest
    if workflow is not None:
        attributes["fusiongen.workflow"] = workflow
    span.set_attributes(attributes)


# --- handlers ----------------------------------------------------------------------------------------

Handler = Callable[[Any, Any], Awaitable[object]]
Parse = Callable[[Mapping[str, Any]], Any]
Present = Callable[[object], types.CallToolResult]
# How the server dispatches one tool: (arguments, request context) → result.
Route = Callable[[Mapping[str, Any], Any], Awaitable[types.CallToolResult]]


def by_role(default: Present, table: tuple[tuple[str, Present], ...]) -> Present:
    """returns_for_role: the presenter of the first role in `table` the caller has, else `default` (also for a
    caller without identity: stdio, in-process, HTTP without --auth). Chosen per call, when presenting."""

    def present(raw: object) -> types.CallToolResult:
        identity = presented_identity()
        roles = identity.roles if identity is not None else frozenset()
        chosen = next((presenter for role, presenter in table if role in roles), default)
        return chosen(raw)

    return present


async def run_tool(
    tool: str,
    parse: Parse,
    present: Present | None,
    handler: Handler,
    arguments: Mapping[str, Any],
    ctx: Any,
    *,
    errors: frozenset[str] = frozenset(),
    tool_names: Mapping[str, str] | None = None,
    stale: Callable[[types.CallToolResult], types.CallToolResult] | None = None,
) -> types.CallToolResult:
    """Validate the arguments, run the handler, present what it returned (`stale`, given a tool that makes
    earlier results stale: `with_stale` bound to them, which a successful result goes through).

    Each step fails closed into an error result a model can act on: a handler's exception text is never
    shown (it may carry hidden data), and data that does not fit its presenter is not sent at all. Only a
    ToolError is shown, as its handler wrote it (`errors`: the codes the spec declares for the tool;
    `tool_names`: the names its suggestions may use, mapped to wire names).
    Whatever a handler raises ends its call only, also a BaseException (SystemExit, KeyboardInterrupt,
    GeneratorExit...), which would otherwise end the whole server; only the cancellation of the request
    itself goes on, as the SDK expects.
    """
    try:
        args = parse(arguments)
    except InvalidArguments as exc:
        return validation_error(tool, exc.errors)
    caller = with_identity(ctx)
    try:
        # settle() again: an `async def (args, ctx)` handler is bound as itself and may return a coroutine; plain
        # data (the usual result) is neither awaitable nor a generator, and skips it.
        raw = await handler(args, caller)
        if type(raw) not in _PLAIN_DATA:
            raw = await settle(raw)
    except ToolError as exc:
        return domain_error(tool, exc, errors, tool_names)
    except NotAHandler as exc:
        return not_a_handler(tool, exc)
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            raise
        return handler_failed(tool, exc)
    if present is None:
        done = done_result(tool, raw)
        return stale(done) if stale is not None else done
    if raw is None:
        return no_result(tool)
    try:
        result = presented_as(caller.identity, present, raw)  # by_role and `ctx.*` expressions read the caller
        return stale(result) if stale is not None and not result.is_error else result
    except OutputError as exc:
        return output_invalid(tool, exc)
    except BaseException as exc:  # reading the handler's data raised (a property, a lazy ORM attribute...)
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            raise
        return handler_failed(tool, exc)


def import_handlers(module: str, package_file: str, handlers_dir: str) -> ModuleType:
    """Import the user's handler module; if it is not importable as is, look beside the spec."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _is_handler_module(module, exc.name):
            raise
    search = (Path(package_file).parent / handlers_dir).resolve()
    sys.path.insert(0, str(search))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _is_handler_module(module, exc.name):
            raise
        raise ModuleNotFoundError(
            f'the handler module "{module}" is not importable: install it or add its folder to PYTHONPATH '
            f"(also looked in {search})",
            name=module,
        ) from None


def _is_handler_module(module: str, missing_name: str | None) -> bool:
    """Whether the module that was not found is the handler module or one of its parent packages."""
    return missing_name is not None and (module == missing_name or module.startswith(missing_name + "."))


def bind_handler(module: ModuleType, name: str, tool: str) -> Handler:
    """Adapt a handler (sync or async, with or without `ctx`) to `await handler(args, ctx)`, once at start-up.

    Whatever a call returns that is awaitable is awaited, whether the handler is an `async def`, an object
    with `async def __call__`, or a sync wrapper around an async function. A generator (a handler with
    `yield`) is refused: its body would never run. Sync handlers run on the event loop: keep them fast, or
    make them async for I/O.
    """
    function = _handler_function(module, name, tool)
    return _adapted(function, takes_ctx(function))


def _handler_function(module: ModuleType, name: str, tool: str) -> Callable[..., object]:
    function = getattr(module, name, None)
    if not callable(function):
        raise RuntimeError(f'handler module "{module.__name__}" has no function "{name}" for tool "{tool}"')
    return function  # type: ignore[no-any-return]


def _adapted(function: Callable[..., object], ctx_wanted: bool) -> Handler:
    if ctx_wanted and inspect.iscoroutinefunction(function):
        return function

    async def call(args: Any, ctx: Any) -> object:
        return await settle(function(args, ctx) if ctx_wanted else function(args))

    return call


def takes_ctx(function: Callable[..., object]) -> bool:
    """Whether bind_handler passes the handler its `ctx`: only such a handler can send anything during its call
    (progress, log messages, requests to the client)."""
    return _positional_parameters(function) >= 2


class Handlers:
    """The handler module's functions, each bound once at start-up (bind_handler), and the tools and resources
    whose handler takes `ctx`: whether there is any decides how `--http-response auto` answers (HandlerServer)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.taking_ctx: list[str] = []

    def bind(self, name: str, tool: str) -> Handler:
        """`bind_handler(module, name, tool)`, noting whether the handler takes `ctx` (its signature read once)."""
        function = _handler_function(self.module, name, tool)
        ctx_wanted = takes_ctx(function)
        if ctx_wanted:
            self.taking_ctx.append(tool)
        return _adapted(function, ctx_wanted)


class HandlerServer(Server[Any]):
    """The SDK's low-level Server, knowing one thing more: whether any of its handlers takes `ctx`
    (`Handlers.taking_ctx`). If none does, nothing is ever sent during a call but its result, so HTTP with
    `--http-response auto` answers each request with one JSON body, which costs about half the server CPU of an
    SSE stream (_http.json_responses)."""

    handlers_take_ctx: bool = True  # until create_server says otherwise: SSE streams drop nothing


_PLAIN_DATA: Final = frozenset({dict, list, tuple, str, int, float, bool, type(None)})


async def settle(result: object) -> object:
    """What a handler call produced, as a result: awaitables awaited; a generator refused (NotAHandler)."""
    while inspect.isawaitable(result):
        result = await result
    if inspect.isgenerator(result):
        result.close()
        raise NotAHandler("a generator")
    if inspect.isasyncgen(result):
        await result.aclose()
        raise NotAHandler("an async generator")
    return result


def _positional_parameters(function: Callable[..., object]) -> int:
    """How many arguments to pass: 2 when a second positional parameter wants the context (it has no
    default, is named ctx, or is *args), else 1."""
    positional = [
        p
        for p in inspect.signature(function).parameters.values()
        if p.kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
    ]
    if len(positional) < 2:
        return 1
    second = positional[1]
    wants = (
        second.kind is inspect.Parameter.VAR_POSITIONAL
        or second.default is inspect.Parameter.empty
        or second.name == "ctx"
    )
    return 2 if wants else 1
