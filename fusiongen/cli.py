"""The command line: `fusiongen build | check | validate | explain | diff`.

Exit codes: 0 success / up to date; 1 drift (check) or a breaking change (diff); 2 invalid spec or usage;
3 internal error; 4 exposure widened (diff).
User mistakes are printed as diagnostics on stderr; an internal error says it is one, never a bare
traceback (set FUSIONGEN_DEBUG=1 to see it).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from fusiongen import __version__
from fusiongen.diagnostics import Diagnostic, SpecError, display_path, sorted_diagnostics

EXIT_OK, EXIT_DRIFT, EXIT_INVALID, EXIT_INTERNAL = 0, 1, 2, 3


def _without_flag_metavars(params: list[Any]) -> list[Any]:
    """Flags take no value, so their help shows none: typer 0.29's rich help prints each flag's type
    (`--help <bool>`) unless it has a metavar, and an empty one renders as nothing. (Typer vendors its own
    click, hence its TyperOption rather than click.Option.)"""
    for param in params:
        if isinstance(param, typer.core.TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class _Group(typer.core.TyperGroup):
    """The app's group: its own flags (--version, --help) shown without a metavar."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_metavars(super().get_params(ctx))


class _Command(typer.core.TyperCommand):
    """Every command: its flags (--help) shown without a metavar."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_metavars(super().get_params(ctx))


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    help="Compile a TOML spec of models and tools into a standalone Python MCP server.",
    pretty_exceptions_enable=False,
)


class Format(StrEnum):
    text = "text"
    json = "json"


class ReportFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fusiongen {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """fusiongen: spec → standalone MCP server."""


def _print_diagnostics(diagnostics: list[Diagnostic], fmt: Format = Format.text) -> None:
    if fmt is Format.json:  # on stdout: it is the command's output, for CI annotations
        typer.echo(json.dumps([d.as_json() for d in sorted_diagnostics(diagnostics)], indent=2))
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
        typer.echo(
            "This is a bug in fusiongen, not in your spec. Please report it with the spec that caused it.", err=True
        )
        if os.environ.get("FUSIONGEN_DEBUG"):
            traceback.print_exc()
        code = EXIT_INTERNAL
    raise typer.Exit(code)


SpecsArg = Annotated[
    list[Path], typer.Argument(help="One or more specs: TOML files, or folders of them.", show_default=False)
]
SpecArg = Annotated[Path, typer.Argument(help="The spec: a TOML file, or a folder of them.", show_default=False)]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--out",
        help="Output directory. Default: beside the spec, in a folder named after it. "
        "With several specs, each goes to OUT/<spec name>.",
    ),
]
FormatOption = Annotated[Format, typer.Option("--format", help="Diagnostics as text, or JSON for CI annotations.")]


def out_dir_for(spec: Path, out: Path | None, several: bool) -> Path:
    """Where a spec's server goes: OUT, OUT/<stem> when building several, or without OUT `api.default_out`
    (<spec dir>/<stem>, or the spec's folder when `init` built the project there). A folder spec's goes to
    <folder>-build beside it: inside, its pyproject.toml would be among the spec's files."""
    if spec.is_dir():
        folder = spec.resolve()
        return out / folder.name if out is not None and several else out or folder.parent / f"{folder.name}-build"
    if out is None:
        from fusiongen.api import default_out

        return default_out(spec)
    return out / spec.stem if several else out


def _progress(index: int, total: int, spec: Path) -> str:
    return f"[{index}/{total}] {spec}: " if total > 1 else f"{spec}: "


@app.command(cls=_Command)
def build(
    specs: SpecsArg,
    out: OutOption = None,
    budget: Annotated[
        bool,
        typer.Option(
            "--budget",
            help="Print each tool's tools/list size and worst-case result size (bytes, tokens as bytes / 4).",
        ),
    ] = False,
) -> None:
    """Generate each server (OUT/<package>/, pyproject.toml, README.md, EXPOSURE.md); scaffold or extend its
    handler module."""
    from fusiongen import api

    def run() -> int:
        failed = 0
        for index, spec in enumerate(specs, 1):
            prefix = _progress(index, len(specs), spec)
            out_dir = out_dir_for(spec, out, len(specs) > 1)
            try:
                result = api.build(spec, out_dir)
            except SpecError as exc:
                _print_diagnostics(exc.diagnostics)
                typer.echo(
                    f"{prefix}{sum(d.is_error for d in exc.diagnostics)} error(s); nothing was written.", err=True
                )
                failed += 1
                continue
            _print_diagnostics(result.generation.warnings)
            published = result.published
            typer.echo(
                f"{prefix}{display_path(out_dir)}: {len(published.written)} written, "
                f"{len(published.unchanged)} unchanged, {len(published.removed)} removed",
                err=True,
            )
            if result.handlers_note is not None:
                typer.echo(f"{prefix}{display_path(result.handlers)}: {result.handlers_note}", err=True)
            if result.handler_problems:
                _print_diagnostics(result.handler_problems)
                typer.echo(
                    f"{prefix}{len(result.handler_problems)} handler problem(s): the server was written, "
                    "but it cannot call these handlers",
                    err=True,
                )
                failed += 1
            if budget:
                sys.stdout.write(api.budget_text(result.generation.ir))
        return EXIT_INVALID if failed else EXIT_OK

    _guarded(run)


@app.command(cls=_Command)
def check(specs: SpecsArg, out: OutOption = None, fmt: FormatOption = Format.text) -> None:
    """Exit 0 if each OUT is what its spec generates and every tool has a handler; 1 (with a diff) if not."""
    from fusiongen import api

    def run() -> int:
        annotations: list[Diagnostic] = []
        drifted = False
        for spec in specs:
            out_dir = out_dir_for(spec, out, len(specs) > 1)
            result = api.check(spec, out_dir)
            annotations += result.problems
            if not result.drift.clean:
                annotations += result.drift.annotations(out_dir)
                if fmt is Format.text:
                    sys.stdout.write(result.drift.report())
                    typer.echo(
                        f"{spec}: generated code is out of date; run `fusiongen build {spec}"
                        + (f" -o {out_dir}`" if out is not None else "`"),
                        err=True,
                    )
            if fmt is Format.text:
                _print_diagnostics(result.problems)
            drifted = drifted or result.failed
        if fmt is Format.json:
            typer.echo(json.dumps([d.as_json() for d in annotations], indent=2))
        return EXIT_DRIFT if drifted else EXIT_OK

    _guarded(run, fmt)


@app.command(cls=_Command)
def validate(spec: SpecArg, fmt: FormatOption = Format.text) -> None:
    """Print SPEC's diagnostics; exit 0 if it is valid (warnings allowed), 2 if not."""
    from fusiongen.api import validate as validate_spec

    def run() -> int:
        _, _, warnings = validate_spec(spec)
        if warnings or fmt is Format.json:
            _print_diagnostics(warnings, fmt)
        return EXIT_OK

    _guarded(run, fmt)


@app.command(cls=_Command)
def explain(
    spec: SpecArg,
    fmt: Annotated[
        ReportFormat, typer.Option("--format", help="text for a terminal, json for tools, markdown as EXPOSURE.md.")
    ] = ReportFormat.text,
) -> None:
    """Print what each tool lets the model see: fields, redactions, hidden fields, rules, suggestions, states."""
    from fusiongen.api import explain as explain_spec
    from fusiongen.api import exposure_text

    def run() -> int:
        _, report, warnings = explain_spec(spec)
        _print_diagnostics(warnings)
        sys.stdout.write(exposure_text(report, fmt.value))
        return EXIT_OK

    _guarded(run)


@app.command(cls=_Command)
def diff(
    specs: Annotated[
        list[Path],
        typer.Argument(help="OLD_SPEC NEW_SPEC, or only NEW_SPEC with --git.", show_default=False),
    ],
    git: Annotated[
        str | None, typer.Option("--git", metavar="REV", help="OLD is NEW_SPEC as committed at this git revision.")
    ] = None,
    fmt: FormatOption = Format.text,
) -> None:
    """Classify what changes for clients and the model: exit 1 breaking, 4 exposure widened, 0 neither."""
    from fusiongen.api import diff_exit_code, diff_specs, diff_text

    def run() -> int:
        if len(specs) != (1 if git is not None else 2):
            typer.echo("fusiongen diff: give OLD_SPEC NEW_SPEC, or --git REV NEW_SPEC", err=True)
            return EXIT_INVALID
        changes = diff_specs(specs[0] if git is None else None, specs[-1], revision=git)
        sys.stdout.write(diff_text(changes, fmt.value))
        return diff_exit_code(changes)

    _guarded(run, fmt)


@app.command(cls=_Command)
def schema(
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Write to this file instead of stdout.")] = None,
    part: Annotated[
        bool, typer.Option("--part", help="The schema of one file of a folder spec: [server] is optional.")
    ] = False,
) -> None:
    """Print the JSON Schema of the spec language (for editors: taplo / Even Better TOML `#:schema`)."""
    from fusiongen.api import schema_text, write_schema

    def run() -> int:
        if out is None:
            sys.stdout.write(schema_text(part=part))
        else:
            write_schema(out, part=part)
        return EXIT_OK

    _guarded(run)


@app.command(cls=_Command)
def init(
    directory: Annotated[Path, typer.Argument(help="The new project's folder (created).")] = Path("."),
    name: Annotated[str | None, typer.Option(help="Server name (default: from the folder name).")] = None,
) -> None:
    """Start a project: a spec, its handler module and a test, then build the server beside them."""
    from fusiongen.api import init_project

    def run() -> int:
        for line in init_project(directory, name):
            typer.echo(line, err=True)
        return EXIT_OK

    _guarded(run)


class Document(StrEnum):
    spec = "spec"
    openapi = "openapi"
    ecosystem = "ecosystem"
    architecture = "architecture"
    changelog = "changelog"


DOCUMENT_FILES = {
    Document.spec: "spec.md",
    Document.openapi: "openapi.md",
    Document.ecosystem: "ecosystem.md",
    Document.architecture: "architecture.md",
    Document.changelog: "CHANGELOG.md",
}


def document_path(document: Document) -> Path | None:
    """Where an installed fusiongen keeps a document: `fusiongen/docs/` in a wheel (pyproject.toml ships them
    there), or the checkout's `docs/` (and its root, for the changelog) for an editable install."""
    package = Path(__file__).resolve().parent
    name = DOCUMENT_FILES[document]
    for candidate in (package / "docs" / name, package.parent / "docs" / name, package.parent / name):
        if candidate.is_file():
            return candidate
    return None


@app.command(cls=_Command)
def docs(
    document: Annotated[Document, typer.Argument(help="Which document.")] = Document.spec,
    path: Annotated[bool, typer.Option("--path", help="Print where the file is instead of its text.")] = False,
) -> None:
    """Read fusiongen's documentation as installed: the reference (spec), openapi, ecosystem, architecture or
    the changelog. Paged on a terminal, printed otherwise (`fusiongen docs spec | less`)."""

    def run() -> int:
        found = document_path(document)
        if found is None:
            typer.echo(f"fusiongen: {DOCUMENT_FILES[document]} is not installed with this fusiongen", err=True)
            return EXIT_INTERNAL
        if path:
            typer.echo(str(found))
        elif sys.stdout.isatty():
            import pydoc  # the standard library's pager: $MANPAGER, $PAGER or less, as `help()` pages

            pydoc.pager(found.read_text(encoding="utf-8"))
        else:
            sys.stdout.write(found.read_text(encoding="utf-8"))
        return EXIT_OK

    _guarded(run)


@app.command(cls=_Command)
def inspect(
    spec: SpecArg,
    inspector_args: Annotated[
        list[str] | None,
        typer.Argument(
            help="After --: the Inspector's own options, e.g. --method tools/call --tool-name T "
            "--tool-args-json '{...}'.",
            show_default=False,
        ),
    ] = None,
    out: OutOption = None,
    url: Annotated[
        str | None, typer.Option("--url", help="Inspect a server already serving HTTP here (…/mcp), not stdio.")
    ] = None,
    inspector: Annotated[
        str | None,
        typer.Option(
            "--inspector",
            help="The Inspector command (default: $FUSIONGEN_INSPECTOR, else npx -y "
            "@modelcontextprotocol/inspector@2.12.0).",
        ),
    ] = None,
) -> None:
    """Run the MCP Inspector's CLI against the server built from SPEC, in the 2026-07-28 era (every tool
    listed; workflows walked by handle). One Inspector call per run: docs/spec.md §11.9."""
    import shlex
    import subprocess

    from fusiongen.api import INSPECTOR, inspection

    def run() -> int:
        command = inspector or os.environ.get("FUSIONGEN_INSPECTOR")
        planned = inspection(
            spec,
            out_dir_for(spec, out, False),
            url=url,
            inspector=shlex.split(command) if command else INSPECTOR,
            python=sys.executable,
            inspector_args=inspector_args or [],
        )
        typer.echo(f"fusiongen: {planned.note}", err=True)
        try:
            return subprocess.run(planned.argv, cwd=planned.cwd, env={**os.environ, **planned.env}).returncode
        except FileNotFoundError:
            typer.echo(
                f"fusiongen: cannot run {planned.argv[0]!r}: install Node.js (for npx), or pass --inspector",
                err=True,
            )
            return EXIT_INVALID

    _guarded(run)


import_app = typer.Typer(no_args_is_help=True, help="Start a spec from a document another tool wrote.")
app.add_typer(import_app, name="import")


@import_app.command("openapi")
def import_openapi(
    document: Annotated[Path, typer.Argument(help="The OpenAPI 3.0/3.1 document (YAML or JSON).", show_default=False)],
    out: Annotated[Path, typer.Option("-o", "--out", help="The spec to write, or to update (its import region).")],
    handlers: Annotated[
        str | None, typer.Option("--handlers", help='"http": also write a handler module calling the API with httpx.')
    ] = None,
    tags: Annotated[str | None, typer.Option("--tags", help="Only operations with one of these tags (a,b).")] = None,
    include_ops: Annotated[
        str | None, typer.Option("--include-ops", help="Only operations whose operationId matches this regex.")
    ] = None,
    exclude_tags: Annotated[
        str | None, typer.Option("--exclude-tags", help="Not the operations with one of these tags (a,b).")
    ] = None,
    exclude_ops: Annotated[
        str | None, typer.Option("--exclude-ops", help="Not the operations whose operationId matches this regex.")
    ] = None,
    paths: Annotated[
        str | None, typer.Option("--paths", help="Only operations whose path matches one of these globs (/repos/*,…).")
    ] = None,
    exclude_paths: Annotated[
        str | None, typer.Option("--exclude-paths", help="Not the operations whose path matches one of these globs.")
    ] = None,
    methods: Annotated[
        str | None, typer.Option("--methods", help="Only operations of these HTTP methods (get,post).")
    ] = None,
    exclude_methods: Annotated[
        str | None, typer.Option("--exclude-methods", help="Not the operations of these HTTP methods (delete).")
    ] = None,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact", help="A small view for a large API: summaries, no error boilerplate, no output schemas."
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Every warning, not only the first few of each code.")
    ] = False,
) -> None:
    """Write (or update) a spec from an OpenAPI document; warn, by JSON pointer, about what it cannot say."""
    from fusiongen.api import import_openapi as run_import

    def listed(text: str | None, *, lower: bool = False) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(p.strip().lower() if lower else p.strip() for p in (text or "").split(",") if p.strip())
        )

    def run() -> int:
        if handlers not in (None, "http"):
            typer.echo(f'fusiongen: --handlers must be "http", not {handlers!r}', err=True)
            return EXIT_INVALID
        result = run_import(
            document,
            out,
            tags=frozenset(listed(tags)),
            include_ops=include_ops,
            http_handlers=handlers == "http",
            exclude_tags=frozenset(listed(exclude_tags)),
            exclude_ops=exclude_ops,
            paths=listed(paths),
            exclude_paths=listed(exclude_paths),
            methods=frozenset(listed(methods, lower=True)),
            exclude_methods=frozenset(listed(exclude_methods, lower=True)),
            compact=compact,
        )
        _print_summarised([*result.warnings, *result.spec_warnings], verbose=verbose)
        typer.echo(f"{display_path(result.spec)}: written; {len(result.warnings)} simplification(s) reported", err=True)
        if result.handlers is not None:
            typer.echo(f"{display_path(result.handlers)}: {result.handlers_note}", err=True)
        return EXIT_OK

    _guarded(run)


SHOWN_PER_CODE = 3  # warnings of one code printed in full without --verbose (a large API has 1,000 of FG335)


def _print_summarised(diagnostics: list[Diagnostic], *, verbose: bool) -> None:
    """Every error; of each warning code, the first SHOWN_PER_CODE in full (all with `verbose`), then one
    summary line per code with its count, most frequent first."""
    ordered = sorted_diagnostics(diagnostics)
    counts = Counter(d.code for d in ordered if not d.is_error)
    shown: Counter[str] = Counter()
    for diagnostic in ordered:
        if not diagnostic.is_error and not verbose:
            shown[diagnostic.code] += 1
            if shown[diagnostic.code] > SHOWN_PER_CODE:
                continue
        typer.echo(diagnostic.format(), err=True)
    if counts and (verbose or any(n > SHOWN_PER_CODE for n in counts.values())):
        typer.echo("warnings by code:", err=True)
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            hidden = "" if verbose or count <= SHOWN_PER_CODE else f" ({count - SHOWN_PER_CODE} not shown: --verbose)"
            typer.echo(f"  {code}: {count}{hidden}", err=True)


def main() -> None:
    app()
