"""The command line: `fusiongen build | check | validate`.

Exit codes: 0 success / up to date; 1 drift (check); 2 invalid spec or usage; 3 internal error.
User mistakes are printed as diagnostics on stderr; an internal error says it is one, never a bare
traceback (set FUSIONGEN_DEBUG=1 to see it).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from fusiongen import __version__
from fusiongen.diagnostics import Diagnostic, SpecError, sorted_diagnostics

EXIT_OK, EXIT_DRIFT, EXIT_INVALID, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Compile a TOML spec of models and tools into a standalone Python MCP server.",
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    text = "text"
    json = "json"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fusiongen {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """fusiongen: spec → standalone MCP server."""


def _print_diagnostics(diagnostics: list[Diagnostic], fmt: Format = Format.text) -> None:
    if fmt is Format.json:
        typer.echo(json.dumps([d.as_json() for d in sorted_diagnostics(diagnostics)], indent=2), err=True)
        return
    for diagnostic in sorted_diagnostics(diagnostics):
        typer.echo(diagnostic.format(), err=True)


def _guarded(run: Callable[[], int], fmt: Format = Format.text) -> None:
    """Run a command: diagnostics exit 2, anything unexpected is an internal error exiting 3."""
    try:
        code = run()
    except SpecError as exc:
        _print_diagnostics(exc.diagnostics, fmt)
        errors = sum(d.is_error for d in exc.diagnostics)
        typer.echo(f"{errors} error(s); nothing was written.", err=True)
        code = EXIT_INVALID
    except typer.Exit:
        raise
    except Exception as exc:
        typer.echo(f"fusiongen: internal error: {type(exc).__name__}: {exc}", err=True)
        typer.echo("This is a bug in fusiongen, not in your spec. Please report it with the spec that caused it.",
                   err=True)
        if os.environ.get("FUSIONGEN_DEBUG"):
            traceback.print_exc()
        code = EXIT_INTERNAL
    raise typer.Exit(code)


SpecArg = Annotated[Path, typer.Argument(help="The spec file (TOML).", show_default=False)]


@app.command()
def build(
    spec: SpecArg,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Output directory (default: the spec's folder).")]
    = None,
) -> None:
    """Generate OUT/<package>/ from SPEC, and scaffold or extend the handler module."""
    from fusiongen.handlers import append_stubs, handler_path, scaffold
    from fusiongen.output import publish, write_user_file
    from fusiongen.pipeline import display_path, generate

    def run() -> int:
        out_dir = out if out is not None else spec.parent
        generation = generate(spec, out_dir)
        published = publish(generation, out_dir)
        package = generation.ir.package
        typer.echo(f"{display_path(out_dir / package)}: {len(published.written)} written, "
                   f"{len(published.unchanged)} unchanged, {len(published.removed)} removed", err=True)
        handlers = handler_path(spec.parent, generation.ir.handlers_module)
        if not handlers.exists():
            write_user_file(handlers, scaffold(generation.ir))
            typer.echo(f"{display_path(handlers)}: scaffolded a stub per tool; implement them", err=True)
        else:
            extended = append_stubs(handlers.read_text(encoding="utf-8"), generation.ir)
            if extended is not None:
                write_user_file(handlers, extended)
                typer.echo(f"{display_path(handlers)}: appended stubs for new tools", err=True)
        return EXIT_OK

    _guarded(run)


@app.command()
def check(
    spec: SpecArg,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Output directory (default: the spec's folder).")]
    = None,
    fmt: Annotated[Format, typer.Option("--format", help="Diagnostics as text or JSON.")] = Format.text,
) -> None:
    """Exit 0 if OUT is what SPEC generates and every tool has a handler; 1 (with a diff) if not."""
    from fusiongen.pipeline import compare, generate, handler_diagnostics

    def run() -> int:
        out_dir = out if out is not None else spec.parent
        generation = generate(spec, out_dir)
        drift = compare(out_dir, generation.files, generation.header)
        problems = handler_diagnostics(generation)
        if not drift.clean:
            sys.stdout.write(drift.report())
            typer.echo(f"{spec}: generated code is out of date; run `fusiongen build {spec}"
                       + (f" -o {out}`" if out is not None else "`"), err=True)
        if problems:
            _print_diagnostics(problems, fmt)
        return EXIT_OK if drift.clean and not any(p.is_error for p in problems) else EXIT_DRIFT

    _guarded(run, fmt)


@app.command()
def validate(
    spec: SpecArg,
    fmt: Annotated[Format, typer.Option("--format", help="Diagnostics as text or JSON.")] = Format.text,
) -> None:
    """Print SPEC's diagnostics; exit 0 if it is valid, 2 if not."""
    from fusiongen.pipeline import validate as validate_spec

    def run() -> int:
        validate_spec(spec)
        return EXIT_OK

    _guarded(run, fmt)


def main() -> None:
    app()
