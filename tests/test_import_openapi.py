"""`fusiongen import openapi` on real documents nobody on this project wrote (byte-identical copies in
tests/fixtures/openapi, with their sources and licenses): each imports, validates, builds and serves; its httpx
handlers reach a stub of the upstream built from the document; a re-import after a changed document keeps the
user's edits.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from mcp import Client

from fusiongen.api import validate
from tests.support.build import ROOT, build, importable
from tests.support.openapi_upstream import serving
from tests.support.processes import run

# In the repository (see its README); FUSIONGEN_OPENAPI_DOCUMENTS points at another folder of the same documents.
SHARED = Path(os.environ.get("FUSIONGEN_OPENAPI_DOCUMENTS") or ROOT / "tests" / "fixtures" / "openapi")
DOCUMENTS = ("oai-petstore-expanded.json", "swagger-petstore-v3.yaml", "redocly-museum.yaml")
DIAGNOSTIC = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>\w+)\[(?P<code>FG\d+)\]: (?P<msg>.*)$")

# What each document has that the spec cannot say: (code, JSON pointer) of every warning, exactly.
UNSUPPORTED = {
    "oai-petstore-expanded.json": set(),
    "swagger-petstore-v3.yaml": {
        ("FG313", "#/paths/~1pet~1{petId}~1uploadImage/post/requestBody/content"),
        ("FG303", "#/paths/~1store~1inventory/get/responses/200/content/application~1json/schema"),
        ("FG314", "#/paths/~1store~1inventory/get/responses/200/content/application~1json/schema"),
        ("FG314", "#/paths/~1user~1login/get/responses/200/content/application~1json/schema"),
    },
    "redocly-museum.yaml": {
        ("FG314", "#/paths/~1tickets~1{ticketId}~1qr/get/responses/200/content"),
        ("FG320", "#/webhooks/publishNewEvent"),
        ("FG335", "#/components/schemas/Email/format"),  # format: email
        # `example: 18:00` unquoted: YAML 1.1 reads a base-60 integer (1080), which the string field refuses
        ("FG334", "#/components/schemas/MuseumDailyHours/properties/timeClose/example"),
    },
}
# One read-by-id call per document, through the httpx handlers: (tool, arguments, base path, upstream path).
READ_BY_ID = {
    "oai-petstore-expanded.json": ("find_pet_by_id", {"id": 7}, "", "/pets/7"),
    "swagger-petstore-v3.yaml": ("get_pet_by_id", {"pet_id": 10}, "/api/v3", "/pet/10"),
    "redocly-museum.yaml": (
        "get_special_event",
        {"event_id": "dad4bce8-f5cb-4078-a211-995864315e39"},
        "",
        "/special-events/dad4bce8-f5cb-4078-a211-995864315e39",
    ),
}

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", autouse=True)
def shared_documents() -> None:
    missing = [name for name in DOCUMENTS if not (SHARED / name).is_file()]
    if missing:
        pytest.fail(f"the OpenAPI documents are missing from {SHARED}: {', '.join(missing)}", pytrace=False)


def imported(tmp_path: Path, document: str, *args: str) -> tuple[Path, list[tuple[str, str]], str]:
    """Import `document` into tmp_path/spec.toml; returns the spec, its warnings as (code, pointer), stderr."""
    result = run("import", "openapi", SHARED / document, "-o", "spec.toml", *args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    warnings = [m for line in result.stderr.splitlines() if (m := DIAGNOSTIC.match(line))]
    assert all(m["sev"] == "warning" for m in warnings), result.stderr
    return tmp_path / "spec.toml", [(m["code"], m["msg"].split(": ", 1)[0]) for m in warnings], result.stderr


# --- every document: import, validate, build, list --------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS)
async def test_each_document_imports_validates_builds_and_lists_its_tools(tmp_path: Path, document: str) -> None:
    spec, warnings, _ = imported(tmp_path, document)
    assert set(warnings) == UNSUPPORTED[document]
    assert len(warnings) == len(UNSUPPORTED[document])  # one report per place, not one per mention
    first = spec.read_bytes()
    sibling = tmp_path.with_name(tmp_path.name + "-again")  # as deep: the same relative path to the document
    sibling.mkdir()
    again = run("import", "openapi", SHARED / document, "-o", "spec.toml", cwd=sibling)
    assert again.code == 0
    assert (sibling / "spec.toml").read_bytes() == first  # deterministic

    _, ir, spec_warnings = validate(spec)
    assert spec_warnings == []
    generation = build(spec, tmp_path / "out")
    with importable(tmp_path / "out", modules=(generation.ir.package,)):
        package = importlib.import_module(generation.ir.package)

        async with Client(package.create_server(_stub_handlers(ir)), mode="legacy", cache=None) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {tool.wire for tool in ir.tools}
    tool, _, _, _ = READ_BY_ID[document]
    assert listed[tool].annotations is not None and listed[tool].annotations.read_only_hint is True


def _stub_handlers(ir: Any) -> ModuleType:
    module = ModuleType("listing_only")
    for tool in ir.tools:
        setattr(module, tool.handler, lambda args: None)
    return module


def test_the_written_spec_carries_the_mapping_rules(tmp_path: Path) -> None:
    spec, _, _ = imported(tmp_path, "oai-petstore-expanded.json")
    text = spec.read_text(encoding="utf-8")
    _, ir, _ = validate(spec)
    tools = {tool.name: tool for tool in ir.tools}
    assert set(tools) == {"find_pets", "add_pet", "find_pet_by_id", "delete_pet"}  # "find pet by id" named
    assert (tools["find_pets"].kind, tools["delete_pet"].kind, tools["add_pet"].kind) == ("query", "mutation", "action")
    assert [f.name for f in tools["add_pet"].inputs] == ["name", "tag"]  # the body: input_from NewPet.create
    assert 'input_from = "NewPet.create"' in text
    assert [f.name for f in ir.model("Pet").fields] == ["name", "tag", "id"]  # allOf: NewPet + id
    assert tools["find_pets"].returns is not None and tools["find_pets"].returns.collection
    assert "# GET /pets/{id} · from #/paths/~1pets~1{id}/get" in text


def test_tags_and_include_ops_select_operations(tmp_path: Path) -> None:
    spec, _, _ = imported(
        tmp_path, "swagger-petstore-v3.yaml", "--tags", "store,user", "--include-ops", "^(get|delete)"
    )
    names = {tool.name for tool in validate(spec)[1].tools}
    assert names == {"get_inventory", "get_order_by_id", "delete_order", "get_user_by_name", "delete_user"}
    assert "# GET /store/inventory · tags: store" in spec.read_text(encoding="utf-8")


# --- what the import cannot say ------------------------------------------------------------------------

SYNTHETIC = {
    "openapi": "3.1.0",
    "info": {"title": "Synthetic", "version": "1"},
    "paths": {
        "/things/{id}": {"$ref": "#/components/pathItems/Thing"},
        "/search": {
            "get": {
                "operationId": "search",
                "parameters": [
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                    "oneOf": [{"$ref": "#/components/schemas/Thing"}, {"type": "string"}]}}}}},
                "callbacks": {"done": {}},
            }
        },
    },
    "components": {
        "pathItems": {
            "Thing": {"get": {"operationId": "getThing", "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Thing"}}}}}}}
        },
        "schemas": {
            "Thing": {
                "type": "object",
                "required": ["id"],
                "properties": {
                    "id": {"type": "string", "readOnly": True},
                    "secret": {"type": "string", "writeOnly": True},
                    "label": {"type": ["string", "null"], "maxLength": 20},
                    "shape": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "next": {"$ref": "#/components/schemas/Thing"},
                    "broken": {"$ref": "#/components/schemas/Nowhere"},
                },
            }
        },
    },
}  # fmt: skip


def test_unsupported_parts_are_warnings_with_pointers_and_comments(tmp_path: Path) -> None:
    (tmp_path / "api.json").write_text(json.dumps(SYNTHETIC, indent=2), encoding="utf-8")
    result = run("import", "openapi", "api.json", "-o", "spec.toml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    found = {
        (m["code"], m["msg"].split(": ", 1)[0]) for line in result.stderr.splitlines() if (m := DIAGNOSTIC.match(line))
    }
    assert found == {
        ("FG311", "#/paths/~1search/get/parameters/0"),
        ("FG314", "#/paths/~1search/get/responses/200/content/application~1json/schema"),  # a union: json
        ("FG322", "#/paths/~1search/get/callbacks"),
        ("FG302", "#/components/schemas/Thing/properties/broken"),
        # the union `shape` is a json field, passed as the upstream sends it: the spec warns, beside a hidden field
        ("FG126", 'json field "shape" of model "Thing" is sent as the handler returns it, beside hidden "secret"'),
    }
    line = next(line for line in result.stderr.splitlines() if "FG311" in line)
    assert line.startswith("api.json:") and DIAGNOSTIC.match(line)["line"] != "1"  # positioned at the param
    text = (tmp_path / "spec.toml").read_text(encoding="utf-8")
    assert (
        "# cookie parameter 'session' is not expressible; not an input [FG311, #/paths/~1search/get/parameters/0]"
        in text
    )
    assert 'label = { type = "string", required = false, nullable = true, max_length = 20 }' in text
    _, ir, _ = validate(tmp_path / "spec.toml")
    thing = ir.model("Thing")
    assert [f.name for f in thing.fields if f.guarded] == ["id"]  # readOnly
    assert [f.name for f in thing.fields if f.hidden] == ["secret"]  # writeOnly
    assert [f.name for f in thing.fields] == ["id", "secret", "label", "shape", "next"]  # a $ref cycle is fine
    assert next(f for f in thing.fields if f.name == "shape").type.kind == "json"  # anyOf: any JSON value
    assert {t.name for t in ir.tools} == {"get_thing", "search"}  # a path-item $ref is followed


@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        ("openapi: [unclosed", "FG300", "not valid YAML or JSON"),
        ("swagger: '2.0'\ninfo: {}\n", "FG301", "not an OpenAPI 3.0 or 3.1 document"),
    ],
)
def test_a_bad_document_is_a_diagnostic_not_a_traceback(tmp_path: Path, content: str, code: str, message: str) -> None:
    (tmp_path / "api.yaml").write_text(content, encoding="utf-8")
    result = run("import", "openapi", "api.yaml", "-o", "spec.toml", cwd=tmp_path)
    assert result.code == 2
    assert f"error[{code}]: {message}" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "spec.toml").exists()


def test_a_spec_the_import_did_not_write_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text('[server]\nname = "mine"\n', encoding="utf-8")
    result = run("import", "openapi", SHARED / "oai-petstore-expanded.json", "-o", "spec.toml", cwd=tmp_path)
    assert result.code == 2 and "error[FG330]" in result.stderr
    assert (tmp_path / "spec.toml").read_text(encoding="utf-8") == '[server]\nname = "mine"\n'


# --- --handlers http: end to end against a stub upstream ---------------------------------------------


def http_server(tmp_path: Path, document: str) -> tuple[ModuleType, ModuleType, Any]:
    """Import with --handlers http and build; returns the package and handler module (imported) and the IR."""
    spec, _, stderr = imported(tmp_path, document, "--handlers", "http")
    _, ir, _ = validate(spec)
    assert f"{ir.handlers_module}.py: wrote {len(ir.tools)} httpx handler(s)" in stderr
    build(spec, tmp_path / "out")
    return ir


@pytest.mark.parametrize("document", DOCUMENTS)
async def test_a_call_goes_through_the_httpx_handler_to_the_upstream(
    tmp_path: Path, document: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ir = http_server(tmp_path, document)
    tool, arguments, base_path, upstream_path = READ_BY_ID[document]
    prefix = re.sub(r"[^A-Z0-9]+", "_", ir.name.upper())
    with (
        serving(SHARED / document, base_path) as upstream,
        importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)),
    ):
        monkeypatch.setenv(f"{prefix}_BASE_URL", upstream.base_url)
        monkeypatch.setenv(f"{prefix}_AUTH_HEADER", "X-Api-Key: k-123")
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    (seen,) = upstream.requests
    assert (seen.method, seen.path) == ("GET", upstream_path)
    assert seen.headers.get("X-Api-Key") == "k-123"
    _, operation = upstream.route("GET", upstream_path) or (None, {})
    _, body = upstream.body_for(operation)
    expected = json.loads(body)
    data = result.structured_content["data"]  # the presenter envelope (flat before it: `result.structured_content`)
    for key, value in data.items():
        if key in expected and not isinstance(value, dict | list):
            assert value == expected[key], key
    assert set(data) <= set(expected)
    assert data  # something came back from the upstream


def _response(status: int, body: bytes = b"", **headers: str) -> httpx.Response:
    return httpx.Response(status, content=body, headers=headers)


def test_upstream_answers_map_to_tool_errors(tmp_path: Path) -> None:
    ir = http_server(tmp_path, "oai-petstore-expanded.json")
    with importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)):
        handlers = importlib.import_module(ir.handlers_module)
        cases = {
            404: handlers.error_for(_response(404), "GET /pets/9"),
            409: handlers.error_for(_response(409), "DELETE /pets/9"),
            422: handlers.error_for(_response(422, b'{"message": "name is required"}'), "POST /pets"),
            400: handlers.error_for(_response(400, b'{"detail": "limit must be positive"}'), "GET /pets"),
            429: handlers.error_for(_response(429, **{"Retry-After": "7"}), "GET /pets"),
            503: handlers.error_for(_response(503, **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), "GET /pets"),
            500: handlers.error_for(_response(500, b"stack trace with secret-internal"), "GET /pets"),
        }
    assert {s: getattr(e, "code", None) for s, e in cases.items()} == {
        404: "NOT_FOUND", 409: "CONFLICT", 422: "INVALID_REQUEST", 400: "INVALID_REQUEST",
        429: "RATE_LIMITED", 503: "UNAVAILABLE", 500: None,
    }  # fmt: skip
    assert cases[422].message == "name is required" and cases[400].message == "limit must be positive"
    assert cases[429].retry_after == 7.0 and cases[503].retry_after == 0.0  # a past date: retry now
    assert isinstance(cases[500], handlers.UpstreamError) and "secret" not in str(cases[500])


@pytest.mark.parametrize(
    ("status", "headers", "code", "detail"),
    [(404, {}, "NOT_FOUND", None), (409, {}, "CONFLICT", None), (429, {"Retry-After": "3"}, "RATE_LIMITED", "3")],
)
async def test_upstream_errors_reach_the_agent_as_tool_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    status: int,
    headers: dict[str, str],
    code: str,
    detail: str | None,
) -> None:
    ir = http_server(tmp_path, "oai-petstore-expanded.json")
    prefix = re.sub(r"[^A-Z0-9]+", "_", ir.name.upper())
    with (
        serving(SHARED / "oai-petstore-expanded.json") as upstream,
        importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)),
    ):
        monkeypatch.setenv(f"{prefix}_BASE_URL", upstream.base_url)
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        upstream.answer("DELETE", "/pets/{id}", status, {"message": "upstream words"}, **headers)
        caplog.set_level("WARNING", logger=ir.package)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            result = await client.call_tool("delete_pet", {"id": 3})
    assert result.is_error
    text = result.content[0].text
    assert f'code="{code}"' in text and "upstream words" not in text
    assert "undeclared error code" not in caplog.text  # the tool declares what its handler raises
    if detail is not None:
        assert f'<detail key="retry_after">{detail}</detail>' in text


# --- re-import keeps the user's edits -------------------------------------------------------------------

USER_SECTION = """
[presenters.Pet]
model = "Pet"
rules = ["Pets are adopted, never sold."]
redact_pii = ["name"]

[workflows.adoption]
initial = "listed"
[workflows.adoption.states]
listed = { on = { ADOPT = "adopted" } }
adopted = { type = "final" }
"""


def test_a_reimport_after_a_changed_document_keeps_the_users_edits(tmp_path: Path) -> None:
    document = json.loads((SHARED / "oai-petstore-expanded.json").read_text(encoding="utf-8"))
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    first = run("import", "openapi", "api.json", "-o", "spec.toml", "--handlers", "http", cwd=tmp_path)
    assert first.code == 0, first.stderr
    spec = tmp_path / "spec.toml"
    text = spec.read_text(encoding="utf-8")
    text = text.replace('name = "swagger_petstore"', 'name = "pets"\ntool_names = "snake"')  # [server] is yours
    text = text.replace("[models.Pet]\n", '[models.Pet]\nhidden = ["tag"]\n')
    text = text.replace("[models.NewPet]\n", '[models.NewPet]\nguarded = ["tag"]\n')
    text = text.replace(
        '[tools.delete_pet]\nkind = "mutation"\n',
        '[tools.delete_pet]\nkind = "mutation"\nhandler = "remove_pet"\n'
        'bind_state = { workflow = "adoption", states = ["listed"], transition = "ADOPT" }\n',
    )
    spec.write_text(text + USER_SECTION, encoding="utf-8")
    handlers = tmp_path / "swagger_petstore_server_handlers.py"
    handlers.rename(tmp_path / "pets_server_handlers.py")
    handlers = tmp_path / "pets_server_handlers.py"
    handlers.write_text(handlers.read_text(encoding="utf-8").replace("swagger_petstore_server", "pets_server")
                        .replace("async def delete_pet(", "async def remove_pet("), encoding="utf-8")  # fmt: skip
    before = handlers.read_text(encoding="utf-8")

    # The document changes: Pet gains a writeOnly field, NewPet (the POST body) a field,
    # GET /pets loses `limit`, PUT /pets/{id} is new.
    pet = document["components"]["schemas"]["Pet"]["allOf"][1]["properties"]
    pet["microchip"] = {"type": "string", "writeOnly": True}
    document["components"]["schemas"]["NewPet"]["properties"]["age"] = {"type": "integer"}
    document["paths"]["/pets"]["get"]["parameters"].pop()
    document["paths"]["/pets/{id}"]["put"] = {
        "operationId": "replacePet",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}}},
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/Pet"}}}}},
    }  # fmt: skip
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    second = run("import", "openapi", "api.json", "-o", "spec.toml", "--handlers", "http", cwd=tmp_path)
    assert second.code == 0, second.stderr
    after = spec.read_text(encoding="utf-8")

    assert after.endswith(USER_SECTION)  # presenters and workflows: kept byte for byte
    assert 'name = "pets"\ntool_names = "snake"' in after
    _, ir, _ = validate(spec)
    assert {f.name for f in ir.model("Pet").fields if f.hidden} == {
        "tag",
        "microchip",
    }  # yours, plus the document's new writeOnly
    assert dict(ir.model("NewPet").fillable) == {"create": ("name", "age"), "replace": ("name", "age")}  # not "tag"
    tools = {tool.name: tool for tool in ir.tools}
    assert [f.name for f in tools["add_pet"].inputs] == ["name", "age"]
    assert tools["delete_pet"].handler == "remove_pet" and tools["delete_pet"].binding is not None
    assert "limit" not in {f.name for f in tools["find_pets"].inputs}
    assert tools["replace_pet"].kind == "mutation"
    assert handlers.read_text(encoding="utf-8").startswith(before)  # extended, never rewritten
    assert "async def replace_pet(" in handlers.read_text(encoding="utf-8")
    assert "appended 1 function(s)" in second.stderr
    build(spec, tmp_path / "out")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (("--include-ops", "get("), "error[FG331]: --include-ops is not a regular expression"),
        (("--handlers", "grpc"), '--handlers must be "http"'),
    ],
)
def test_bad_options_exit_2_and_write_nothing(tmp_path: Path, options: tuple[str, ...], expected: str) -> None:
    result = run("import", "openapi", SHARED / "oai-petstore-expanded.json", "-o", "spec.toml", *options, cwd=tmp_path)
    assert result.code == 2 and expected in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_reimport_that_would_break_the_users_part_writes_nothing(tmp_path: Path) -> None:
    document = json.loads((SHARED / "oai-petstore-expanded.json").read_text(encoding="utf-8"))
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    assert run("import", "openapi", "api.json", "-o", "spec.toml", cwd=tmp_path).code == 0
    spec = tmp_path / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8") + '[presenters.Pet]\nmodel = "Pet"\nredact_pii = ["tag"]\n')
    before = spec.read_bytes()
    del document["components"]["schemas"]["NewPet"]["properties"]["tag"]  # the field the presenter redacts
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    result = run("import", "openapi", "api.json", "-o", "spec.toml", cwd=tmp_path)
    assert result.code == 2
    assert re.search(r'^spec\.toml:\d+:\d+: error\[FG155\]: redaction path "tag"', result.stderr, re.M)
    assert spec.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api.json", "spec.toml"]  # no candidate left behind


MALFORMED = [
    {"openapi": "3.0.0"},
    {"openapi": "3.0.0", "paths": []},
    {"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": {"x": 1}, "responses": []}}}},
    {"openapi": "3.0.0", "paths": {"/a": {"post": {"requestBody": "x", "responses": {"200": "y"}}}}},
    {"openapi": "3.0.0", "info": "x", "servers": "y", "components": {"schemas": {
        "A": {"properties": {"b": {"$ref": "#/components/schemas/A"}}},
        "B": {"allOf": [{"$ref": "#/components/schemas/B"}]}, "C": [1], "D": {"properties": "x"}}}},
    {"openapi": "3.1.0", "paths": {"/a/{id}": {"$ref": "#/paths/~1a~1{id}"}}},
    {"openapi": "3.0.0", "components": {"schemas": {
        "A": {"type": "array", "items": {"$ref": "#/components/schemas/A"}},
        "P": {"properties": {"a": {"$ref": "#/components/schemas/A"}}}}}},
    {"openapi": "3.0.0", "paths": {"/a": {"get": {"operationId": "class", "responses": {}},
                                           "put": {"operationId": "class", "responses": {}}}}},
    {"openapi": "3.0.0", "components": {"schemas": {"A": {"properties": {
        "a": {"type": "string", "maxLength": "x", "minLength": -1, "pattern": 5, "example": None},
        "b": {"type": "integer", "exclusiveMinimum": True, "maximum": 1e400, "examples": "x", "default": "y"},
        "c": {"type": "array", "items": {"type": "integer", "minimum": 3}, "minItems": 1.5, "uniqueItems": "yes",
              "example": [1, 2]},
        "d": {"type": "number", "minimum": 5, "exclusiveMaximum": 5, "enum": [1, 2]},
        "e": {"type": "string", "enum": ["x"], "maxLength": 3, "format": 7, "example": "y"}}}}}},
    {"openapi": "3.1.0", "paths": {"/a": {"get": {"tags": "x", "responses": {"4XX": {"description": "x"},
        "404": {"$ref": "#/nowhere"}, "409": "y", "422": {"description": 5}}}},
        "/b": {"get": {"tags": [{"a": 1}, None, "", "Ok"], "responses": {"429": {}}}}}},
]  # fmt: skip


@pytest.mark.parametrize("index", range(len(MALFORMED)))
def test_a_malformed_document_never_crashes_the_import(tmp_path: Path, index: int) -> None:
    (tmp_path / "api.json").write_text(json.dumps(MALFORMED[index]), encoding="utf-8")
    result = run("import", "openapi", "api.json", "-o", "spec.toml", cwd=tmp_path)
    assert result.code == 0, result.stderr  # what it cannot use is a warning; the spec it writes validates
    assert "internal error" not in result.stderr
    validate(tmp_path / "spec.toml")


# --- constraints, formats, examples, tags -----------------------------------------------------------


def _schema_document(version: str, properties: dict[str, Any], **operation: Any) -> dict[str, Any]:
    """One model `Thing` with `properties`, and a POST /things that takes it (so its constraints bound input)."""
    return {
        "openapi": version,
        "info": {"title": "Constrained", "version": "1"},
        "paths": {"/things": {"post": {
            "operationId": "addThing",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Thing"}}}},
            "responses": {"201": {"description": "made", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Thing"}}}}},
            **operation,
        }}},
        "components": {"schemas": {"Thing": {"type": "object", "properties": properties}}},
    }  # fmt: skip


CONSTRAINED_30 = _schema_document(
    "3.0.3",
    {
        "count": {"type": "integer", "minimum": 1, "exclusiveMinimum": True, "maximum": 10, "example": 5},
        "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": False, "minimum": 0},
        "code": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z.]+$", "example": "ab.c"},
        "labels": {
            "type": "array",
            "items": {"type": "string", "maxLength": 5},
            "minItems": 1,
            "maxItems": 3,
            "uniqueItems": True,
        },
    },
    tags=["Thing Admin", "things"],
)
CONSTRAINED_31 = _schema_document(
    "3.1.0",
    {
        "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100, "examples": [1.5, 99]},
        "when": {"type": "string", "format": "date", "examples": ["2024-02-29"]},
    },
)


def _import_document(tmp_path: Path, document: dict[str, Any], *args: str) -> tuple[Path, list[re.Match[str]]]:
    (tmp_path / "api.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
    result = run("import", "openapi", "api.json", "-o", "spec.toml", *args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    return tmp_path / "spec.toml", [m for line in result.stderr.splitlines() if (m := DIAGNOSTIC.match(line))]


def _constraints(ir: Any, model: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in ir.model(model).fields:
        c = item.constraints
        keys = ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum", "min_length", "max_length")
        keys += ("pattern", "min_items", "max_items")
        found[item.name] = {k: getattr(c, k) for k in keys if getattr(c, k) is not None}
        if c.unique_items:
            found[item.name]["unique_items"] = True
        if c.examples:
            found[item.name]["examples"] = list(c.examples)
    return found


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            CONSTRAINED_30,
            {
                "count": {"exclusive_minimum": 1, "maximum": 10, "examples": [5]},  # 3.0's boolean modifier
                "ratio": {"minimum": 0, "maximum": 1},  # exclusiveMaximum: false is the default
                "code": {"min_length": 3, "max_length": 8, "pattern": "^[a-z.]+$", "examples": ["ab.c"]},
                "labels": {"max_length": 5, "min_items": 1, "max_items": 3, "unique_items": True},  # per item
            },
        ),
        (
            CONSTRAINED_31,
            {"score": {"exclusive_minimum": 0, "exclusive_maximum": 100, "examples": [1.5, 99]},  # 3.1's numbers
             "when": {"examples": ["2024-02-29"]}},
        ),
    ],
)  # fmt: skip
async def test_constraints_become_the_specs_constraint_keys_and_bound_the_input(
    tmp_path: Path, document: dict[str, Any], expected: dict[str, dict[str, Any]]
) -> None:
    spec, warnings = _import_document(tmp_path, document)
    assert warnings == []
    _, ir, spec_warnings = validate(spec)
    assert spec_warnings == []
    assert _constraints(ir, "Thing") == expected
    generation = build(spec, tmp_path / "out")
    with importable(tmp_path / "out", modules=(generation.ir.package,)):
        package = importlib.import_module(generation.ir.package)
        async with Client(package.create_server(_stub_handlers(ir)), mode="legacy", cache=None) as client:
            (tool,) = (await client.list_tools()).tools
            first = next(iter(expected))
            out_of_bounds = {"count": 1, "score": 0}.get(first)
            if out_of_bounds is not None:  # the bound reaches the agent's schema and the server's check
                schema = tool.input_schema["properties"][first]
                assert schema["exclusiveMinimum"] == expected[first]["exclusive_minimum"]
                refused = await client.call_tool(tool.name, {first: out_of_bounds})
                assert refused.is_error and "<validation_error" in refused.content[0].text
                assert "that is greater than" in refused.content[0].text


def test_a_tag_that_is_not_a_spec_tag_is_normalized_and_still_selects(tmp_path: Path) -> None:
    spec, warnings = _import_document(tmp_path, CONSTRAINED_30, "--tags", "Thing Admin")
    assert warnings == []
    (tool,) = validate(spec)[1].tools
    assert tool.tags == ("thing-admin", "things")
    assert "# tag 'Thing Admin' is 'thing-admin' here" in spec.read_text(encoding="utf-8")


UNCARRIED = _schema_document(
    "3.1.0",
    {
        "nickname": {"type": "string", "pattern": "^\\p{L}+$", "maxLength": 10},  # not in the portable subset
        "step": {"type": "integer", "multipleOf": 5, "maxLength": 3},  # no spec key / not for integers
        "size": {"type": "string", "minLength": 5, "maxLength": 2},  # no value fits
        "level": {"type": "integer", "maximum": 3, "examples": [2, 7], "default": 9},  # 7 and 9 break it
        "contact": {"type": "string", "format": "email"},
    },
    tags=["!!!"],
)


def test_what_the_spec_would_refuse_is_reported_and_left_out_and_the_spec_validates(tmp_path: Path) -> None:
    spec, warnings = _import_document(tmp_path, UNCARRIED)
    base = "#/components/schemas/Thing/properties"
    assert {(m["code"], m["msg"].split(": ", 1)[0]) for m in warnings} == {
        ("FG332", f"{base}/nickname/pattern"),
        ("FG333", f"{base}/step/multipleOf"),
        ("FG333", f"{base}/step/maxLength"),
        ("FG334", f"{base}/size/minLength"),
        ("FG334", f"{base}/level/examples/1"),
        ("FG334", f"{base}/level/default"),
        ("FG335", f"{base}/contact/format"),
        ("FG336", "#/paths/~1things/post/tags/0"),
    }
    pattern_line = next(m for m in warnings if m["code"] == "FG332")
    document_lines = (tmp_path / "api.json").read_text(encoding="utf-8").splitlines()
    assert '"pattern"' in document_lines[int(pattern_line["line"]) - 1]  # positioned at the keyword
    text = spec.read_text(encoding="utf-8")
    assert "# pattern ^\\\\p{L}+$ is not checked, as it is not portable: " in text  # kept, as a comment
    _, ir, spec_warnings = validate(spec)
    assert spec_warnings == []
    assert _constraints(ir, "Thing") == {
        "nickname": {"max_length": 10},
        "step": {},
        "size": {},
        "level": {"maximum": 3, "examples": [2]},
        "contact": {},
    }
    assert not next(f for f in ir.model("Thing").fields if f.name == "level").has_default
    assert ir.tools[0].tags == ()


# --- errors: exactly what the httpx handler raises ------------------------------------------------------


def _raised_codes(handler_source: str) -> set[str]:
    """The `ToolError` codes the written module can raise: literal first arguments, or a conditional's branches."""
    codes: set[str] = set()
    tree = ast.parse(handler_source)
    assignments = {
        node.targets[0].id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ToolError":
            first = node.args[0]
            if isinstance(first, ast.Name):
                first = assignments[first.id]
            values = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
            for value in values:
                assert isinstance(value, ast.Constant) and isinstance(value.value, str), ast.dump(value)
                codes.add(value.value)
    return codes


@pytest.mark.parametrize("document", DOCUMENTS)
def test_each_tool_declares_exactly_the_errors_its_httpx_handler_raises(tmp_path: Path, document: str) -> None:
    spec, _, _ = imported(tmp_path, document, "--handlers", "http")
    _, ir, _ = validate(spec)
    raised = _raised_codes(handler_path_of(tmp_path, ir).read_text(encoding="utf-8"))
    assert raised == {"NOT_FOUND", "CONFLICT", "INVALID_REQUEST", "RATE_LIMITED", "UNAVAILABLE"}
    for tool in ir.tools:
        assert {code for code, _ in tool.errors} == raised, tool.name


def handler_path_of(directory: Path, ir: Any) -> Path:
    return directory / f"{ir.handlers_module}.py"


def test_errors_are_described_by_the_documented_responses(tmp_path: Path) -> None:
    spec, _, _ = imported(tmp_path, "swagger-petstore-v3.yaml", "--handlers", "http")
    tools = {tool.name: dict(tool.errors) for tool in validate(spec)[1].tools}
    assert tools["get_pet_by_id"]["NOT_FOUND"] == "404: Pet not found"
    assert tools["get_pet_by_id"]["INVALID_REQUEST"] == "400: Invalid ID supplied"
    assert tools["update_pet"]["INVALID_REQUEST"] == "400: Invalid ID supplied; 422: Validation exception"
    assert tools["get_pet_by_id"]["CONFLICT"] == "the request conflicts with the upstream's current state"
    plain = tmp_path / "plain"
    plain.mkdir()
    spec, _, _ = imported(plain, "swagger-petstore-v3.yaml")  # without --handlers http: no errors are claimed
    assert all(tool.errors == () for tool in validate(spec)[1].tools)


def test_a_documented_status_the_handler_does_not_map_is_noted(tmp_path: Path) -> None:
    spec, _, _ = imported(tmp_path, "redocly-museum.yaml", "--handlers", "http")
    text = spec.read_text(encoding="utf-8")
    assert "# documented 401 (Unauthorized.): the httpx handler reports it as INTERNAL_ERROR" in text


async def test_the_agent_reads_the_errors_in_tools_list(tmp_path: Path) -> None:
    ir = http_server(tmp_path, "oai-petstore-expanded.json")
    with importable(tmp_path / "out", tmp_path, modules=(ir.package, ir.handlers_module)):
        package = importlib.import_module(ir.package)
        handlers = importlib.import_module(ir.handlers_module)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    description = listed["delete_pet"].description or ""
    assert "Errors it may return (tool_error codes):" in description
    assert "- RATE_LIMITED: too many requests; retry after retry_after seconds" in description


# --- the handler module: extended with libcst, never rewritten ------------------------------------------


def _with_a_new_operation(tmp_path: Path) -> dict[str, Any]:
    document = json.loads((SHARED / "oai-petstore-expanded.json").read_text(encoding="utf-8"))
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    assert run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path).code == 0
    document["paths"]["/pets/{id}"]["patch"] = {
        "operationId": "renamePet",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}}},
        "responses": {"204": {"description": "renamed"}},
    }
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    return document


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda text: text + "\ndef broken(:\n", "it does not parse"),
        (lambda text: text.replace("async def call(", "async def send("), "it no longer defines `call`"),
    ],
)
def test_a_handler_module_that_cannot_be_extended_is_left_as_it_is(tmp_path: Path, edit: Any, why: str) -> None:
    _with_a_new_operation(tmp_path)
    handlers = tmp_path / "pets_server_handlers.py"
    handlers.write_text(edit(handlers.read_text(encoding="utf-8")), encoding="utf-8")
    before = handlers.read_bytes()
    result = run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "pets_server_handlers.py:" in result.stderr and "warning[FG337]" in result.stderr and why in result.stderr
    assert handlers.read_bytes() == before
    assert "rename_pet" in {tool.name for tool in validate(tmp_path / "pets.toml")[1].tools}  # the spec is written


def test_a_function_is_appended_after_the_users_last_byte(tmp_path: Path) -> None:
    _with_a_new_operation(tmp_path)
    handlers = tmp_path / "pets_server_handlers.py"
    mine = handlers.read_text(encoding="utf-8").rstrip("\n") + "  # my last line, no newline after it"
    handlers.write_text(mine, encoding="utf-8")
    result = run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path)
    assert result.code == 0 and "appended 1 function(s)" in result.stderr
    text = handlers.read_text(encoding="utf-8")
    assert text.startswith(mine + "\n")
    assert 'async def rename_pet(args: Any) -> Any:\n    """PATCH /pets/{id}"""' in text
    ast.parse(text)
    again = run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path)
    assert "unchanged (a function for every operation)" in again.stderr and handlers.read_text() == text


# --- names and kinds ------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_tool_names_are_valid_in_either_naming_style(tmp_path: Path, document: str) -> None:
    spec, _, _ = imported(tmp_path, document)
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("[server]\n", '[server]\ntool_names = "snake"\n', 1), encoding="utf-8")
    _, ir, _ = validate(spec)
    assert all(tool.wire == tool.name for tool in ir.tools)  # snake case already: the model sees the spec name


def test_a_long_operation_id_is_cut_to_a_name_either_style_accepts(tmp_path: Path) -> None:
    long_id = "list" + "AllTheThingsOfTheAccount" * 4
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Long", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": long_id, "responses": {}}},
            "/b": {"get": {"operationId": long_id + "Again", "responses": {}}},
        },
    }
    spec, warnings = _import_document(tmp_path, document)
    assert warnings == []
    spec.write_text(spec.read_text(encoding="utf-8").replace("[server]\n", '[server]\ntool_names = "snake"\n', 1))
    names = [tool.name for tool in validate(spec)[1].tools]
    assert len(set(names)) == 2 and all(len(name) <= 64 for name in names)
    assert all(name.startswith("list_all_the_things_of_the_account_all_the") for name in names)


async def test_kinds_become_the_annotations_an_agent_reads(tmp_path: Path) -> None:
    spec, _, _ = imported(tmp_path, "swagger-petstore-v3.yaml")
    _, ir, _ = validate(spec)
    build(spec, tmp_path / "out")
    with importable(tmp_path / "out", modules=(ir.package,)):
        package = importlib.import_module(ir.package)
        async with Client(package.create_server(_stub_handlers(ir)), mode="legacy", cache=None) as client:
            listed = {tool.name: tool.annotations for tool in (await client.list_tools()).tools}
    assert listed["get_pet_by_id"] is not None and listed["get_pet_by_id"].read_only_hint is True
    assert listed["delete_pet"] is not None and listed["delete_pet"].destructive_hint is True  # DELETE
    assert listed["update_pet"] is not None and listed["update_pet"].destructive_hint is True  # PUT overwrites
    assert listed["add_pet"] is not None and not listed["add_pet"].destructive_hint  # POST: an action


async def test_a_write_only_field_never_reaches_the_agent(tmp_path: Path) -> None:
    spec, _ = _import_document(tmp_path, SYNTHETIC)
    _, ir, _ = validate(spec)
    build(spec, tmp_path / "out")
    handlers = ModuleType("synthetic_handlers")
    handlers.get_thing = lambda args: {"id": args.id, "secret": "s3cret-value", "label": "shown"}  # type: ignore[attr-defined]
    handlers.search = lambda args: None  # type: ignore[attr-defined]
    with importable(tmp_path / "out", modules=(ir.package,)):
        package = importlib.import_module(ir.package)
        async with Client(package.create_server(handlers), mode="legacy", cache=None) as client:
            result = await client.call_tool("get_thing", {"id": "t-1"})
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert not result.is_error, result.content
    assert result.structured_content["data"] == {"id": "t-1", "label": "shown"}
    assert "s3cret-value" not in json.dumps([c.model_dump() for c in result.content])
    schema = json.dumps(listed["get_thing"].output_schema)
    assert '"label"' in schema and '"secret"' not in schema


def test_a_reimport_keeps_the_users_own_error_codes(tmp_path: Path) -> None:
    document = json.loads((SHARED / "oai-petstore-expanded.json").read_text(encoding="utf-8"))
    (tmp_path / "api.json").write_text(json.dumps(document), encoding="utf-8")
    assert run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path).code == 0
    spec = tmp_path / "pets.toml"
    text = spec.read_text(encoding="utf-8")
    mine = '[tools.delete_pet.errors]\nADOPTED = "The pet was adopted meanwhile"\n'
    spec.write_text(text.replace("[tools.delete_pet.errors]\n", mine), encoding="utf-8")
    assert run("import", "openapi", "api.json", "-o", "pets.toml", "--handlers", "http", cwd=tmp_path).code == 0
    errors = dict(next(t for t in validate(spec)[1].tools if t.name == "delete_pet").errors)
    assert errors["ADOPTED"] == "The pet was adopted meanwhile" and "NOT_FOUND" in errors
    assert run("import", "openapi", "api.json", "-o", "pets.toml", cwd=tmp_path).code == 0  # without http: yours
    assert dict(next(t for t in validate(spec)[1].tools if t.name == "delete_pet").errors) == errors
