"""A stub of the API an OpenAPI document describes, served on 127.0.0.1 for the `--handlers http` tests.

Bodies come from the document itself: a media type's named `examples` or `example`, else the schema's
`example`, else a value built from the schema (types, formats, enums, `allOf`). A test can make the next
answer to an operation something else (`answer(...)`: a status, headers, a body) to drive the error mappings,
and reads back what the handlers sent (`requests`; a form body as a dict of its fields).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

SAMPLES = {"date": "2026-01-31", "date-time": "2026-01-31T10:00:00Z", "uuid": "3be6453c-03eb-4357-ae5a-984a0e574a54"}


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class Upstream:
    document: dict[str, Any]
    base_path: str
    port: int = 0
    scripted: dict[tuple[str, str], tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def answer(self, method: str, template: str, status: int, body: Any = None, **headers: str) -> None:
        """The next request for (method, path template) gets this answer instead of the document's."""
        raw = b"" if body is None else json.dumps(body).encode()
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        self.scripted[(method.upper(), template)] = (status, headers, raw)

    def resolve(self, node: Any) -> Any:
        while isinstance(node, Mapping) and "$ref" in node:
            target: Any = self.document
            for token in node["$ref"][2:].split("/"):
                target = target[token.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def sample(self, schema: Any, depth: int = 0) -> Any:
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping) or depth > 6:
            return None
        if "example" in schema:
            return schema["example"]
        if "enum" in schema:
            return schema["enum"][0]
        for union in ("oneOf", "anyOf"):
            if schema.get(union):
                return self.sample(schema[union][0], depth + 1)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                value = self.sample(part, depth + 1)
                merged |= value if isinstance(value, dict) else {}
            return merged
        kind = schema.get("type")
        kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
        if kind == "object" or "properties" in schema:
            return {name: self.sample(prop, depth + 1) for name, prop in (schema.get("properties") or {}).items()}
        if kind == "array":
            return [self.sample(schema.get("items"), depth + 1)]
        if kind == "integer":
            return 1
        if kind == "number":
            return 1.5
        if kind == "boolean":
            return True
        return SAMPLES.get(str(schema.get("format")), "text")

    def body_for(self, operation: Mapping[str, Any]) -> tuple[int, bytes]:
        for status, response in (operation.get("responses") or {}).items():
            if not str(status).startswith("2"):
                continue
            content = self.resolve(response).get("content") or {}
            media = content.get("application/json")
            if media is None:
                return int(status), b""
            examples = media.get("examples") or {}
            if examples:
                value = self.resolve(next(iter(examples.values()))).get("value")
            elif "example" in media:
                value = media["example"]
            else:
                value = self.sample(media.get("schema"))
            return int(status), json.dumps(value).encode()
        return 200, b""

    def route(self, method: str, path: str) -> tuple[str, Mapping[str, Any]] | None:
        for template, item in (self.document.get("paths") or {}).items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            operation = self.resolve(item).get(method.lower())
            if operation is not None and re.match(pattern, path):
                return template, operation
        return None


def read_document(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return data


@contextmanager
def serving(document: Path, base_path: str = "") -> Iterator[Upstream]:
    """The stub, listening on an ephemeral port for the block."""
    upstream = Upstream(read_document(document), base_path)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def handle_any(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = url.path.removeprefix(upstream.base_path)
            body: Any = None
            if raw and "x-www-form-urlencoded" in (self.headers.get("Content-Type") or ""):
                body = dict(parse_qsl(raw.decode(), keep_blank_values=True))  # a form: field → its (last) value
            elif raw:
                body = json.loads(raw)
            upstream.requests.append(Seen(self.command, path, url.query, dict(self.headers), body))
            found = upstream.route(self.command, path)
            if found is None:
                self.reply(404, {}, b"")
                return
            template, operation = found
            scripted = upstream.scripted.pop((self.command, template), None)
            if scripted is not None:
                self.reply(*scripted)
                return
            status, body = upstream.body_for(operation)
            self.reply(status, {"Content-Type": "application/json"} if body else {}, body)

        def reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    upstream.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
