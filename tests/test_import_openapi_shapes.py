"""What large real documents need from `import openapi` (issue 26) and what an outsider attacked (issue 27):
form bodies, properties the spec cannot name as they are (`type`, `StartTime<`), unions, distinct input names
for Twilio's ranges, documents that are bombs, deep or contain themselves, path values that are dot segments,
and a first server that is the cloud metadata service.

Each is driven through the CLI, and the request-shaping ones through a built server whose generated httpx
handlers call a stub upstream on 127.0.0.1 (tests/support/openapi_upstream.py).
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fusiongen.api import validate
from tests.support.build import build, importable
from tests.support.openapi_upstream import serving
from tests.support.processes import run

pytestmark = pytest.mark.anyio
DIAGNOSTIC = re.compile(r"^[^:]+:\d+:\d+: (?P<sev>\w+)\[(?P<code>FG\d+)\]: (?P<msg>.*)$")

SHAPES = {
    "openapi": "3.0.3",
    "info": {"title": "Shapes", "version": "1"},
    "servers": [{"url": "https://api.example.com/v1"}],
    "paths": {
        "/incidents": {
            "post": {
                "operationId": "createIncident",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Incident"}}}},
                "responses": {"201": {"description": "made", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Incident"}}}}},
            },
            "get": {
                "operationId": "listIncidents",
                "parameters": [
                    {"name": "StartTime", "in": "query", "schema": {"type": "string"}},
                    {"name": "StartTime<", "in": "query", "schema": {"type": "string"}},
                    {"name": "StartTime>", "in": "query", "schema": {"type": "string"}},
                    {"name": "start_time_lt", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "ok", "content": {"application/json": {
                    "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Incident"}}}}}},
            },
        },
        "/accounts/{sid}/calls": {
            "post": {
                "operationId": "createCall",
                "parameters": [{"name": "sid", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
                    "type": "object", "required": ["To"],
                    "properties": {"To": {"type": "string"}, "Record": {"type": "boolean"},
                                   "Timeout": {"type": "integer"}, "StatusCallbackEvent": {
                                       "type": "array", "items": {"type": "string"}}}}}}},
                "responses": {"201": {"description": "made", "content": {"application/json": {
                    "schema": {"type": "object", "properties": {"sid": {"type": "string"}}}}}}},
            }
        },
        "/users/{uid}/keys": {
            "delete": {
                "operationId": "deleteUserKeys",
                "parameters": [{"name": "uid", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"204": {"description": "gone"}},
            }
        },
    },
    "components": {"schemas": {
        "Incident": {
            "type": "object",
            "required": ["type", "title"],
            "properties": {
                "type": {"type": "string", "enum": ["incident"]},
                "type_": {"type": "string", "description": "a property already named type_"},
                "title": {"type": "string"},
                "service": {"$ref": "#/components/schemas/Reference"},
                "content": {"oneOf": [{"type": "string"}, {"$ref": "#/components/schemas/Reference"}]},
                "id": {"type": "string", "readOnly": True},
            },
        },
        "Reference": {
            "type": "object",
            "required": ["id", "type"],
            "properties": {"id": {"type": "string"}, "type": {"type": "string"}, "class": {"type": "string"}},
        },
    }},
}  # fmt: skip


def _import(tmp_path: Path, document: dict[str, Any] | str, *args: str, name: str = "api.json") -> Any:
    text = document if isinstance(document, str) else json.dumps(document, indent=2)
    (tmp_path / name).write_text(text, encoding="utf-8")
    return run("import", "openapi", name, "-o", "spec.toml", *args, cwd=tmp_path)


def _codes(stderr: str) -> list[str]:
    return [m["code"] for line in stderr.splitlines() if (m := DIAGNOSTIC.match(line))]


def test_renamed_properties_form_bodies_unions_and_range_parameters_import(tmp_path: Path) -> None:
    result = _import(tmp_path, SHAPES)
    assert result.code == 0, result.stderr
    assert not {"FG304", "FG306", "FG313"} & set(_codes(result.stderr)), result.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    incident = {f.name: f for f in ir.model("Incident").fields}
    # `type` is reserved: renamed, never onto the name another property already has
    assert list(incident) == ["type_2", "type_", "title", "service", "content", "id"]
    assert incident["type_2"].required and incident["content"].type.kind == "json"
    assert [f.name for f in ir.model("Reference").fields] == ["id", "type_", "class_"]
    tools = {t.name: t for t in ir.tools}
    assert [f.name for f in tools["list_incidents"].inputs] == ["start_time", "start_time_lt", "start_time_gt",
                                                                "header_start_time_lt"]  # fmt: skip
    assert "create_call" in tools  # the form body is imported
    assert [f.name for f in tools["create_call"].inputs] == ["sid", "To", "Record", "Timeout", "StatusCallbackEvent"]
    text = (tmp_path / "spec.toml").read_text(encoding="utf-8")
    assert "# 'type' upstream (not a usable field name); the httpx handlers rename it" in text


def _served(tmp_path: Path, document: dict[str, Any]) -> Any:
    result = _import(tmp_path, document, "--handlers", "http")
    assert result.code == 0, result.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    build(tmp_path / "spec.toml", tmp_path / "out")
    return ir


async def _call(tmp_path: Path, ir: Any, monkeypatch: pytest.MonkeyPatch, tool: str, arguments: Any) -> Any:
    with (
        serving(tmp_path / "api.json", "/v1") as upstream,
        importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)),
    ):
        monkeypatch.setenv("SHAPES_BASE_URL", upstream.base_url)
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            wire = package.TOOL_NAMES[tool] if hasattr(package, "TOOL_NAMES") else tool
            result = await client.call_tool(wire, arguments)
    return result, upstream.requests


async def test_renamed_fields_go_up_and_come_back_under_their_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ir = _served(tmp_path, SHAPES)
    arguments = {
        "type_2": "incident",
        "type_": "mine",
        "title": "Disk full",
        "service": {"id": "S1", "type_": "service_reference", "class_": "db"},
        "content": {"any": ["json", 1]},
    }
    result, requests = await _call(tmp_path, ir, monkeypatch, "create_incident", arguments)
    assert not result.is_error, result.content
    (seen,) = requests
    assert seen.body == {
        "type": "incident",
        "type_": "mine",
        "title": "Disk full",
        "service": {"id": "S1", "type": "service_reference", "class": "db"},
        "content": {"any": ["json", 1]},  # a json field is sent as given: nothing inside it is renamed
    }
    data = result.structured_content["data"]
    # the stub answers with the schema's sample: upstream `type` is read back as the spec's `type_2`
    assert data["type_2"] == "incident" and data["service"]["type_"] == "text" and "type" not in data


async def test_a_form_body_is_sent_as_form_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ir = _served(tmp_path, SHAPES)
    arguments = {"sid": "AC1", "To": "+15550100", "Record": True, "Timeout": 30, "StatusCallbackEvent": ["ringing"]}
    result, requests = await _call(tmp_path, ir, monkeypatch, "create_call", arguments)
    assert not result.is_error, result.content
    (seen,) = requests
    assert seen.path == "/accounts/AC1/calls"
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert seen.body == {"To": "+15550100", "Record": "true", "Timeout": "30", "StatusCallbackEvent": "ringing"}


@pytest.mark.parametrize("value", ["..", ".", ""])
async def test_a_dot_segment_path_value_is_refused_before_the_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """`DELETE /users/{uid}/keys` with `uid=".."` went upstream as `DELETE /keys` (httpx normalises dot
    segments): now INVALID_REQUEST, and nothing is sent."""
    ir = _served(tmp_path, SHAPES)
    result, requests = await _call(tmp_path, ir, monkeypatch, "delete_user_keys", {"uid": value})
    assert result.is_error and 'code="INVALID_REQUEST"' in result.content[0].text
    assert requests == []
    ok, sent = await _call(tmp_path, ir, monkeypatch, "delete_user_keys", {"uid": "..a"})
    assert not ok.is_error and [s.path for s in sent] == ["/users/..a/keys"]


@pytest.mark.parametrize(
    "server",
    ["http://169.254.169.254/latest", "http://[fe80::1]/", "http://metadata.google.internal/", "http://0.0.0.0/"],
)
async def test_a_metadata_first_server_is_reported_and_never_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    document = {**SHAPES, "servers": [{"url": server}]}
    ir = _served(tmp_path, document)
    handlers_text = (tmp_path / f"{ir.handlers_module}.py").read_text(encoding="utf-8")
    assert 'DEFAULT_BASE_URL = ""' in handlers_text and server not in handlers_text.split('"""', 2)[2]
    result = _import(tmp_path, document)  # a re-import reports it again
    assert "FG338" in _codes(result.stderr)
    with importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)):
        monkeypatch.delenv("SHAPES_BASE_URL", raising=False)
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            refused = await client.call_tool("delete_user_keys", {"uid": "u1"})
    assert refused.is_error and "SHAPES_BASE_URL" in refused.content[0].text


# The 506-byte "billion laughs" shape: nine levels of nine aliases, 387 million values when expanded.
BOMB = "".join(
    [
        "openapi: 3.0.0\ninfo: {title: bomb, version: '1'}\n",
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
        *(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        "paths: {/x: {get: {responses: {'200': {description: ok, content: {application/json: {schema: ",
        "{type: object, properties: {v: {type: string}}, example: *i}}}}}}}}\n",
    ]
)


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("bomb.yaml", BOMB, "its aliases expand it past 2,000,000 values"),
        ("self.yaml", "openapi: 3.0.0\ninfo: &x {title: t, version: '1', self: *x}\npaths: {}\n", "contains itself"),
        ("deep.json", '{"openapi": "3.0.0", "x": ' + "[" * 5000 + "]" * 5000 + "}", "more than 128 levels deep"),
        ("deep.yaml", "openapi: 3.0.0\nx: " + "[" * 900 + "]" * 900 + "\n", "more than 128 levels deep"),
    ],
)
def test_a_bomb_a_deep_or_a_recursive_document_is_fg300(tmp_path: Path, name: str, text: str, why: str) -> None:
    """The 506-byte alias bomb hung the import (positions re-walked every alias); deep and self-containing
    documents ended in "internal error" (exit 3)."""
    result = _import(tmp_path, text, name=name)
    assert result.code == 2, result.stderr
    assert _codes(result.stderr) == ["FG300"] and why in result.stderr
    assert not (tmp_path / "spec.toml").exists()


# --- choosing operations and reading the report ----------------------------------------------------------

PETSTORE = Path(__file__).parent / "fixtures" / "openapi" / "swagger-petstore-v3.yaml"


def _tools_of(spec: Path) -> set[str]:
    return {t.name for t in validate(spec)[1].tools}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (("--methods", "get"), {"find_pets_by_status", "find_pets_by_tags", "get_pet_by_id", "get_inventory",
                                "get_order_by_id", "login_user", "logout_user", "get_user_by_name"}),
        (("--exclude-methods", "get,put,post"), {"delete_pet", "delete_order", "delete_user"}),
        (("--paths", "/store/*", "--exclude-paths", "/store/order/*"), {"get_inventory", "place_order"}),
        (("--tags", "pet", "--exclude-ops", "^(find|update)", "--exclude-methods", "delete"),
         {"add_pet", "get_pet_by_id"}),  # uploadFile (octet-stream) is FG313 either way
        (("--exclude-tags", "pet,store"), {"create_user", "create_users_with_list_input", "login_user",
                                           "logout_user", "get_user_by_name", "update_user", "delete_user"}),
    ],
)  # fmt: skip
def test_operations_are_included_and_excluded_by_tag_path_method_and_id(
    tmp_path: Path, options: tuple[str, ...], expected: set[str]
) -> None:
    result = run("import", "openapi", PETSTORE, "-o", "spec.toml", *options, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert _tools_of(tmp_path / "spec.toml") == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--exclude-ops", "("), "--exclude-ops is not a regular expression"),
        (("--methods", "get,fetch"), "not an HTTP method: fetch"),
    ],
)
def test_a_bad_filter_is_fg331_and_writes_nothing(tmp_path: Path, options: tuple[str, ...], message: str) -> None:
    result = run("import", "openapi", PETSTORE, "-o", "spec.toml", *options, cwd=tmp_path)
    assert result.code == 2 and "FG331" in result.stderr and message in result.stderr
    assert not (tmp_path / "spec.toml").exists()


def test_warnings_are_summarised_by_code_and_listed_with_verbose(tmp_path: Path) -> None:
    properties = {f"mail{index}": {"type": "string", "format": "email"} for index in range(5)}
    document = {**SHAPES, "components": {"schemas": {**SHAPES["components"]["schemas"], "Mails": {
        "type": "object", "properties": properties}}}}  # fmt: skip
    quiet = _import(tmp_path, document)
    assert quiet.code == 0, quiet.stderr
    assert _codes(quiet.stderr) == ["FG335"] * 3
    assert "warnings by code:\n  FG335: 5 (2 not shown: --verbose)\n" in quiet.stderr
    loud = run("import", "openapi", "api.json", "-o", "spec.toml", "--verbose", cwd=tmp_path)
    assert _codes(loud.stderr) == ["FG335"] * 5 and "  FG335: 5\n" in loud.stderr


async def test_compact_keeps_the_listing_small_and_the_results_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--compact`: summaries, error codes without the generic meanings, `output_schemas = "none"`; a call
    still returns the presented envelope, renamed fields read back."""
    document = {**SHAPES, "paths": {**SHAPES["paths"]}}
    document["paths"]["/incidents"] = {
        **SHAPES["paths"]["/incidents"],
        "post": {**SHAPES["paths"]["/incidents"]["post"], "summary": "Create an incident",
                 "description": "Create an incident.\n\nA long text a model need not read on every listing."},
    }  # fmt: skip
    result = _import(tmp_path, document, "--handlers", "http", "--compact")
    assert result.code == 0, result.stderr
    assert 'output_schemas = "none"' in (tmp_path / "spec.toml").read_text(encoding="utf-8")
    _, ir, _ = validate(tmp_path / "spec.toml")
    build(tmp_path / "spec.toml", tmp_path / "out")
    with (
        serving(tmp_path / "api.json", "/v1") as upstream,
        importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)),
    ):
        monkeypatch.setenv("SHAPES_BASE_URL", upstream.base_url)
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            called = await client.call_tool("create_incident", {"type_2": "incident", "title": "t"})
    tool = listed["create_incident"]
    assert tool.output_schema is None and all(t.output_schema is None for t in listed.values())
    assert tool.description == (
        "Create an incident\n\nErrors it may return (tool_error codes):"
        "\n- NOT_FOUND\n- CONFLICT\n- INVALID_REQUEST\n- RATE_LIMITED\n- UNAVAILABLE"
    )
    assert not called.is_error and called.structured_content["data"]["type_2"] == "incident"


def _first_without_renames() -> dict[str, Any]:
    """SHAPES with only the operation that carries no renamed field, and no components: `SHAPES = {}`."""
    return {**SHAPES, "paths": {"/users/{uid}/keys": SHAPES["paths"]["/users/{uid}/keys"]}, "components": {}}


async def test_a_reimport_appends_the_renames_new_operations_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _import(tmp_path, _first_without_renames(), "--handlers", "http")
    assert first.code == 0, first.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    module = tmp_path / f"{ir.handlers_module}.py"
    assert "SHAPES: dict[str, dict[str, tuple[str, str | None]]] = {}" in module.read_text(encoding="utf-8")
    ir = _served(tmp_path, SHAPES)  # the re-import: appends SHAPES.update(...) and the new functions
    text = module.read_text(encoding="utf-8")
    assert text.count("SHAPES.update(") == 1 and text.index("SHAPES.update(") < text.index("def create_incident")
    result, requests = await _call(
        tmp_path, ir, monkeypatch, "create_incident", {"type_2": "incident", "title": "t", "type_": "x"}
    )
    assert not result.is_error, result.content
    assert requests[0].body == {"type": "incident", "title": "t", "type_": "x"}


def test_a_handler_module_without_shapes_is_not_extended_with_renaming_functions(tmp_path: Path) -> None:
    first = _import(tmp_path, _first_without_renames(), "--handlers", "http")
    assert first.code == 0, first.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    module = tmp_path / f"{ir.handlers_module}.py"
    edited = module.read_text(encoding="utf-8").replace("SHAPES: dict[str, dict[str, tuple[str, str | None]]] = {}", "")
    module.write_text(edited, encoding="utf-8")
    again = _import(tmp_path, SHAPES, "--handlers", "http")
    assert again.code == 0, again.stderr
    assert "FG337" in _codes(again.stderr) and "it has no `SHAPES` table" in again.stderr
    assert module.read_text(encoding="utf-8") == edited
