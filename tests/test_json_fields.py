"""`json` fields: any JSON value in, only plain JSON out, declared as such in the schemas (a real `mcp.Client`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from tests.support.build import GeneratedServer, built_server
from tests.support.quality import assert_generated_quality

SPEC = """
[server]
name = "docs"

[models.Doc]
[models.Doc.fields]
id = "string"
meta = { type = "json", description = "Free-form metadata" }
extra = { type = "json", nullable = true, required = false }

[tools."doc.put"]
description = "Store a document's metadata."
returns = "Doc"
[tools."doc.put".input]
id = "string"
meta = { type = "json", examples = [{ tags = ["a"] }] }
shape = { type = "enum", values = ["plain", "object", "nan"], default = "plain" }
"""

HANDLERS = """
import dataclasses
from typing import Any


@dataclasses.dataclass
class Owner:
    name: str
    ssn: str


def doc_put(args: Any) -> Any:
    if args.shape == "object":  # an object whose attributes are not declared anywhere
        return {"id": args.id, "meta": {"owner": Owner("Ada", "078-05-1120")}}
    if args.shape == "nan":
        return {"id": args.id, "meta": [float("nan")]}
    return {"id": args.id, "meta": args.meta, "extra": None}
"""

pytestmark = pytest.mark.anyio
MODES = ["legacy", "2026-07-28"]


def data_of(structured: Any) -> Any:
    """A presenter result's data, from the envelope structuredContent is ({"data": ..., "rules": ...})."""
    return structured["data"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("docs")
    with built_server(SPEC, root / "out", handlers=HANDLERS) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
async def test_schemas_declare_any_json(docs: GeneratedServer, mode: str) -> None:
    async with Client(docs.create_server(), mode=mode, cache=None) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "doc_put")
    # Every JSON type as an `anyOf` branch, never a `type` array (docs/spec.md §5.2: converters refuse those).
    every_type = [{"type": t} for t in ("object", "array", "string", "number", "boolean")]
    assert tool.input_schema["properties"]["meta"] == {"anyOf": every_type, "examples": [{"tags": ["a"]}]}
    assert tool.output_schema is not None
    output = tool.output_schema["properties"]["data"]["properties"]
    assert output["meta"] == {"anyOf": every_type, "description": "Free-form metadata"}
    assert output["extra"] == {"anyOf": [*every_type, {"type": "null"}]}


@pytest.mark.parametrize("meta", [{"tags": ["a", 1, None, {"deep": True}]}, [1, 2.5], "text", 0, False])
async def test_any_json_value_goes_through(docs: GeneratedServer, meta: Any) -> None:
    async with Client(docs.create_server(), mode="legacy", cache=None) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "doc_put")
        result = await client.call_tool("doc_put", {"id": "d1", "meta": meta})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert data_of(result.structured_content)["meta"] == meta
    assert tool.output_schema is not None
    jsonschema.validate(result.structured_content, tool.output_schema)


async def test_null_needs_nullable(docs: GeneratedServer) -> None:
    async with Client(docs.create_server(), mode="legacy", cache=None) as client:
        result = await client.call_tool("doc_put", {"id": "d1", "meta": None})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert '<field name="meta">expected a JSON value other than null, NaN or Infinity; you sent null.</field>' in text


@pytest.mark.parametrize("shape", ["object", "nan"])
async def test_output_that_is_not_plain_json_is_refused_not_serialized(docs: GeneratedServer, shape: str) -> None:
    async with Client(docs.create_server(), mode="legacy", cache=None) as client:
        result = await client.call_tool("doc_put", {"id": "d1", "meta": {}, "shape": shape})
    assert result.is_error
    text = "".join(getattr(b, "text", "") for b in result.content)
    assert "OUTPUT_INVALID" in text and "meta" in text
    assert "078-05-1120" not in text and "Ada" not in text and "NaN" not in text


def test_out_json_copies_so_later_changes_do_not_show(docs: GeneratedServer) -> None:
    runtime = docs.module("_values")
    source = {"a": [1, {"b": 2}]}
    copied = runtime.out_json(source, "Doc", "meta")
    source["a"][1]["b"] = 3
    assert copied == {"a": [1, {"b": 2}]}
    for wrong in ({1: "int key"}, {"a": {1, 2}}, dataclasses.make_dataclass("X", [])()):
        with pytest.raises(runtime.OutputError):
            runtime.out_json(wrong, "Doc", "meta")


def test_the_generated_code_passes_ruff_and_mypy_strict(docs: GeneratedServer, tmp_path: Path) -> None:
    assert_generated_quality(docs, tmp_path)
