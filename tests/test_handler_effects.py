"""Handler effects against `kind` (docs/spec.md §6.8): what the handler module's text says each handler can do.

A query is read-only to clients (`readOnlyHint: true`: hosts run it without asking), so a query whose handler
can write files, run a process, send a non-GET HTTP request, evaluate code or change the environment fails
`build` and `validate` with FG420 at the call, and one whose handler escapes the analysis (a dynamic import,
`getattr` on a module with a computed name) with FG421. A handler that only reads passes. The OpenAPI
importer's httpx handlers pass their HTTP method down to one shared `call`; GET tools come out as reads.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import libcst
import pytest

from fusiongen.api import explain, exposure_text, validate
from fusiongen.diagnostics import SpecError
from fusiongen.ir import EffectIR
from fusiongen.scaffold.effects import analyse
from tests.support.build import FIXTURES, write_spec
from tests.support.processes import run

SPEC = """
[server]
name = "fx"
version = "0.1.0"

[tools.probe]
kind = "{kind}"
description = "Probe something."
handler = "probe"
returns = "text"
"""
DIAGNOSTIC = re.compile(r"^(?P<file>\S+):(?P<line>\d+):(?P<col>\d+): error\[(?P<code>FG\d+)\]: (?P<message>.*)$", re.M)


def effects(source: str, function: str = "probe") -> tuple[EffectIR, ...]:
    return analyse(libcst.parse_module(textwrap.dedent(source)), "fx_server").of(function)


def kinds(source: str, function: str = "probe") -> set[tuple[str, str]]:
    return {(e.category, e.access) for e in effects(source, function)}


def line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


def column_of(source: str, needle: str) -> int:
    line = source.splitlines()[line_of(source, needle) - 1]
    return line.index(needle) + 1


# --- the analysis ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("import subprocess\ndef probe(args):\n    subprocess.run(['ls'])\n", ("processes", "execute")),
        ("from subprocess import Popen as P\ndef probe(args):\n    P(['ls'])\n", ("processes", "execute")),
        ("import os\ndef probe(args):\n    os.system('ls')\n", ("processes", "execute")),
        (
            "import asyncio\nasync def probe(args):\n    await asyncio.create_subprocess_exec('ls')\n",
            ("processes", "execute"),
        ),
        ("def probe(args):\n    open('x', 'w').write('y')\n", ("files", "write")),
        ("def probe(args):\n    open('x', mode='a')\n", ("files", "write")),
        ("def probe(args, mode):\n    open('x', mode)\n", ("files", "write")),  # a computed mode: fail closed
        ("from pathlib import Path\ndef probe(args):\n    Path('x').write_text('y')\n", ("files", "write")),
        ("import shutil\ndef probe(args):\n    shutil.rmtree('x')\n", ("files", "write")),
        ("import httpx\ndef probe(args):\n    httpx.post('http://x')\n", ("network", "write")),
        ("import requests\ndef probe(args):\n    requests.delete('http://x')\n", ("network", "write")),
        (
            "import httpx\nasync def probe(args):\n"
            "    async with httpx.AsyncClient() as c:\n        await c.put('/x')\n",
            ("network", "write"),
        ),
        ("import httpx\ndef probe(args):\n    httpx.request(args.verb, 'http://x')\n", ("network", "write")),
        ("import socket\ndef probe(args):\n    socket.create_connection(('h', 1))\n", ("network", "write")),
        ("import urllib.request\ndef probe(args):\n    urllib.request.urlopen('u', data=b'x')\n", ("network", "write")),
        ("def probe(args):\n    eval(args.code)\n", ("code", "execute")),
        ("import pickle\ndef probe(args):\n    pickle.loads(args.blob)\n", ("code", "execute")),
        ("import os\ndef probe(args):\n    os.environ['X'] = '1'\n", ("environment", "write")),
        ("import os\ndef probe(args):\n    os.environ.update(X='1')\n", ("environment", "write")),
        ("def probe(args):\n    __import__('os')\n", ("dynamic", "dynamic")),
        ("import importlib\ndef probe(args):\n    importlib.import_module(args.name)\n", ("dynamic", "dynamic")),
        ("import os\ndef probe(args):\n    getattr(os, args.name)('ls')\n", ("dynamic", "dynamic")),
    ],
)
def test_a_writing_or_executing_call_is_classified(body: str, expected: tuple[str, str]) -> None:
    assert expected in kinds(body)


def test_getattr_with_a_literal_name_is_the_attribute_itself() -> None:
    assert kinds("import os\ndef probe(args):\n    getattr(os, 'system')('ls')\n") == {("processes", "execute")}


@pytest.mark.parametrize(
    "body",
    [
        "import httpx\ndef probe(args):\n    return httpx.get('http://x').json()\n",
        "import httpx\nasync def probe(args):\n"
        "    async with httpx.AsyncClient() as c:\n        return (await c.get('/x')).json()\n",
        "import httpx\ndef probe(args):\n    return httpx.request('HEAD', 'http://x')\n",
        "import requests\ndef probe(args):\n    return requests.get('http://x').text\n",
        "def probe(args):\n    return open('x').read()\n",
        "def probe(args):\n    return open('x', 'rb').read()\n",
        "from pathlib import Path\ndef probe(args):\n    return Path('x').read_text()\n",
        "import os\ndef probe(args):\n    return os.environ.get('X', '') + os.getenv('Y', '')\n",
        "import json, datetime\ndef probe(args):\n    return json.dumps({'at': datetime.date.today().isoformat()})\n",
        "ROWS = {}\ndef probe(args):\n    ROWS.get(args.id)\n    return str(ROWS.pop(args.id, None))\n",
    ],
)
def test_a_reading_handler_has_no_refused_effect(body: str) -> None:
    assert not [e for e in effects(body) if e.refuses_query], effects(body)


def test_effects_are_followed_through_the_modules_own_functions() -> None:
    source = textwrap.dedent(
        """\
        import subprocess

        def probe(args):
            return _helper(args)

        def _helper(args):
            return _run(args)

        def _run(args):
            return subprocess.check_output(["ls"])
        """
    )
    (effect,) = effects(source)
    assert (effect.category, effect.access, effect.call) == ("processes", "execute", "subprocess.check_output")
    assert effect.via == ("_helper", "_run")
    assert (effect.line, effect.column) == (line_of(source, "check_output"), column_of(source, "subprocess.check"))


def test_a_module_class_it_instantiates_contributes_its_methods() -> None:
    source = (
        "import os\nclass Store:\n    def save(self):\n        os.remove('x')\ndef probe(args):\n    Store().save()\n"
    )
    assert ("files", "write") in kinds(source)


def test_recursion_terminates() -> None:
    source = "import os\ndef probe(args):\n    return again(args)\n"
    source += "def again(args):\n    os.remove('x')\n    return probe(args)\n"
    assert kinds(source) == {("files", "write")}


def test_an_http_method_passed_down_as_a_literal_is_resolved_per_call_site() -> None:
    source = textwrap.dedent(
        """\
        import httpx

        def client() -> httpx.Client:
            return httpx.Client()

        def call(method, url):
            return client().request(method, url)

        def probe(args):
            return call("GET", "/x")

        def change(args):
            return call("PATCH", "/x")

        def anything(args):
            return call(args.method, "/x")
        """
    )
    assert kinds(source) == {("network", "read")}
    assert kinds(source, "change") == {("network", "write")}
    assert kinds(source, "anything") == {("network", "write")}  # not a literal: fail closed


def test_calls_into_modules_it_does_not_read_are_unknown_not_safe() -> None:
    source = "import sqlalchemy\nfrom .store import save\n"
    source += "def probe(args):\n    sqlalchemy.create_engine('x')\n    save(args)\n"
    found = effects(source)
    assert {(e.category, e.call) for e in found} == {
        ("unknown", "sqlalchemy.create_engine"),
        ("unknown", ".store.save"),
    }
    assert not any(e.refuses_query for e in found)


def test_a_handler_bound_by_import_is_unknown() -> None:
    (effect,) = effects("from elsewhere import probe\n")
    assert effect.category == "unknown"
    assert "elsewhere.probe" in effect.call


# --- build and validate -------------------------------------------------------------------------------

WRITERS = {
    "file": (
        "def probe(args):\n    with open('/tmp/fx-out', 'w') as out:\n        out.write('x')\n    return 'ok'\n",
        "open",
    ),
    "subprocess": (
        "import subprocess\n\ndef probe(args):\n    return subprocess.run(['true']).stdout\n",
        "subprocess.run",
    ),
    "httpx": ("import httpx\n\n\ndef probe(args):\n    return httpx.post('http://127.0.0.1:9/x').text\n", "httpx.post"),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_query_whose_handler_writes_fails_build_at_the_call(tmp_path: Path, name: str) -> None:
    handlers, needle = WRITERS[name]
    write_spec(tmp_path, SPEC.format(kind="query"), handlers=handlers)
    done = run("build", "spec.toml", "-o", "out", cwd=tmp_path)
    assert done.code == 2, done.stderr
    (found,) = [m for m in DIAGNOSTIC.finditer(done.stderr)]
    assert found["code"] == "FG420"
    assert found["file"] == "fx_server_handlers.py"
    assert (int(found["line"]), int(found["col"])) == (line_of(handlers, needle), column_of(handlers, needle))
    assert 'tool "probe" is a query' in found["message"]
    assert not (tmp_path / "out").exists()  # nothing was written


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_the_same_handler_of_a_mutation_builds_and_explains_its_effect(tmp_path: Path, name: str) -> None:
    handlers, needle = WRITERS[name]
    write_spec(tmp_path, SPEC.format(kind="mutation"), handlers=handlers)
    done = run("build", "spec.toml", "-o", "out", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert run("check", "spec.toml", "-o", "out", cwd=tmp_path).code == 0
    _, report, _ = explain(tmp_path / "spec.toml")
    text = exposure_text(report, "text")
    assert needle in text
    assert needle in (tmp_path / "out" / "EXPOSURE.md").read_text(encoding="utf-8")


def test_a_dynamic_import_in_a_query_is_reported_as_such(tmp_path: Path) -> None:
    handlers = "import importlib\n\ndef probe(args):\n    return importlib.import_module(args.name).VALUE\n"
    spec = write_spec(tmp_path, SPEC.format(kind="query"), handlers=handlers)
    with pytest.raises(SpecError) as raised:
        validate(spec)
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == "FG421"
    assert "importlib.import_module" in diagnostic.message
    assert "cannot follow" in diagnostic.message


def test_a_query_that_only_reads_builds(tmp_path: Path) -> None:
    handlers = "import httpx\nimport os\n\ndef probe(args):\n    return httpx.get(os.environ['URL']).text\n"
    write_spec(tmp_path, SPEC.format(kind="query"), handlers=handlers)
    done = run("build", "spec.toml", "-o", "out", cwd=tmp_path)
    assert done.code == 0, done.stderr
    _, ir, _ = validate(tmp_path / "spec.toml")
    assert {(e.category, e.access) for e in ir.tools[0].effects} == {("network", "read"), ("environment", "read")}


def test_the_openapi_http_handlers_classify_by_method(tmp_path: Path) -> None:
    document = FIXTURES / "openapi" / "swagger-petstore-v3.yaml"
    done = run("import", "openapi", document, "-o", "pets.toml", "--handlers", "http", cwd=tmp_path)
    assert done.code == 0, done.stderr
    _, ir, _ = validate(tmp_path / "pets.toml")  # no FG420: every query is a GET
    queries = [t for t in ir.tools if t.kind == "query"]
    others = [t for t in ir.tools if t.kind != "query"]
    assert queries and others
    for tool in queries:
        network = {(e.access, e.call) for e in tool.effects if e.category == "network"}
        assert network == {("read", "client.request('GET')")}, tool.name
    for tool in others:
        network = {e.access for e in tool.effects if e.category == "network"}
        assert network == {"write"}, tool.name


def test_diff_reports_a_tool_that_gains_an_effect(tmp_path: Path) -> None:
    pure = "def probe(args):\n    return str(args)\n"
    old = write_spec(tmp_path / "old", SPEC.format(kind="mutation"), handlers=pure)
    new = write_spec(tmp_path / "new", SPEC.format(kind="mutation"), handlers=WRITERS["subprocess"][0])
    done = run("diff", old, new, cwd=tmp_path)
    assert done.code == 4, done.stdout + done.stderr
    assert "effect-gained" in run("diff", old, new, "--format", "json", cwd=tmp_path).stdout
    assert "its handler can now execute processes: subprocess.run" in done.stdout
    back = run("diff", new, old, "--format", "json", cwd=tmp_path)
    assert back.code == 0 and "effect-removed" in back.stdout  # losing one is safe


def test_diff_against_a_git_revision_reads_the_handler_module_then(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.format(kind="mutation"), handlers=WRITERS["subprocess"][0])
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "runs a process"], check=True)
    # Unchanged: the revision's handler module runs the process too (were it not read, this would be effect-gained).
    same = run("diff", "--git", "HEAD", spec, cwd=tmp_path)
    assert same.code == 0, same.stdout + same.stderr
    (tmp_path / "fx_server_handlers.py").write_text("def probe(args):\n    return str(args)\n", encoding="utf-8")
    done = run("diff", "--git", "HEAD", spec, "--format", "json", cwd=tmp_path)
    assert done.code == 0 and "effect-removed" in done.stdout, done.stdout


def test_positions_hold_across_comments_blank_lines_decorators_and_classes() -> None:
    source = (
        '#!/usr/bin/env python\n# a comment\n\n\n"""Doc."""\nimport os  # x\n\nclass C:\n\n    # lead\n'
        '    def m(self):\n        os.remove("a")\n\n\n# between\n\n@decorator\ndef probe(args):\n'
        '    """D."""\n\n    x = 1; os.system("x")\n    C()\n'
    )
    found = {e.call: (e.line, e.column, e.via) for e in effects(source)}
    assert found == {
        "os.system": (line_of(source, "os.system"), column_of(source, "os.system"), ()),
        "os.remove": (line_of(source, "os.remove"), column_of(source, "os.remove"), ("C.m",)),
    }


def test_check_refuses_a_query_whose_handler_came_to_write(tmp_path: Path) -> None:
    write_spec(tmp_path, SPEC.format(kind="query"), handlers="def probe(args):\n    return 'ok'\n")
    assert run("build", "spec.toml", "-o", "out", cwd=tmp_path).code == 0
    (tmp_path / "fx_server_handlers.py").write_text(WRITERS["httpx"][0], encoding="utf-8")
    checked = run("check", "spec.toml", "-o", "out", cwd=tmp_path)
    assert checked.code == 2 and "error[FG420]" in checked.stderr and "httpx.post" in checked.stderr
