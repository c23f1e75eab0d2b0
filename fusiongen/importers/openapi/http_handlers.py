"""`--handlers http`: the handler module that calls the upstream API with httpx, one function per tool.

The module is the user's, like every handler module: written once, then only extended. A later import
reads it with libcst (never by importing it: that would run the user's code), as `build` does for its stubs
(fusiongen/scaffold/handlers.py), and appends a function for each new operation after its last byte, so the
user's edits to the shared helpers or to any function stay. A module that no longer parses, or no longer
defines the `call` helper the functions use, is not extended (FG337): the spec is written, the handlers are
the user's to add.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst

from fusiongen.diagnostics import Diagnostic, Position, Severity
from fusiongen.importers.openapi.mapping import Imported, Tool
from fusiongen.pyliteral import docstring_text, py_literal, py_string

ENV_PREFIX = re.compile(r"[^A-Z0-9]+")


def env_prefix(server_name: str) -> str:
    return ENV_PREFIX.sub("_", server_name.upper()).strip("_")


Shapes = dict[str, dict[str, tuple[str, str | None]]]


def shapes_of(imported: Imported) -> Shapes:
    """For each model a renamed field is in or under: its fields that are renamed, or hold such a model, as
    spec name → (upstream name, the model it holds). What the handlers rename, both ways; empty for most APIs."""
    shapes: Shapes = {}
    changed = True
    while changed:  # to a fixed point: a model holding a model that needs renaming needs it too
        changed = False
        for model in imported.models.values():
            entry = shapes.get(model.name, {})
            for item in model.fields:
                held = item.items if item.type == "list" else item.type
                nested = held if held in shapes else None
                if (item.wire is not None or nested is not None) and item.name not in entry:
                    entry[item.name] = (item.wire or item.name, nested)
                    changed = True
                elif item.name in entry and entry[item.name][1] != nested:
                    entry[item.name] = (entry[item.name][0], nested)
                    changed = True
            if entry:
                shapes[model.name] = entry
    return dict(sorted(shapes.items()))


def _shape(name: str | None, shapes: Shapes) -> str | None:
    return name.removesuffix("[]") if name is not None and name.removesuffix("[]") in shapes else None


def _shapes_used(tool: Tool, shapes: Shapes) -> tuple[str | None, str | None]:
    """The models whose renamed fields the tool's body and answer carry (None: nothing renamed)."""
    return _shape(tool.input_from.split(".")[0] if tool.input_from else None, shapes), _shape(tool.returns, shapes)


def tool_function(tool: Tool, handler: str, shapes: Shapes) -> str:
    by_where: dict[str, dict[str, str]] = {"path": {}, "query": {}, "header": {}}
    body: list[str] = []
    for param in tool.params:
        if param.where == "body":
            body.append(param.arg)
        else:
            by_where[param.where][param.wire] = param.arg
    summary = f"{tool.method.upper()} {tool.path}" + (
        f": {tool.description.splitlines()[0]}" if tool.description else ""
    )
    arguments = [py_string(tool.method.upper()), py_string(tool.path), "args"]
    for where, mapping in by_where.items():
        if mapping:
            arguments.append(f"{where}={py_literal(mapping)}")
    if body:
        arguments.append(f"body={py_literal(body)}")
    if tool.whole_body:
        arguments.append(f"whole_body={py_string(tool.whole_body)}")
    if tool.form:
        arguments.append("form=True")
    body_shape, result_shape = _shapes_used(tool, shapes)
    if body_shape is not None:
        arguments.append(f"body_shape={py_string(body_shape)}")
    if result_shape is not None:
        arguments.append(f"result_shape={py_string(result_shape)}")
    call = f"    return await call({', '.join(arguments)})"
    if len(call) > 110:
        call = "    return await call(\n" + "".join(f"        {a},\n" for a in arguments) + "    )"
    return f'\n\nasync def {handler}(args: Any) -> Any:\n    """{docstring_text(summary)}"""\n{call}\n'


def module_text(imported: Imported, package: str, server_name: str, handlers: dict[str, str]) -> str:
    prefix = env_prefix(server_name)
    base = "" if imported.unsafe_server else imported.servers[0] if imported.servers else "http://127.0.0.1:8000"
    shapes = shapes_of(imported)
    head = _HEAD.format(
        title=docstring_text(imported.title),
        prefix=prefix,
        base=docstring_text(base),
        base_literal=py_string(base),
        package=package,
        security=docstring_text(", ".join(imported.security) or "none declared"),
        shapes=_shapes_literal(shapes),
    )
    return head + "".join(tool_function(tool, handlers[tool.name], shapes) for tool in imported.tools.values())


def _shapes_literal(shapes: Shapes) -> str:
    return py_literal(shapes)


@dataclass(frozen=True)
class Extension:
    """What a re-import does to an existing handler module: its new text (None: unchanged) and why."""

    text: str | None
    added: list[str]
    problem: Diagnostic | None = None


HELPERS = ("call", "Any")  # what an appended function uses from the module (and SHAPES, if it renames)


def append_functions(
    source: str, defined: frozenset[str] | Diagnostic, imported: Imported, handlers: dict[str, str], handler_file: str
) -> Extension:
    """`source` with a function appended for each tool it has none for, checked with libcst. `defined`: the
    names the module binds at top level, as `build` reads them, or why it cannot be read (FG403)."""
    if isinstance(defined, Diagnostic):
        why = f"it does not parse ({defined.message.removeprefix('handler module does not parse: ')})"
        return Extension(None, [], _cannot_extend(why, handler_file, defined.position))
    new = [tool for tool in imported.tools.values() if handlers[tool.name] not in defined]
    if not new:
        return Extension(None, [])
    missing = [name for name in HELPERS if name not in defined]
    if missing:
        names = " and ".join(f"`{name}`" for name in missing)
        return Extension(None, [], _cannot_extend(f"it no longer defines {names}", handler_file, Position(1, 1)))
    shapes = shapes_of(imported)
    used = [shape for tool in new for shape in _shapes_used(tool, shapes) if shape is not None]
    block = "".join(tool_function(tool, handlers[tool.name], shapes) for tool in new)
    if used:
        if "SHAPES" not in defined:
            why = "it has no `SHAPES` table, and new operations have renamed fields"
            return Extension(None, [], _cannot_extend(why, handler_file, Position(1, 1)))
        block = f"\n\nSHAPES.update({_shapes_literal(shapes)})\n" + block  # the whole table: it is small
    text = (source if source.endswith("\n") or not source else source + "\n") + block
    libcst.parse_module(text)  # the module with the functions is still Python
    return Extension(text, [handlers[t.name] for t in new])


def _cannot_extend(why: str, handler_file: str, position: Position) -> Diagnostic:
    return Diagnostic(
        "FG337",
        f"the handler module is not extended: {why}; new operations have no httpx handler",
        handler_file,
        position,
        Severity.WARNING,
        "fix it and import again, or write the handlers yourself (`fusiongen build` appends stubs)",
    )


_HEAD = '''"""Handlers that call {title} over HTTP: one async function per tool, on one shared httpx client.

Written by `fusiongen import openapi --handlers http`, and yours from now on: a later import only appends
functions for new operations. Configure it with environment variables:

- `{prefix}_BASE_URL`: the upstream's base URL (default: {base}; with none, every call is refused).
- `{prefix}_AUTH_HEADER`: one header sent with every request, as `Name: value`
  (e.g. `Authorization: Bearer ...` or `api_key: ...`); none when unset. The document declares: {security}.
- `{prefix}_TIMEOUT`: seconds to wait for the upstream (default 10; connecting: at most 5).

Upstream answers become tool results: 2xx → the JSON body; 404 → NOT_FOUND; 409 → CONFLICT; 400 and 422 →
INVALID_REQUEST with the upstream's own message; 429 and 503 → RATE_LIMITED / UNAVAILABLE with `retry_after`
from `Retry-After`; an unreachable upstream → UNAVAILABLE; anything else → INTERNAL_ERROR (an exception: its
text, which names only the status, is not sent to the agent, and the upstream's body is never read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import email.utils
import enum
import json
import os
import uuid
from typing import Any
from urllib.parse import quote

import httpx

from {package} import ToolError

BASE_URL_VARIABLE = "{prefix}_BASE_URL"
AUTH_HEADER_VARIABLE = "{prefix}_AUTH_HEADER"
TIMEOUT_VARIABLE = "{prefix}_TIMEOUT"
DEFAULT_BASE_URL = {base_literal}
MESSAGE_LIMIT = 500  # characters of an upstream's 400/422 message passed on
DOT_SEGMENTS = frozenset({{"", ".", ".."}})  # path values that would not stay one segment of the path

# Fields the spec names otherwise than the upstream (`type` → `type_`), by model: spec name → (upstream name,
# the model the field holds). Requests send them under the upstream's names, answers are read back to the spec's.
SHAPES: dict[str, dict[str, tuple[str, str | None]]] = {shapes}

_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {{}}


class UpstreamError(Exception):
    """An upstream answer with no better mapping: the server reports INTERNAL_ERROR and logs only the type."""


def client() -> httpx.AsyncClient:
    """The one client of this event loop (a client cannot outlive the loop its connections belong to)."""
    loop = asyncio.get_running_loop()
    existing = _clients.get(loop)
    if existing is None or existing.is_closed:
        for stale in [other for other in _clients if other.is_closed()]:
            del _clients[stale]
        headers = {{}}
        auth = os.environ.get(AUTH_HEADER_VARIABLE, "")
        if auth:
            name, _, value = auth.partition(":")
            headers[name.strip()] = value.strip()
        timeout = float(os.environ.get(TIMEOUT_VARIABLE) or 10)
        base_url = os.environ.get(BASE_URL_VARIABLE) or DEFAULT_BASE_URL
        if not base_url:
            raise ToolError("UNAVAILABLE", f"the upstream's address is not configured: set {{BASE_URL_VARIABLE}}.")
        existing = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        )
        _clients[loop] = existing
    return existing


def wire(value: Any) -> Any:
    """An argument as JSON: dates and UUIDs as text, nested inputs as objects of the fields sent."""
    if isinstance(value, datetime.date | datetime.datetime | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        sent = getattr(value, "fields_set", None)
        return {{
            f.name: wire(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name != "fields_set" and (sent is None or f.name in sent)
        }}
    if isinstance(value, list | tuple):
        return [wire(item) for item in value]
    if isinstance(value, dict):
        return {{str(k): wire(v) for k, v in value.items()}}
    return value


def renamed(value: Any, shape: str | None, *, outgoing: bool) -> Any:
    """`value` (JSON) with the fields of model `shape` and of the models under it named as the upstream
    names them (`outgoing`) or as the spec does (an answer)."""
    if shape is None:
        return value
    if isinstance(value, list):
        return [renamed(item, shape, outgoing=outgoing) for item in value]
    if not isinstance(value, dict):
        return value
    fields = SHAPES.get(shape, {{}})
    if not outgoing:
        fields = {{upstream: (name, held) for name, (upstream, held) in fields.items()}}
    out: dict[str, Any] = {{}}
    for key, item in value.items():
        name, held = fields.get(key, (key, None))
        out[name] = renamed(item, held, outgoing=outgoing)
    return out


def form_value(value: Any) -> Any:
    """A form field: scalars as httpx writes them, objects and lists of objects as JSON text."""
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict | list) for v in value)):
        return json.dumps(value, separators=(",", ":"))
    return value


def upstream_message(response: httpx.Response) -> str:
    """The upstream's own explanation of a 400/422: a JSON `detail`/`message`/`title`/`error`, or its text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:MESSAGE_LIMIT]
    if isinstance(body, dict):
        for key in ("detail", "message", "title", "error"):
            found = body.get(key)
            if isinstance(found, dict):
                found = found.get("message")
            if isinstance(found, str) and found.strip():
                return found.strip()[:MESSAGE_LIMIT]
    return str(body)[:MESSAGE_LIMIT]


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from `Retry-After` (a number or an HTTP date); None when absent or unreadable."""
    header = response.headers.get("retry-after", "").strip()
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def error_for(response: httpx.Response, request: str) -> Exception:
    """The exception a non-2xx upstream answer becomes (see the module docstring)."""
    status = response.status_code
    if status == 404:
        return ToolError("NOT_FOUND", f"{{request}}: not found.", recovery="Check the identifiers you passed.")
    if status == 409:
        return ToolError("CONFLICT", f"{{request}}: conflicts with the current state.", recovery="Read it again first.")
    if status in (400, 422):
        message = upstream_message(response) or f"the upstream rejected the request ({{status}})"
        return ToolError("INVALID_REQUEST", message, recovery="Fix the arguments and call again.")
    if status in (429, 503):
        code = "RATE_LIMITED" if status == 429 else "UNAVAILABLE"
        return ToolError(code, f"{{request}}: the upstream asks to retry later.", retry_after=retry_after(response))
    return UpstreamError(f"{{request}}: upstream answered {{status}}")


async def call(
    method: str,
    template: str,
    args: Any,
    *,
    path: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    header: dict[str, str] | None = None,
    body: list[str] | None = None,
    whole_body: str | None = None,
    form: bool = False,
    body_shape: str | None = None,
    result_shape: str | None = None,
) -> Any:
    """Send one request built from `args` (each mapping is wire name → argument) and return its JSON.
    `form`: the body as application/x-www-form-urlencoded; `body_shape` / `result_shape`: the model whose
    renamed fields (SHAPES) the body and the answer carry."""
    sent: frozenset[str] = getattr(args, "fields_set", frozenset())
    url = template
    for wire_name, arg in (path or {{}}).items():
        segment = quote(str(wire(getattr(args, arg))), safe="")
        if segment in DOT_SEGMENTS:  # the URL would be normalised to another path: `/users/../keys` is `/keys`
            raise ToolError("INVALID_REQUEST", f"{{arg}} cannot be {{segment!r}}.", recovery="Pass an identifier.")
        url = url.replace("{{" + wire_name + "}}", segment)
    params = {{w: wire(getattr(args, a)) for w, a in (query or {{}}).items() if getattr(args, a) is not None}}
    headers = {{w: str(wire(getattr(args, a))) for w, a in (header or {{}}).items() if getattr(args, a) is not None}}
    content: Any = None
    if whole_body is not None:
        content = wire(getattr(args, whole_body))
    elif body is not None:
        fields = {{name: wire(getattr(args, name)) for name in body if name in sent}}
        content = renamed(fields, body_shape, outgoing=True)
    request = f"{{method}} {{url}}"
    sending: dict[str, Any] = {{"json": content}} if content is not None else {{}}
    if form and isinstance(content, dict):
        sending = {{"data": {{k: form_value(v) for k, v in content.items() if v is not None}}}}
    try:
        response = await client().request(method, url.lstrip("/"), params=params, headers=headers, **sending)
    except httpx.TransportError:
        raise ToolError("UNAVAILABLE", f"{{request}}: the upstream API cannot be reached.") from None
    if not response.is_success:
        raise error_for(response, request)
    if not response.content or "json" not in response.headers.get("content-type", ""):
        return None
    return renamed(response.json(), result_shape, outgoing=False)
'''
