"""The command line end to end: `fusiongen build | check | validate` run as subprocesses on copies of the
reference spec in a temp dir. In-process (typer's CliRunner) only to set tests up, to simulate an internal
error, and for a few cheap cases."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from fusiongen import __version__
from fusiongen.cli import app

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "billing.toml"
HANDLERS = ROOT / "specs" / "billing_handlers.py"
OLD = 1_000_000_000  # an mtime (2001) no build could produce


# --- helpers ---------------------------------------------------------------------------------------

def fusiongen(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fusiongen", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def spec_text(**server: str) -> str:
    """The reference spec with some `[server]` values replaced (package=..., handlers=...)."""
    text = SPEC.read_text(encoding="utf-8")
    for key, value in server.items():
        text, count = re.subn(rf'^{key} = ".*"$', f'{key} = "{value}"', text, count=1, flags=re.M)
        assert count == 1, key
    return text


def project(folder: Path, *, handlers: bool = True, **server: str) -> Path:
    """A spec (and, unless told otherwise, its finished handler module) in `folder`; returns the spec."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "billing.toml"
    spec.write_text(spec_text(**server), encoding="utf-8")
    if handlers:
        module, package = server.get("handlers", "billing_handlers"), server.get("package", "billing_server")
        text = HANDLERS.read_text(encoding="utf-8").replace("billing_server.", f"{package}.")
        (folder / f"{module}.py").write_text(text, encoding="utf-8")
    return spec


def invalid(spec: Path) -> None:
    """Break the spec: an unknown field type."""
    text = spec.read_text(encoding="utf-8")
    assert 'sku = "string"' in text
    spec.write_text(text.replace('sku = "string"', 'sku = "strng"'), encoding="utf-8")


def rename_package(spec: Path, package: str) -> None:
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace('package = "billing_server"', f'package = "{package}"'), encoding="utf-8")


def tree(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` (bytecode caches aside), by POSIX path."""
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def mtimes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def age(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))


def staging_leftovers(folder: Path) -> list[str]:
    return [p.as_posix() for p in folder.rglob("*") if p.name.startswith(".fusiongen")]


def json_document(*streams: str) -> list[dict[str, object]]:
    """The stream that carries the JSON diagnostics (whichever it is), parsed whole."""
    carrying = [s for s in streams if s.lstrip().startswith("[")]
    assert len(carrying) == 1, streams
    document = json.loads(carrying[0])
    assert isinstance(document, list)
    return document


def in_process(*args: str | Path) -> Result:
    """The CLI in-process, to keep the suite fast: to set tests up, for known bugs and trivial cases."""
    return CliRunner().invoke(app, [str(a) for a in args])


def setup_build(spec: Path, out: Path) -> None:
    result = in_process("build", spec, "-o", out)
    assert result.exit_code == 0, result.output


def built(tmp_path: Path, **server: str) -> tuple[Path, Path]:
    """A project whose output `out/` is up to date."""
    spec = project(tmp_path, **server)
    setup_build(spec, tmp_path / "out")
    return spec, tmp_path / "out"


# --- version, validate ------------------------------------------------------------------------------

def test_version() -> None:
    result = fusiongen("--version", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert __version__ in result.stdout


def test_validate_valid_spec_prints_nothing_and_writes_nothing(tmp_path: Path) -> None:
    spec = project(tmp_path, handlers=False)
    before = tree(tmp_path)
    result = in_process("validate", spec)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == ""
    assert tree(tmp_path) == before  # no package, no handler scaffold


def test_validate_invalid_spec_prints_diagnostics(tmp_path: Path) -> None:
    spec = project(tmp_path, handlers=False)
    invalid(spec)
    line = spec.read_text(encoding="utf-8").splitlines().index('sku = "strng"') + 1
    before = tree(tmp_path)
    result = fusiongen("validate", spec.name, cwd=tmp_path)
    assert result.returncode == 2
    assert re.search(rf"^billing\.toml:{line}:\d+: error\[FG110\]: .*strng", result.stderr, re.M), \
        result.stderr
    assert "Traceback" not in result.stderr
    assert tree(tmp_path) == before


# --- build ----------------------------------------------------------------------------------------

def test_failed_build_writes_nothing(tmp_path: Path) -> None:
    spec = project(tmp_path, handlers=False)
    invalid(spec)
    before = tree(tmp_path)
    result = fusiongen("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "error[FG110]" in result.stderr
    assert "Traceback" not in result.stderr
    assert tree(tmp_path) == before  # no out/, no handler scaffold
    assert staging_leftovers(tmp_path) == []


def test_failed_rebuild_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    spec, _ = built(tmp_path)
    age(tmp_path)
    # A package change that would remove the old package, in a spec that is invalid.
    rename_package(spec, "ledger_server")
    invalid(spec)
    (tmp_path / "billing_handlers.py").unlink()
    before, before_times = tree(tmp_path), mtimes(tmp_path)
    result = fusiongen("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert tree(tmp_path) == before
    assert mtimes(tmp_path) == before_times
    assert staging_leftovers(tmp_path) == []


def test_rebuild_removes_what_the_spec_no_longer_generates_and_nothing_else(tmp_path: Path) -> None:
    spec, out = built(tmp_path)
    generated = sorted(tree(out / "billing_server"))
    other = project(tmp_path / "other", package="other_server", handlers="other_handlers")
    setup_build(other, out)
    user_files = {
        out / "billing_server" / "NOTES.md": b"mine\r\nno final newline",
        out / "README.txt": b"# Code generated by hand\n",
        out / "tools" / "helper.py": b"x = 1\n",
    }
    for path, data in user_files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    age(out)
    other_tree, other_times = tree(out / "other_server"), mtimes(out / "other_server")

    rename_package(spec, "ledger_server")
    result = fusiongen("build", spec.name, "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    assert sorted(tree(out / "ledger_server")) == generated
    assert sorted(tree(out / "billing_server")) == ["NOTES.md"]  # the generated files are gone
    for path, data in user_files.items():
        assert path.read_bytes() == data, path
        assert path.stat().st_mtime_ns == OLD * 10**9, path
    assert tree(out / "other_server") == other_tree
    assert mtimes(out / "other_server") == other_times
    assert staging_leftovers(tmp_path) == []


def test_rebuild_rewrites_only_what_changed(tmp_path: Path) -> None:
    spec = project(tmp_path)
    out = tmp_path / "gen" / "deep"
    setup_build(spec, out)
    first = tree(out)
    tools = out / "billing_server" / "tools.py"
    tools.write_bytes(tools.read_bytes() + b"# an edit\n")
    age(out)
    result = fusiongen("build", spec.name, "-o", "gen/deep", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"1 written, {len(first) - 1} unchanged, 0 removed" in result.stderr
    assert tree(out) == first  # byte-identical to the first run
    for path, data in first.items():  # the spec's path, seen from OUT
        assert data.startswith(b"# Code generated by fusiongen from ../../billing.toml. DO NOT EDIT.\n"), path
    times = mtimes(out)
    assert times.pop("billing_server/tools.py") != OLD * 10**9
    assert set(times.values()) == {OLD * 10**9}


def test_build_output_is_clean_reproducible_and_independent_of_the_hash_seed(tmp_path: Path) -> None:
    """Three builds (default OUT: the spec's folder), each under another PYTHONHASHSEED and run from an
    unrelated working directory, give byte-identical trees; every generated file is clean."""
    seeds = ("0", "1", "12345")
    runs = []
    for seed in seeds:
        spec = project(tmp_path / seed / "proj", handlers=False)  # each also scaffolds its handler module
        (tmp_path / seed / "cwd").mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed}
        runs.append(subprocess.Popen([sys.executable, "-m", "fusiongen", "build", str(spec)],
                                     cwd=tmp_path / seed / "cwd", env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE))
    for run in runs:
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
    trees = [tree(tmp_path / seed / "proj") for seed in seeds]
    assert trees[0] == trees[1] == trees[2]
    package = sorted(p for p in trees[0] if p.startswith("billing_server/"))
    assert sorted(trees[0]) == sorted(["billing.toml", "billing_handlers.py", *package])
    assert {"billing_server/__init__.py", "billing_server/server.py"} <= set(package)
    for seed in seeds:
        assert list((tmp_path / seed / "cwd").iterdir()) == []
    assert staging_leftovers(tmp_path) == []

    header = b"# Code generated by fusiongen from billing.toml. DO NOT EDIT.\n"
    forbidden = {str(tmp_path), os.path.realpath(tmp_path), str(ROOT), os.path.realpath(ROOT)}
    for path in package:
        data = trees[0][path]
        assert data.startswith(header), path
        assert data.endswith(b"\n") and not data.endswith(b"\n\n"), path
        assert b"\r" not in data, path
        for absolute in forbidden:
            assert absolute.encode() not in data, f"{path} contains the absolute path {absolute}"

    check = fusiongen("check", tmp_path / "0" / "proj" / "billing.toml", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout == ""


# --- check ----------------------------------------------------------------------------------------

def test_check_reports_changed_missing_and_stale_files(tmp_path: Path) -> None:
    spec, out = built(tmp_path)
    package = out / "billing_server"
    tools = package / "tools.py"
    lines = tools.read_text(encoding="utf-8").splitlines(keepends=True)
    edited = next(i for i, line in enumerate(lines) if line.startswith(("def ", "async def ")))
    original = lines[edited]
    lines[edited] = "def tampered():\n"
    tools.write_text("".join(lines), encoding="utf-8")
    (package / "shapes.py").unlink()
    header = (package / "server.py").read_text(encoding="utf-8").splitlines(keepends=True)[0]
    (package / "legacy.py").write_text(header + "x = 1\n", encoding="utf-8")
    before = tree(tmp_path)

    result = fusiongen("check", spec.name, "-o", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "--- billing_server/tools.py" in result.stdout
    assert "+++ billing_server/tools.py" in result.stdout
    assert "\n-def tampered():\n" in result.stdout
    assert f"\n+{original}" in result.stdout
    assert re.search(r"^missing: billing_server/shapes\.py\b", result.stdout, re.M), result.stdout
    assert re.search(r"^stale: billing_server/legacy\.py\b", result.stdout, re.M), result.stdout
    for untouched in ("server.py", "inputs.py"):
        assert f"billing_server/{untouched}" not in result.stdout
    assert tree(tmp_path) == before  # check writes nothing


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("check", "invalid.toml", "-o", "out"), r"invalid\.toml:\d+:\d+: error\[FG110\]"),
        (("check", "nonexistent.toml", "-o", "out"), r"nonexistent\.toml:\d+:\d+: error\[FG002\]"),
        (("check", "billing.toml", "--bogus"), r"No such option"),
    ],
    ids=["invalid-spec", "nonexistent-spec", "unknown-option"],
)
def test_check_invalid_spec_or_usage_exits_2(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    spec = project(tmp_path)
    shutil.copy(spec, tmp_path / "invalid.toml")
    invalid(tmp_path / "invalid.toml")
    result = fusiongen(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert re.search(expected, result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_check_format_json(tmp_path: Path) -> None:
    spec, _ = built(tmp_path)
    handlers = tmp_path / "billing_handlers.py"
    handlers.write_text(handlers.read_text(encoding="utf-8").replace("def get_customer(", "def customer("),
                        encoding="utf-8")
    result = fusiongen("check", spec.name, "-o", "out", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1
    diagnostics = json_document(result.stdout, result.stderr)
    assert [d["code"] for d in diagnostics] == ["FG400"]
    assert diagnostics[0]["file"] == "billing.toml"
    assert diagnostics[0]["severity"] == "error"
    assert "get_customer" in diagnostics[0]["message"]
    assert {"line", "col", "hint"} <= diagnostics[0].keys()


@pytest.mark.xfail(strict=True, reason="with --format json, an invalid spec's JSON array is followed by the "
                                       "text line '1 error(s); nothing was written.' on the same stream "
                                       "(stderr), so that stream does not parse as JSON")
def test_check_format_json_invalid_spec_is_only_json(tmp_path: Path) -> None:
    spec = project(tmp_path)
    invalid(spec)
    result = in_process("check", spec, "-o", tmp_path / "out", "--format", "json")
    assert result.exit_code == 2
    diagnostics = json_document(result.stdout, result.stderr)
    assert [d["code"] for d in diagnostics] == ["FG110"]


# --- internal errors (in-process: a pipeline function is made to fail) -----------------------------

@pytest.mark.parametrize("debug", [False, True], ids=["plain", "FUSIONGEN_DEBUG"])
@pytest.mark.parametrize("command", ["build", "check"])
def test_internal_error_exits_3_without_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   command: str, debug: bool) -> None:
    import fusiongen.pipeline

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kaboom")

    spec = project(tmp_path)
    before = tree(tmp_path)
    monkeypatch.setattr(fusiongen.pipeline, "generate", explode)
    if debug:
        monkeypatch.setenv("FUSIONGEN_DEBUG", "1")
    else:
        monkeypatch.delenv("FUSIONGEN_DEBUG", raising=False)
    result = in_process(command, spec, "-o", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert "internal error" in result.output
    assert "kaboom" in result.output
    assert ("Traceback" in result.output) is debug
    assert tree(tmp_path) == before
