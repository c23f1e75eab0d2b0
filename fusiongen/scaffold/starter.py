"""`fusiongen init`'s starter project: a spec, its handler module and a test that pass as created.

Pure: it decides names and renders texts; `fusiongen.api.init_project` writes them and builds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fusiongen import templating


@dataclass(frozen=True)
class Starter:
    """The starter project for one directory: its files (path → text) and the names they use."""

    spec: Path
    package: str
    files: dict[Path, str]


def server_name(directory: Path, name: str | None) -> str:
    """A valid server name from `name` or the folder's name."""
    base = name or directory.resolve().name
    candidate = re.sub(r"[^a-z0-9_-]+", "-", base.lower()).strip("-_")
    if not candidate or not candidate[0].isalpha():
        candidate = f"server-{candidate}" if candidate else "notes"
    return candidate


def _environment() -> jinja2.Environment:
    return templating.environment("fusiongen.scaffold")


def starter(directory: Path, name: str | None, schema_text: str) -> Starter:
    """The starter files for `directory`; `schema_text` is the spec language's JSON Schema, for editors."""
    server = server_name(directory, name)
    package = server.replace("-", "_") + "_server"
    spec = directory / f"{server}.toml"
    render = _environment().get_template
    files = {
        spec: render("spec.toml.j2").render(name=server),
        directory / f"{package}_handlers.py": render("handlers.py.j2").render(name=server, package=package),
        directory / f"test_{package}.py": render("test.py.j2").render(name=server, package=package),
        directory / "fusiongen.schema.json": schema_text,
    }
    return Starter(spec, package, files)
