"""Large real documents (issue 26): GitHub REST 2020, Twilio 2010 and OpenAI, as trimmed copies (MIT; how they
were made: tests/fixtures/openapi/large/). Each imports with `--handlers http`, builds, passes `fusiongen check`,
is served as a real subprocess on stdio, and answers a call through its generated httpx handlers against the
stub upstream on 127.0.0.1, which sees the request the document describes (Twilio's a form body).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fusiongen.api import validate
from tests.support.build import build
from tests.support.client import connect, stdio_params
from tests.support.openapi_upstream import serving
from tests.support.processes import run, run_process, server_env

pytestmark = pytest.mark.anyio
LARGE = Path(__file__).parent / "fixtures" / "openapi" / "large"

# document → (tool, arguments, the upstream's base path, method and path it must see, body it must see)
CALLS: dict[str, tuple[str, dict[str, Any], str, str, str, Any]] = {
    "github-2020-issues.json": (
        "issues_get",
        {"owner": "octo", "repo": "hello", "issue_number": 7},
        "",
        "GET",
        "/repos/octo/hello/issues/7",
        None,
    ),
    "twilio-2010-calls.json": (
        "create_call",
        {"account_sid": "AC" + "0" * 32, "To": "+15550100", "From": "+15550111", "Record": True},
        "",
        "POST",
        "/2010-04-01/Accounts/AC00000000000000000000000000000000/Calls.json",
        {"To": "+15550100", "From": "+15550111", "Record": "true"},
    ),
    "openai-models-files.yaml": ("retrieve_model", {"model": "gpt-4o-mini"}, "/v1", "GET", "/models/gpt-4o-mini", None),
}


@pytest.mark.parametrize("document", list(CALLS))
async def test_a_large_document_imports_builds_checks_serves_and_answers_a_call(tmp_path: Path, document: str) -> None:
    imported = run("import", "openapi", LARGE / document, "-o", "spec.toml", "--handlers", "http", cwd=tmp_path)
    assert imported.code == 0, imported.stderr
    assert "error[" not in imported.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    build(tmp_path / "spec.toml", tmp_path / "out")
    checked = run_process("check", "spec.toml", "-o", "out", cwd=tmp_path)
    assert checked.code == 0, checked.stdout + checked.stderr

    tool, arguments, base_path, method, path, body = CALLS[document]
    wire = next(t.wire for t in ir.tools if t.name == tool)
    prefix = re.sub(r"[^A-Z0-9]+", "_", ir.name.upper()).strip("_")
    with serving(LARGE / document, base_path) as upstream:
        env = server_env(tmp_path / "out", **{f"{prefix}_BASE_URL": upstream.base_url})
        params = stdio_params(tmp_path / "out", package=ir.package, env=env)
        async with connect(params) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(wire, arguments)
    assert listed == {t.wire for t in ir.tools}
    assert not result.is_error, result.content
    (seen,) = upstream.requests
    assert (seen.method, seen.path) == (method, path)
    if body is not None:
        assert {k: v for k, v in seen.body.items() if k in body} == body and set(seen.body) <= set(body)
    assert result.structured_content is not None and result.structured_content["data"]
