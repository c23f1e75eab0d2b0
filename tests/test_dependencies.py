"""Every import of a generated server declared, in the ranges the tests ran, and checked by the server itself.

The runtime's `_dependencies.py` is the one table: the generated `pyproject.toml` declares it (tested against the
golden projects), every third-party module the runtime imports belongs to a distribution in it (found through
the installed distributions' own metadata, not a list kept here), and the package refuses to import, naming the
distribution and the range, when an installed version is outside it. A distribution's version is what its
`.dist-info` says, so the out-of-range tests put a real `.dist-info` with another version first on the path of a
real server process. Last, `pip install` of a generated project into a fresh virtualenv brings everything the
server imports: every module of the package imports there and the installed console script answers initialize.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from fusiongen.api import init_project
from fusiongen.codegen.runtime_copy import declared_dependencies
from fusiongen.runtime import _dependencies
from tests.support.build import SPECS, build

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "fusiongen" / "runtime"
GOLDEN = ROOT / "golden"
TIMEOUT = 120
INSTALL_TIMEOUT = 900  # seconds: a fresh virtualenv, resolved from the local wheels and index, on a busy machine
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ONE_TOOL = """
[server]
name = "lookup"

[models.Item]
[models.Item.fields]
id = "string"
title = "string"

[tools."item.get"]
kind = "query"
description = "One item by id."
returns = "Item"
[tools."item.get".input]
id = "string"
"""


def third_party_imports() -> set[str]:
    """The top-level names of every module the runtime imports that is neither standard library nor its own."""
    names = set()
    for path in RUNTIME.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("__future__", "fusiongen")}


def declared_names() -> set[str]:
    required, extras = declared_dependencies()
    every = [*required, *(r for requirements in extras.values() for r in requirements)]
    return {r.partition(">")[0].partition("[")[0].lower() for r in every}


def test_every_third_party_module_the_runtime_imports_is_declared() -> None:
    providers = metadata.packages_distributions()
    imported = third_party_imports()
    assert {"mcp", "mcp_types", "anyio", "pydantic", "opentelemetry", "starlette", "uvicorn", "jwt"} <= imported
    declared = declared_names()
    for name in sorted(imported):
        distributions = {d.lower() for d in providers.get(name, [])}
        assert distributions, f"{name}: installed by no distribution in this environment"
        assert distributions & declared, f"the runtime imports {name} (from {distributions}); declare it"


def test_the_generated_projects_declare_the_runtime_table() -> None:
    required, extras = declared_dependencies()
    assert any(r.startswith("mcp>=2.3,<2.4") for r in required)  # the one minor the fast path was tested on
    for server in ("billing", "approval"):
        project = tomllib.loads((GOLDEN / server / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        assert project["dependencies"] == list(required)
        assert project["optional-dependencies"] == {extra: list(r) for extra, r in extras.items()}


def test_a_server_without_http_declares_none_of_what_only_http_imports() -> None:
    """`HTTP_EXTRAS` and `HTTP_DISTRIBUTIONS` name entries of the table (a rename cannot make the filter a no-op),
    and a server built without the http transport declares everything else, unchanged."""
    table = vars(_dependencies)
    required, extras = declared_dependencies()
    assert set(table["HTTP_EXTRAS"]) <= set(extras)
    for name in table["HTTP_DISTRIBUTIONS"]:
        assert any(r.startswith(f"{name}>=") for r in extras["fast"]), name
    stdio_required, stdio_extras = declared_dependencies(http=False)
    assert stdio_required == required
    assert set(stdio_extras) == set(extras) - set(table["HTTP_EXTRAS"])
    assert stdio_extras["fast"] == tuple(
        r for r in extras["fast"] if not r.startswith(tuple(f"{n}>=" for n in table["HTTP_DISTRIBUTIONS"]))
    )
    assert stdio_extras["fast"] and stdio_extras["otel"] == extras["otel"]


def test_a_server_without_workflows_declares_no_redis_extra(tmp_path: Path) -> None:
    build(ONE_TOOL, tmp_path / "out", handlers="def get_item(args):\n    return {'id': args.id, 'title': 'x'}\n")
    project = tomllib.loads((tmp_path / "out" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(project["optional-dependencies"]) == {"auth", "fast", "http", "otel"}


def installed_as(directory: Path, distribution: str, version: str) -> Path:
    """A `.dist-info` saying `distribution` is installed at `version`, in `directory` (put first on the path)."""
    info = directory / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    return directory


def run(args: list[str], *path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False, stdin=None
    )


@pytest.fixture(scope="module")
def billing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dependencies") / "out"
    build(SPECS / "billing.toml", out)
    return out


@pytest.mark.parametrize(("distribution", "version"), [("mcp", "2.4.0"), ("mcp", "2.2.1"), ("pydantic", "3.0.0")])
def test_an_sdk_outside_the_range_is_an_import_error_naming_it(
    billing: Path, tmp_path: Path, distribution: str, version: str
) -> None:
    fake = installed_as(tmp_path / "site", distribution, version)
    result = run(["-c", "import billing_server"], fake, billing)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: billing_server was generated and tested for "), result.stderr
    assert f"(installed: {distribution} {version})" in last
    wanted = next(r for r in declared_dependencies()[0] if r.startswith(f"{distribution}>="))
    assert wanted in last


def test_the_installed_versions_pass(billing: Path) -> None:
    result = run(["-c", "import billing_server; print('ok')"], billing)
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr


def test_an_extra_outside_its_range_is_a_usage_error_when_used(billing: Path, tmp_path: Path) -> None:
    fake = installed_as(tmp_path / "site", "uvicorn", "1.2.0")
    result = run(["-m", "billing_server", "--http", "--port", "1"], fake, billing)
    assert result.returncode == 2, result.stderr
    assert "--http" not in result.stdout
    assert "billing-server was generated and tested for uvicorn>=0.31.1,<1 (installed: uvicorn 1.2.0)" in (
        result.stderr
    )
    # stdio uses no uvicorn: the same environment serves it (EOF at once: a clean exit).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = f"{fake}{os.pathsep}{billing}"
    stdio = subprocess.run(
        [sys.executable, "-m", "billing_server"],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert stdio.returncode == 0, stdio.stderr


def test_pip_install_in_a_fresh_virtualenv_brings_everything_the_server_imports(tmp_path: Path) -> None:
    """The starter project `fusiongen init` writes, installed with pip alone into a new virtualenv (no site
    packages, nothing of this checkout): every module of the package imports, and the console script answers
    initialize over stdio."""
    project = tmp_path / "project"
    init_project(project, "lookup")
    declared = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (script,) = declared["scripts"]
    package = declared["scripts"][script].partition(".")[0]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    every_module = (
        "import importlib, pkgutil, sys; package = importlib.import_module(sys.argv[1]); "
        "[importlib.import_module(f'{sys.argv[1]}.{m.name}') for m in pkgutil.iter_modules(package.__path__)]; "
        "print(sorted(m for m in sys.modules if m.startswith(sys.argv[1] + '.')))"
    )
    imported = subprocess.run(
        [str(python), "-I", "-c", every_module, package],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    assert f"{package}._runtime" in imported.stdout and f"{package}.server" in imported.stdout
    served = subprocess.run(
        [str(venv / "bin" / script)],
        cwd=tmp_path,
        env=env,
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    answer = json.loads(served.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "lookup", answer
    check = subprocess.run(
        [str(python), "-m", "pip", "check"], env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert check.returncode == 0, check.stdout
