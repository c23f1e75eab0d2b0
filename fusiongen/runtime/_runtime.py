"""The call path shared by the generated modules: results and domain errors, the call log, handler binding,
`run_tool`, presenting. Values (checks, casts, reading handler data) are in `_values.py`.

Everything here fails closed: data that does not have the declared shape raises `OutputError`, which
the tool turns into an error result carrying no data. Messages name declared fields and expected
types only, never a value the handler returned, so nothing hidden can leak through an error.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib
import inspect
import json
import logging
import math
import re
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final, NamedTuple, TextIO, TypeVar

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from opentelemetry.trace import Span, get_current_span

from ._identity import Identity, presented_as, presented_identity, with_identity
from ._identity import caller_value as caller_value  # re-exported: presenters' `ctx.*` expressions call it
from ._values import FieldError, InvalidArguments, OutputError

try:
    import orjson
except ImportError:  # orjson is optional: the standard library gives the same text, slower
    orjson = None  # type: ignore[assignment]

logger = logging.getLogger(__name__.rpartition(".")[0])

# --- results -----------------------------------------------------------------------------------------


def escape_text(text: str) -> str:
    """Element text: `&` and `<` are all XML needs (`>` stays, so markdown and mermaid arrows survive)."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def escape_attribute(text: str) -> str:
    return escape_text(text).replace(">", "&gt;").replace('"', "&quot;").replace("'", "&apos;")


if orjson is not None:
    _ORJSON_OPTIONS: Final = orjson.OPT_INDENT_2

    def dumps(data: object) -> str:
        return orjson.dumps(data, option=_ORJSON_OPTIONS).decode()

else:

    def dumps(data: object) -> str:
        return json.dumps(data, indent=2, ensure_ascii=False)


def data_result(text_data: object, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=dumps(text_data))],
        structured_content=structured,
    )


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def validation_error(tool: str, errors: list[FieldError]) -> types.CallToolResult:
    fields = "".join(f'<field name="{escape_attribute(e.name)}">{escape_text(e.message)}</field>' for e in errors)
    return error_result(
        f'<validation_error tool="{escape_attribute(tool)}">{fields}'
        "<recovery>Fix the fields above and call the tool again.</recovery></validation_error>"
    )


def tool_error(tool: str, code: str, message: str, recovery: str) -> types.CallToolResult:
    return error_result(
        f'<tool_error tool="{escape_attribute(tool)}" code="{code}" severity="error">'
        f"<message>{escape_text(message)}</message><recovery>{escape_text(recovery)}</recovery></tool_error>"
    )


def handler_failed(tool: str, exc: BaseException) -> types.CallToolResult:
    """The handler raised. Its message may carry hidden data, so neither the result nor the log shows it."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    where = f" at {frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}" if frame is not None else ""
    logger.error("tool %s: handler raised %s%s", tool, type(exc).__name__, where)
    return tool_error(
        tool,
        "INTERNAL_ERROR",
        f'Tool "{tool}" failed: its handler raised an internal error.',
        "Retry once; if it fails again, tell the user the tool is failing.",
    )


class NotAHandler(TypeError):
    """A handler call produced something that is not a result: a generator, whose body never ran."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"the handler returned {what} instead of its result")


def not_a_handler(tool: str, exc: NotAHandler) -> types.CallToolResult:
    """The handler returned a generator: its body never ran, so the call failed (and fires no transition)."""
    logger.error(
        "tool %s: the handler returned %s instead of its result, so its body never ran; "
        "a handler must not contain `yield` (return the result, or make it `async def`)",
        tool,
        exc.what,
    )
    return tool_error(
        tool,
        "INTERNAL_ERROR",
        f'Tool "{tool}" failed: its handler raised an internal error.',
        "Retry once; if it fails again, tell the user the tool is failing.",
    )


def output_invalid(tool: str, exc: OutputError) -> types.CallToolResult:
    logger.error("tool %s: handler returned data that does not fit %s (expected %s)", tool, exc.path, exc.expected)
    return tool_error(
        tool,
        "OUTPUT_INVALID",
        f'Tool "{tool}" produced data that does not fit its schema at {exc.path} '
        f"(expected {exc.expected}); nothing was returned.",
        "Do not retry with the same arguments; tell the user the tool returned data its schema does not allow.",
    )


def no_result(tool: str) -> types.CallToolResult:
    """A tool that declares a result returned None. Whether that is a miss or a bug only the handler knows (a
    miss is its own ToolError), so the agent is told what happened and nothing more."""
    logger.error("tool %s: handler returned None, but the tool declares a result", tool)
    return tool_error(
        tool,
        "OUTPUT_INVALID",
        f'Tool "{tool}" returned no result: its handler returned nothing; nothing was shown.',
        "Check the arguments you sent (an id that does not exist?); if they are right, tell the user the "
        "tool returned nothing.",
    )


def unknown_tool(name: str, known: list[str]) -> MCPError:
    """An unknown tool is a protocol error (JSON-RPC -32602), as the MCP specification lists it."""
    return MCPError(INVALID_PARAMS, f'Unknown tool: "{name}". Tools: ' + ", ".join(known) + ".")


def done_result(tool: str, returned: object = None) -> types.CallToolResult:
    """A tool that declares no result: a string the handler returned is sent as text; anything else is not
    shown (it may be an object with hidden fields) and the call just says that it succeeded."""
    if isinstance(returned, str):
        return text_result(returned)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{tool}: done.")])


def stale_notice(names: Sequence[str]) -> str:
    """What a successful mutation tells the agent about results it read before (docs/spec.md §6.9)."""
    them = "them" if len(names) > 1 else "it"
    return f"Stale now: results read earlier from {', '.join(names)}; call {them} again before relying on {them}."


def with_stale(
    result: types.CallToolResult, stale: Sequence[str], tool_names: Mapping[str, str] | None
) -> types.CallToolResult:
    """A successful mutation's result, naming (by the wire names the client uses) the tools whose earlier results
    it made stale: in an envelope, as `stale` and as the last rule, in the `<domain_rules>` of its first block too;
    in a text result, after its text in the same block: a client passing on only the first block passes it on.

    In a presented result's first block `\n</domain_rules>` and `\n\n<action_suggestions>\n` occur only where
    `_result` wrote them: the data before them is JSON, whose strings never hold a raw line break."""
    names = [tool_names.get(n, n) for n in stale] if tool_names is not None else list(stale)
    notice = stale_notice(names)
    structured = result.structured_content
    content = list(result.content)
    first = content[0] if content else None
    if (
        isinstance(structured, dict)
        and isinstance(structured.get("rules"), list)
        and isinstance(first, types.TextContent)
    ):
        structured = {**structured, "rules": [*structured["rules"], notice], "stale": names}
        line = f"- {_one_line(escape_text(notice))}\n"
        text = first.text
        end = text.rfind("\n</domain_rules>")
        if end >= 0:
            text = f"{text[: end + 1]}{line}{text[end + 1 :]}"
        else:
            at = text.rfind("\n\n<action_suggestions>\n")
            at = len(text) if at < 0 else at
            text = f"{text[:at]}\n\n<domain_rules>\n{line}</domain_rules>{text[at:]}"
        content[0] = types.TextContent(type="text", text=text, annotations=first.annotations)
        return types.CallToolResult(content=content, structured_content=structured, is_error=False)
    if isinstance(first, types.TextContent):
        content[0] = types.TextContent(type="text", text=f"{first.text}\n\n{notice}", annotations=first.annotations)
    else:
        content.insert(0, types.TextContent(type="text", text=notice))
    return types.CallToolResult(content=content, structured_content=structured, is_error=result.is_error)


def text_result(text: str) -> types.CallToolResult:
    """The handler's own text as one text block (a str subclass as the plain string it holds)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=str.__str__(text))])


def as_text_result(returned: object) -> types.CallToolResult:
    """`returns = "text"`: the handler's string, as one text block. Anything else fails closed (OUTPUT_INVALID):
    the tool promised text, and an object's text form could show what no presenter has redacted."""
    if isinstance(returned, str):
        return text_result(returned)
    raise OutputError("result", "", "a string")


# --- domain errors: what a handler raises to say why its call failed -----------------------------------

# UPPER_SNAKE_CASE: the `code` attribute of a <tool_error>, a name an agent (and the call log) can branch on.
ERROR_CODE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\Z")
# Codes with a meaning of the server's own: an agent or the workflow gate acts on them (INTERNAL_ERROR and
# OUTPUT_INVALID leave a transition in doubt), so a handler cannot raise them as domain errors.
RESERVED_ERROR_CODES: Final = frozenset({"INTERNAL_ERROR", "OUTPUT_INVALID", "VALIDATION_ERROR", "IN_DOUBT"})
ERROR_CODE_MAX_LENGTH: Final = 64


class ToolError(Exception):
    """Raise it from a handler to fail the call with a domain error the agent can act on:

        raise ToolError("NOT_FOUND", "No invoice inv-9.", recovery="List invoices to find the right id.",
                        suggest=["invoice.list"])

    The agent gets `isError: true` and a `<tool_error>` like the server's own, with this code, message and
    recovery; `suggest` names tools to call next, `retry_after` the seconds to wait before retrying. A bound
    tool's transition does not fire. The message and recovery are sent as written: they are the handler's
    own words, so they must not carry what the agent may not see (a hidden field, a secret). Declare the
    codes a tool raises in the spec (`errors = { NOT_FOUND = "..." }`): the tool's description lists them.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recovery: str | None = None,
        suggest: list[str] | tuple[str, ...] = (),
        retry_after: float | None = None,
    ) -> None:
        if not isinstance(code, str) or len(code) > ERROR_CODE_MAX_LENGTH or not ERROR_CODE.match(code):
            raise ValueError(f"ToolError code must be UPPER_SNAKE_CASE (at most {ERROR_CODE_MAX_LENGTH} characters)")
        if code in RESERVED_ERROR_CODES:
            raise ValueError(f"ToolError code {code} is the server's own; choose another")
        if not isinstance(message, str) or (recovery is not None and not isinstance(recovery, str)):
            raise TypeError("ToolError message and recovery must be strings")
        if isinstance(suggest, str) or not all(isinstance(name, str) for name in suggest):
            raise TypeError("ToolError suggest must be a list of tool names")
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or not math.isfinite(retry_after)
            or retry_after < 0
        ):
            raise ValueError("ToolError retry_after must be a number of seconds, at least 0")
        self.code = code
        self.message = message
        self.recovery = recovery
        self.suggest = tuple(suggest)
        self.retry_after = retry_after
        super().__init__(code)  # never the message: a traceback or a log line shows only the code


DEFAULT_RECOVERY: Final = "Read the message above, then change your call or tell the user."


def domain_error(
    tool: str, error: ToolError, declared: frozenset[str], tool_names: Mapping[str, str] | None
) -> types.CallToolResult:
    """A handler's ToolError as the agent sees it. An undeclared code is delivered too (the handler knows best)
    and logged, without the message, so the spec can be told. A suggested tool is shown by its wire name
    (`tool_names` maps spec and wire names to it); one the server does not have is left out and logged."""
    if error.code not in declared:
        logger.warning("tool %s: handler raised undeclared error code %s", tool, error.code)
    actions: list[str] = []
    for name in error.suggest:
        wire = name if tool_names is None else tool_names.get(name)
        if wire is None:
            logger.warning("tool %s: its error suggests a tool the server does not have; left out", tool)
        elif wire not in actions:
            actions.append(wire)
    text = (
        f'<tool_error tool="{escape_attribute(tool)}" code="{error.code}" severity="error">'
        f"<message>{escape_text(error.message)}</message>"
        f"<recovery>{escape_text(error.recovery or DEFAULT_RECOVERY)}</recovery>"
    )
    if actions:
        text += "<available_actions>" + "".join(f"<action>{escape_text(a)}</action>" for a in actions)
        text += "</available_actions>"
    if error.retry_after is not None:
        seconds = math.ceil(error.retry_after)
        text += f'<details><detail key="retry_after">{seconds}</detail></details>'
    return error_result(text + "</tool_error>")


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


# --- presenters ---------------------------------------------------------------------------------------


class MaskError(OutputError):
    """Data on a redaction path is not the container the schema promises: nothing may be sent."""

    def __init__(self, path: str) -> None:
        super().__init__("result", path, "a shape that can be redacted")


def expect_dict(value: object, path: str) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise MaskError(path)


def expect_list(value: object, path: str) -> list[Any]:
    if type(value) is list:
        return value
    raise MaskError(path)


class Block(NamedTuple):
    """One UI block of a result. A named tuple: as immutable as a frozen dataclass, built in half the time (one
    or more every call)."""

    type: str
    text: str
    for_user: bool  # audience = "user": annotated for the human, not the model


class Notes:
    """What a presenter adds to a result besides its data, collected while the data is unredacted.

    Rules are kept in three groups so the result lists field descriptions first, then static rules,
    then conditional ones, whatever order embedded presenters and collection items add them in.
    """

    __slots__ = ("blocks", "conditional", "descriptions", "rules", "suggestions")

    def __init__(self) -> None:
        self.descriptions: list[str] = []
        self.rules: list[str] = []
        self.conditional: list[str] = []
        self.blocks: list[Block] = []
        self.suggestions: list[tuple[str, str]] = []  # (tool's wire name, reason)


# Every character that ends a line for Markdown (\r\n, \r, \n) or for str.splitlines (\v, \f, \x1c-\x1e,
# \x85, \u2028, \u2029): inside a table cell or a list entry, any of them could start a forged row or entry.
_LINE_BREAKS: Final = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BACKTICKS: Final = re.compile("`+")


def _one_line(value: str) -> str:
    return value if value.isprintable() else _LINE_BREAKS.sub(" ", value)  # every line break is unprintable


def _cell(value: str) -> str:
    if value.isprintable() and "|" not in value and "\\" not in value:  # the usual cell: nothing to escape
        return value  # (every character _LINE_BREAKS matches is unprintable)
    # Backslashes first: "\\|" would otherwise read as an escaped backslash and a cell-ending pipe.
    return _one_line(value.replace("\\", "\\\\").replace("|", "\\|"))


@functools.lru_cache(maxsize=256)
def _table_head(columns: tuple[str, ...]) -> str:
    """A table's header and separator lines: the columns are the spec's, the same every call."""
    return "| " + " | ".join(_cell(c) for c in columns) + " |\n|" + " --- |" * len(columns)


def table_text(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = [_table_head(columns)]
    lines += ["| " + " | ".join([_cell(c) for c in row]) + " |" for row in rows]
    return "\n".join(lines)


def list_text(entries: list[str]) -> str:
    """One `- entry` line per entry; a line break inside an entry becomes a space (it could start another)."""
    return "\n".join(f"- {_one_line(entry)}" for entry in entries if entry)


def json_text(value: object) -> str:
    # JSON text escapes line breaks inside strings, so no line of it can close the fence.
    return "```json\n" + dumps(value) + "\n```"


def fenced(language: str, text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so that nothing in it can close the fence."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def summary_text(text: str) -> str:
    return f"📊 **Summary**: {text}"


def truncation_notice(shown: int, left_out: int) -> str:
    """What a truncated collection says about itself, in its summary block and in its structured `notice`."""
    return f"Dataset truncated. {shown} shown, {left_out} hidden. Use filters to narrow results."


_FOR_USER: Final = types.Annotations(audience=["user"])

# --user-blocks / create_server(user_blocks=): what the spec says, or every presenter's user-only blocks
# sent, or none. "omit" is the spec's default: audience is only a hint, and clients such as langchain hand
# every block to the model.
USER_BLOCK_MODES: Final = ("spec", "send", "omit")


def sent_user_blocks(mode: str, spec: Mapping[str, bool]) -> frozenset[str]:
    """The presenters whose audience = "user" blocks this server sends, chosen once at start-up.

    `spec` maps each presenter that declares such blocks to its spec's user_blocks == "send". An omitted
    block is not computed at all: its presenter's name is not in the set its UI function checks.
    """
    if mode == "spec":
        return frozenset(name for name, send in spec.items() if send)
    if mode == "send":
        return frozenset(spec)
    if mode == "omit":
        return frozenset()
    raise ValueError(f"user_blocks must be one of {', '.join(USER_BLOCK_MODES)}, not {mode!r}")


def presented_result(data: dict[str, Any], notes: Notes, *, fixed_guidance: bool = False) -> types.CallToolResult:
    """One presented item: the envelope `{"data", "rules", "suggestions"}` as structuredContent, and its text form.

    `fixed_guidance`: every rule and suggestion the presenter can add is spec text, no template that reads data
    (the generator knows): then their text is built once per distinct set (`_fixed_guidance_text`)."""
    rules, suggestions = _guidance(notes)
    structured = {"data": data, "rules": rules, "suggestions": _suggestion_objects(suggestions)}
    return _result(dumps(data), structured, notes, rules, suggestions, fixed_guidance)


def presented_collection(
    items: list[dict[str, Any]], total: int, notes: Notes, *, fixed_guidance: bool = False
) -> types.CallToolResult:
    """A presented collection: the item envelope plus `total`, `shown`, `truncated` (and a `notice` when it is)."""
    rules, suggestions = _guidance(notes)
    shown = len(items)
    structured: dict[str, Any] = {"data": items, "total": total, "shown": shown, "truncated": total > shown}
    if total > shown:
        structured["notice"] = notice = truncation_notice(shown, total - shown)
        head = f"{dumps(items)}\n\n<truncation_notice>{notice}</truncation_notice>"
    else:
        head = dumps(items)
    structured["rules"] = rules
    structured["suggestions"] = _suggestion_objects(suggestions)
    return _result(head, structured, notes, rules, suggestions, fixed_guidance)


def _guidance(notes: Notes) -> tuple[list[str], list[tuple[str, str]]]:
    """The rules (field descriptions, then static, then conditional) and suggestions, each once, in order: new
    lists (the envelope's own), deduplicated only when there is more than one."""
    rules = notes.rules
    if notes.descriptions or notes.conditional:
        rules = [*notes.descriptions, *rules, *notes.conditional]
    if len(rules) > 1:
        rules = list(dict.fromkeys(rules))
    suggestions = notes.suggestions
    return [r for r in rules if r], list(dict.fromkeys(suggestions)) if len(suggestions) > 1 else suggestions[:]


def _suggestion_objects(suggestions: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"tool": tool, "reason": reason} for tool, reason in suggestions]


def _result(
    head: str,
    structured: dict[str, Any],
    notes: Notes,
    rules: list[str],
    suggestions: list[tuple[str, str]],
    fixed_guidance: bool,
) -> types.CallToolResult:
    """The wire format (docs/spec.md §9.1): structuredContent carries the data with the rules and suggestions
    beside it, so a client that hands the model only structuredContent still passes the guidance on. The first
    text block carries what the agent must perceive: `head` (the data as JSON, and a collection's truncation
    notice), then the domain rules, then the action suggestions, so a client that hands the model only the first
    block (smolagents) passes them on too; the UI blocks follow, one block each, user-only ones annotated."""
    # The models are built by their validating constructors: pydantic-core checks these few fields faster than
    # `model_construct` fills them in Python (measured: 1.5 vs 3-4 us a model), and it keeps the dicts and blocks
    # passed (no copy: structuredContent is `data`'s own envelope).
    if fixed_guidance:
        head += _fixed_guidance_text(tuple(rules), tuple(suggestions))
    elif rules or suggestions:
        head += _guidance_text(rules, suggestions)
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=head)]
    for block in notes.blocks:
        text = f'<ui_passthrough type="{block.type}">{escape_text(block.text)}</ui_passthrough>'
        if block.for_user:
            content.append(types.TextContent(type="text", text=text, annotations=_FOR_USER))
        else:
            content.append(types.TextContent(type="text", text=text))
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def _guidance_text(rules: Sequence[str], suggestions: Sequence[tuple[str, str]]) -> str:
    """`<domain_rules>` (if any rule), then `<action_suggestions>` (if any suggestion), each after a blank line:
    one `- ` line each. A rule or reason is one line whatever its template interpolated (a handler value,
    `{ctx.subject}`): a line break in it becomes a space, as in table cells and lists, so no value can add a rule
    or suggestion line of its own."""
    text = ""
    if rules:
        lines = "".join([f"- {_one_line(escape_text(rule))}\n" for rule in rules])
        text = f"\n\n<domain_rules>\n{lines}</domain_rules>"
    if suggestions:
        lines = "".join(
            [f"- {_one_line(escape_text(tool))}: {_one_line(escape_text(reason))}\n" for tool, reason in suggestions]
        )
        text += f"\n\n<action_suggestions>\n{lines}</action_suggestions>"
    return text


@functools.lru_cache(maxsize=256)
def _fixed_guidance_text(rules: tuple[str, ...], suggestions: tuple[tuple[str, str], ...]) -> str:
    """The guidance text of a presenter whose rules and suggestions are all spec text: the same few sets every
    call (the spec bounds them), so each set's text is built once and appended to every result that has that set.
    Only for spec text: text a template made from data is never kept past its call."""
    return _guidance_text(rules, suggestions)
