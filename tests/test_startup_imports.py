"""What a generated server imports to serve stdio: nothing of the HTTP or auth stack beyond what the SDK imports.

Start-up to the first answer is mostly imports, and most of those are the SDK's own (`import mcp.server` brings
starlette, uvicorn, the auth models and every protocol version's types, whatever the transport). What the server
adds on top is ours to keep small: the verifiers, TOML, PyJWT, the HTTP parser and event loop of `--http`, Redis,
the tracing SDK are imported only on the paths that use them. These tests compare module names, never times:
`python -X importtime` lists every module a process imports, the real server runs through its initialize and a
tools/list, and what it imports beyond the SDK's baseline must contain none of those.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.build import SPECS, build
from tests.support.processes import free_port, server_env, stop, wait_for_port

TIMEOUT = 60  # seconds: a cold start on a loaded 2-core machine
BASELINE = "import mcp.server, mcp.server.lowlevel, mcp.server.stdio"  # every generated server imports these
# Imported only by --http, --auth, a Redis store or --otel: never by a stdio start-up.
NOT_ON_STDIO = (
    "uvicorn",
    "starlette",
    "sse_starlette",
    "httptools",
    "uvloop",
    "httpx",
    "jwt",
    "tomllib",
    "redis",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "jsonschema",
    "mcp.server.auth",
    "mcp.server.streamable_http",
)
HANDSHAKE = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
    b'"clientInfo":{"name":"t","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
)
PLAIN_SPEC = """
[server]
name = "plain"

[models.Note]
[models.Note.fields]
id = "string"
text = "string"

[tools."note.get"]
kind = "query"
description = "Fetch one note."
returns = "Note"

[tools."note.get".input]
id = "string"
"""
PLAIN_HANDLERS = 'def note_get(args):\n    return {"id": args.id, "text": "hello"}\n'


def imported_modules(stderr: bytes) -> set[str]:
    """The module names in `-X importtime` output (one line per module imported)."""
    names = set()
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name)
    return names


def baseline() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", BASELINE], capture_output=True, timeout=TIMEOUT, check=True
    )
    return imported_modules(done.stderr)


def stdio_run(out: Path, package: str, *importable: Path) -> tuple[set[str], bytes]:
    """The real server on stdio: initialize, tools/list, end of input; what it imported and what it answered."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", package],
        input=HANDSHAKE,
        cwd=out,
        env=server_env(out, *importable),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return imported_modules(done.stderr), done.stdout


def beyond_the_sdk(modules: set[str], sdk: set[str]) -> list[str]:
    """What the server imported that the SDK's baseline did not and that belongs to a path stdio never takes."""
    extra = modules - sdk
    return sorted(m for m in extra if any(m == p or m.startswith(p + ".") for p in NOT_ON_STDIO))


@pytest.fixture(scope="module")
def sdk() -> set[str]:
    return baseline()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "out"
    build(PLAIN_SPEC, out, handlers=PLAIN_HANDLERS)
    return out


def test_a_server_without_auth_does_not_import_the_verifiers_on_stdio(plain: Path, sdk: set[str]) -> None:
    modules, answers = stdio_run(plain, "plain_server", plain.parent)
    assert b'"note_get"' in answers  # it really served: the tools/list answer came back
    assert "plain_server.server" in modules and "plain_server._serving" in modules
    assert "plain_server._auth" not in modules
    assert "plain_server._http" not in modules  # the HTTP transport's module: imported only with --http
    assert beyond_the_sdk(modules, sdk) == []


def test_billing_with_auth_and_workflows_imports_no_http_or_auth_stack_on_stdio(tmp_path: Path, sdk: set[str]) -> None:
    out = tmp_path / "out"
    build(SPECS / "billing.toml", out)
    modules, answers = stdio_run(out, "billing_server")
    assert b'"invoice_get"' in answers
    assert "billing_server.state_store" in modules  # its workflows' memory store
    assert "billing_server.redis_store" not in modules
    assert beyond_the_sdk(modules, sdk) == []


def test_the_check_sees_what_auth_imports(plain: Path, sdk: set[str], tmp_path: Path) -> None:
    """The same comparison catches what a path does import: `--http --auth tokens` loads the verifiers and TOML."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nsha256 = "' + "0" * 64 + '"\nsubject = "s"\n', encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-X", "importtime", "-m", "plain_server", "--http", "--port", str(port)]
    command += ["--auth", "tokens", "--auth-tokens-file", str(tokens)]
    log = tmp_path / "stderr.txt"
    with log.open("w+b") as sink:
        process = subprocess.Popen(
            command, cwd=plain, env=server_env(plain, plain.parent), stdin=subprocess.DEVNULL, stderr=sink
        )
        try:
            wait_for_port(process, port, log=sink, what="plain_server --http")
        finally:
            stop(process)
    modules = imported_modules(log.read_bytes())
    assert "plain_server._auth" in modules
    assert "tomllib" in beyond_the_sdk(modules, sdk)


# --- the cyclic collector during start-up (the generated __init__) ---------------------------------------------

GC_REPORT = 'import atexit, gc, sys\natexit.register(lambda: print("gc", gc.isenabled(), gc.get_freeze_count() > 0))\n'


def test_started_with_dash_m_the_start_up_objects_are_frozen_and_collection_goes_on(
    plain: Path, tmp_path: Path
) -> None:
    """`python -m` pauses the collector for the package's imports and freezes what they made; after, it runs."""
    (tmp_path / "sitecustomize.py").write_text(GC_REPORT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "plain_server", "--help"],
        cwd=plain,
        env=server_env(plain, plain.parent, tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "gc True True"


def test_imported_the_package_leaves_the_collector_alone(plain: Path, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(GC_REPORT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", "import plain_server"],
        cwd=plain,
        env=server_env(plain, plain.parent, tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "gc True False"


# What pip writes for a `[project.scripts]` entry (its launcher template): the package is imported while
# sys.argv[0] is still the script's path.
CONSOLE_SCRIPT = """import re
import sys
from plain_server.__main__ import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


@pytest.mark.parametrize(("script", "frozen"), [("plain-server", True), ("other-server", False)])
def test_the_console_script_freezes_as_python_m_does(plain: Path, tmp_path: Path, script: str, frozen: bool) -> None:
    """Installed, the server starts as its console script (`plain-server`, the distribution's name): the same
    pause and freeze as `python -m`. A script of another name importing the package is a host: left alone."""
    (tmp_path / "sitecustomize.py").write_text(GC_REPORT, encoding="utf-8")
    launcher = tmp_path / "bin" / script
    launcher.parent.mkdir()
    launcher.write_text(CONSOLE_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(launcher), "--help"],
        cwd=plain,
        env=server_env(plain, plain.parent, tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"gc True {frozen}"
