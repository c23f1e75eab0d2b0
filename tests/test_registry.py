"""`server.json` (docs/spec.md §11.7): every generated project carries the MCP registry's description of its
server, valid against the registry's published schema (tests/fixtures/registry/, with its source and licence).

The schema is draft-07 and checked with formats; each check below is shown able to fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.build import FIXTURES, SPECS, build, write_spec
from tests.support.processes import run

SCHEMA = json.loads((FIXTURES / "registry" / "server.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def errors(document: Any) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(document)]


@pytest.fixture(scope="module")
def billing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("registry") / "out"
    build(SPECS / "billing.toml", out)
    document: dict[str, Any] = json.loads((out / "server.json").read_text(encoding="utf-8"))
    return document


def test_billings_server_json_validates_against_the_registry_schema(billing: dict[str, Any]) -> None:
    assert errors(billing) == []
    assert billing["$schema"] == SCHEMA["$id"]  # the version it was validated against is the one it names
    assert (billing["name"], billing["version"]) == ("invalid.example/billing", "1.0.0")
    stdio, http = billing["packages"]
    assert stdio["transport"] == {"type": "stdio"} and "packageArguments" not in stdio
    assert http["transport"] == {"type": "streamable-http", "url": "http://127.0.0.1:8000/mcp"}
    assert [a["name"] for a in http["packageArguments"]] == ["--http"]
    for package in (stdio, http):  # the generated project's distribution, run by its console script
        assert (package["registryType"], package["identifier"], package["version"]) == (
            "pypi",
            "billing-server",
            "1.0.0",
        )


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(name="billing"),  # no namespace
        lambda d: d.update(description="x" * 101),  # over the registry's limit
        lambda d: d.pop("version"),
        lambda d: d["packages"][0].pop("transport"),
        lambda d: d["packages"][0].update(version="latest"),
    ],
)
def test_the_schema_check_is_not_vacuous(billing: dict[str, Any], damage: Any) -> None:
    damaged = json.loads(json.dumps(billing))
    damage(damaged)
    assert errors(damaged)


def test_the_registry_name_and_the_environment_the_handlers_read(tmp_path: Path) -> None:
    spec = """
[server]
name = "weather"
version = "2.1.0"
registry_name = "io.github.acme/weather"
instructions = "Forecasts for any city.\\nMore detail on a second line."

[tools.forecast]
kind = "query"
returns = "text"
handler = "forecast"
"""
    handlers = (
        "import os\n\nimport httpx\n\nBASE = 'WEATHER_URL'\n\n\ndef forecast(args):\n"
        "    key = os.environ['WEATHER_KEY']\n"
        "    return httpx.get(os.environ.get(BASE, 'https://x'), params={'key': key}).text\n"
    )
    write_spec(tmp_path, spec, handlers=handlers)
    assert run("build", "spec.toml", "-o", "out", cwd=tmp_path).code == 0
    document = json.loads((tmp_path / "out" / "server.json").read_text(encoding="utf-8"))
    assert errors(document) == []
    assert document["name"] == "io.github.acme/weather"
    assert document["description"] == "Forecasts for any city."
    for package in document["packages"]:
        listed = {v["name"]: v["isRequired"] for v in package["environmentVariables"]}
        assert listed == {"WEATHER_KEY": True, "WEATHER_URL": False}
    # The file is generated like the rest: check finds it current, and stale once the spec changes.
    assert run("check", "spec.toml", "-o", "out", cwd=tmp_path).code == 0
    (tmp_path / "spec.toml").write_text(spec.replace("2.1.0", "2.2.0"), encoding="utf-8")
    drifted = run("check", "spec.toml", "-o", "out", cwd=tmp_path)
    assert drifted.code == 1 and "server.json" in drifted.stdout + drifted.stderr


def test_the_openapi_http_handlers_environment_is_listed(tmp_path: Path) -> None:
    document = FIXTURES / "openapi" / "swagger-petstore-v3.yaml"
    assert run("import", "openapi", document, "-o", "pets.toml", "--handlers", "http", cwd=tmp_path).code == 0
    assert run("build", "pets.toml", "-o", "out", cwd=tmp_path).code == 0
    server = json.loads((tmp_path / "out" / "server.json").read_text(encoding="utf-8"))
    assert errors(server) == []
    names = [v["name"] for v in server["packages"][0]["environmentVariables"]]
    assert names == ["PETS_AUTH_HEADER", "PETS_BASE_URL", "PETS_TIMEOUT"]
