"""`fusiongen init`: a new project that builds, runs and passes its own test as created."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fusiongen.diagnostics import SpecError
from fusiongen.handlers import handler_path
from fusiongen.output import foreign_files, publish, write_user_file
from fusiongen.pipeline import display_path, generate
from fusiongen.render import environment
from fusiongen.spec import json_schema


class StarterError(Exception):
    pass


def _server_name(directory: Path, name: str | None) -> str:
    base = name or directory.resolve().name
    candidate = re.sub(r"[^a-z0-9_-]+", "-", base.lower()).strip("-_")
    if not candidate or not candidate[0].isalpha():
        candidate = f"server-{candidate}" if candidate else "notes"
    return candidate


def create_project(directory: Path, name: str | None) -> list[str]:
    """Write the starter files (never over existing ones), then build the server into `directory`."""
    server = _server_name(directory, name)
    package = server.replace("-", "_") + "_server"
    spec = directory / f"{server}.toml"
    files = {
        spec: environment().get_template("starter/spec.toml.j2").render(name=server),
        directory / f"{package}_handlers.py": environment()
        .get_template("starter/handlers.py.j2")
        .render(name=server, package=package),
        directory / f"test_{package}.py": environment()
        .get_template("starter/test.py.j2")
        .render(name=server, package=package),
        directory / "fusiongen.schema.json": json.dumps(json_schema(), indent=2, sort_keys=True) + "\n",
    }
    existing = [display_path(p) for p in files if p.exists()]
    if existing:
        from fusiongen.diagnostics import Diagnostic

        raise SpecError([Diagnostic("FG408", f"{p} already exists; init writes only new files", p) for p in existing])
    for path, text in files.items():
        write_user_file(path, text)
    try:
        generation = generate(spec, directory)
        foreign = foreign_files(generation, directory)
        if foreign:
            raise SpecError(foreign)
        publish(generation, directory)
    except BaseException:
        for path in files:  # leave the folder as it was: init either makes a working project or nothing
            path.unlink(missing_ok=True)
        raise
    assert handler_path(directory, generation.ir.handlers_module).exists()
    shown = display_path(directory)
    return [
        f"created {', '.join(display_path(p) for p in files)}",
        f"built {display_path(directory / package)}/",
        f"run it:   cd {shown} && python -m {package}          (stdio; add --http for HTTP)",
        f"test it:  cd {shown} && python -m pytest",
    ]
