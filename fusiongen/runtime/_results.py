"""What a tool call answers: result builders and the errors a model can act on, and the domain errors a
handler raises (`ToolError`). The call path (`_runtime.py`) and the workflow gate build their answers here.

Errors fail closed: they name declared fields, expected types and the tool, never a value a handler returned,
so nothing hidden can leak through one.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from ._values import FieldError, OutputError

try:
    import orjson
except ImportError:  # orjson is optional: the standard library gives the same text, slower
    orjson = None  # type: ignore[assignment]


logger = logging.getLogger(__name__.rpartition(".")[0])


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
