"""The pipeline, in order: load → lower → render → tidy → parse-check, then write or compare.

`validate` and `generate` are pure apart from reading the spec (and running the pinned ruff on
stdin/stdout); `build` and `init_project` are the only functions that write, through
`fusiongen.output`. Paths written into generated files are relative to the output directory, so a
build is reproducible wherever the checkout lives. The CLI is a thin layer over these functions.

Rendering, scaffolding and the OpenAPI importer (libcst, Jinja) are imported by the functions that use them:
`fusiongen validate`, which needs none of them, starts in half the time (editors and CI run it on every save;
the case corpus runs it once per case).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst

from fusiongen.codegen.budget import ToolBudget, budget_table, exposition_line, tool_budgets
from fusiongen.codegen.formatting import tidy_files
from fusiongen.codegen.result_budget import ResultBudget, Unbounded, result_budgets
from fusiongen.codegen.runtime_copy import shipped_copies
from fusiongen.diagnostics import Diagnostic, Position, Severity, SpecError, display_path
from fusiongen.ir import EffectIR, ServerIR, ToolIR
from fusiongen.load.folder import load_path
from fusiongen.load.loader import LoadedSpec
from fusiongen.load.revision import git_show, spec_at_revision
from fusiongen.load.spec import json_schema
from fusiongen.lower.constraints import pattern_problem
from fusiongen.lower.fields import value_refused
from fusiongen.lower.server import lower
from fusiongen.output.drift import Drift, compare
from fusiongen.output.publish import Bundle, Published, foreign_files, publish_bundle, write_user_file
from fusiongen.report import diff as diff_report
from fusiongen.report import exposure as exposure_report
from fusiongen.report.diff import Change, diff
from fusiongen.report.exposure import Report, as_markdown, exposure

__all__ = [
    "BuildResult",
    "CheckResult",
    "Generation",
    "budget_text",
    "build",
    "check",
    "compare",
    "diff_exit_code",
    "diff_specs",
    "diff_text",
    "display_path",
    "explain",
    "exposure_text",
    "generate",
    "handler_diagnostics",
    "import_openapi",
    "init_project",
    "json_schema",
    "publish",
    "schema_text",
    "validate",
    "write_schema",
]


@dataclass(frozen=True)
class Generation:
    loaded: LoadedSpec
    ir: ServerIR
    files: dict[str, str]
    headers: tuple[str, ...]  # the first line of every file this spec generates: marks which files it owns
    warnings: list[Diagnostic]

    @property
    def bundle(self) -> Bundle:
        return Bundle(self.files, self.headers, self.loaded.file_at("server"), self.loaded.key_at("server"))


EXPOSURE_FILE = "EXPOSURE.md"


def explain(spec_path: Path) -> tuple[ServerIR, Report, list[Diagnostic]]:
    """The exposure report of a valid spec (`fusiongen explain`), and its warnings."""
    _, ir, warnings = validate(spec_path)
    return ir, exposure(ir), warnings


def diff_specs(old_spec: Path | None, new_spec: Path, *, revision: str | None = None) -> list[Change]:
    """What changes for clients and the model from `old_spec` (or `new_spec` as of git `revision`) to `new_spec`."""
    if revision is None:
        if old_spec is None:
            raise ValueError("diff needs an old spec or a revision")
        _, old_ir, _ = validate(old_spec)
    else:
        with tempfile.TemporaryDirectory(prefix="fusiongen-diff-") as folder:
            copy = spec_at_revision(new_spec, revision, Path(folder))
            shown = f"{display_path(new_spec)}@{revision}"
            _handlers_at_revision(new_spec, revision, copy, shown)
            _, old_ir, _ = validate(copy, shown=shown)
    _, new_ir, _ = validate(new_spec)
    return diff(old_ir, new_ir)


def _handlers_at_revision(spec: Path, revision: str, copy: Path, shown: str) -> None:
    """Put the handler module as committed at `revision` beside the spec's copy, so the old IR's effects are
    those of the old handlers (none copied if the spec does not lower, or the module was not committed)."""
    try:
        ir, _ = lower(load_path(copy, shown))
    except SpecError:
        return  # validate reports it
    folder = spec if spec.is_dir() else spec.parent if str(spec.parent) else Path(".")  # a folder spec: itself
    parts = ir.handlers_module.split(".")
    for candidate in ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"])):
        try:
            text = git_show(folder, revision, candidate)
        except SpecError:
            continue
        target = (copy if copy.is_dir() else copy.parent) / candidate
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text)
        return


def exposure_text(report: Report, fmt: str) -> str:
    """The exposure report as `text`, `json` or `markdown`."""
    renderers = {"text": exposure_report.as_text, "json": exposure_report.as_json, "markdown": as_markdown}
    return renderers[fmt](report)


def diff_text(changes: list[Change], fmt: str) -> str:
    """The changes as `text` or `json`."""
    return diff_report.as_json(changes) if fmt == "json" else diff_report.as_text(changes)


def diff_exit_code(changes: list[Change]) -> int:
    return diff_report.exit_code(changes)


def relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def validate(spec_path: Path, *, shown: str | None = None) -> tuple[LoadedSpec, ServerIR, list[Diagnostic]]:
    """Load and lower a spec: raises SpecError on errors, returns the warnings otherwise. `shown` is how
    diagnostics name the file (default: its path, as the user sees it)."""
    loaded = load_path(spec_path, shown if shown is not None else display_path(spec_path))
    ir, warnings = lower(loaded)
    ir, refused = with_effects(loaded, ir)
    over, unbounded = over_budget(loaded, ir)
    if over or refused:
        raise SpecError([*warnings, *refused, *over, *unbounded])
    return loaded, ir, [*warnings, *unbounded]


def with_effects(loaded: LoadedSpec, ir: ServerIR) -> tuple[ServerIR, list[Diagnostic]]:
    """The IR with what each handler can do (`scaffold.effects`, read from the handler module's text; nothing
    when the module is not beside the spec or does not parse: `check` and `build` report that), and FG420 /
    FG421 for a query whose handler can write, execute, or escapes the analysis."""
    from fusiongen.scaffold.effects import analyse
    from fusiongen.scaffold.handlers import handler_path, parse_handlers

    path = handler_path(loaded.home, ir.handlers_module)
    relative_path = path.relative_to(loaded.home).as_posix()
    # Absent, it is what `build` scaffolds: stubs, which do nothing; the report is then the same before and after.
    module = (
        parse_handlers(path.read_bytes().decode("utf-8", "replace"), display_path(path))
        if path.is_file()
        else libcst.Module(body=[])
    )
    if isinstance(module, Diagnostic):
        return replace(ir, handlers_file=relative_path), []
    found = analyse(module, ir.package)

    def read(tool: ToolIR) -> ToolIR:
        return replace(tool, effects=found.of(tool.handler))

    ir = replace(
        ir,
        tools=tuple(read(t) for t in ir.tools),
        resources=tuple(replace(r, tool=read(r.tool)) for r in ir.resources),
        handlers_file=relative_path,
    )
    shown = (Path(loaded.home_display) / relative_path).as_posix()
    refused = [
        _refused_effect(tool, effect, shown)
        for tool in ir.handled
        if tool.kind == "query"
        for effect in tool.effects
        if effect.refuses_query
    ]
    return ir, refused


def _refused_effect(tool: ToolIR, effect: EffectIR, handler_file: str) -> Diagnostic:
    path = " → ".join((tool.handler, *effect.via))
    where = f" (through {path})" if effect.via else ""
    if effect.access == "dynamic":
        return Diagnostic(
            "FG421",
            f"{tool.label} is a query (readOnlyHint: clients may run it without asking), but its handler "
            f'"{tool.handler}" calls {effect.call}{where}, which static analysis cannot follow',
            handler_file,
            Position(effect.line, effect.column),
            hint="call the module or function directly so its effects can be read, or make it a mutation or action",
        )
    what = {"execute": "execute", "write": "write"}[effect.access]
    return Diagnostic(
        "FG420",
        f"{tool.label} is a query (readOnlyHint: clients may run it without asking), but its handler "
        f'"{tool.handler}" can {what} ({effect.category}): {effect.call}{where}',
        handler_file,
        Position(effect.line, effect.column),
        hint='make it kind = "mutation" (or "action"), or move the write or process out of its handler',
    )


def over_budget(loaded: LoadedSpec, ir: ServerIR) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """The token budgets' diagnostics, as (errors, warnings): FG500 for a tools/list entry over
    `[server] max_list_tokens`, FG501 for a worst-case result over `max_result_tokens`, FG502 for a result with
    no bound under it. Checked here, not while lowering: the sizes are those of what codegen derives from the IR."""
    errors = [_list_over(loaded, ir, b) for b in tool_budgets(ir) if _over(b.list_tokens, ir.max_list_tokens)]
    warnings: list[Diagnostic] = []
    if ir.max_result_tokens is not None:
        for b in result_budgets(ir):
            if b.unbounded is not None:
                warnings.append(_result_unbounded(loaded, ir, b, b.unbounded))
            elif b.result_tokens is not None and b.result_tokens > ir.max_result_tokens:
                errors.append(_result_over(loaded, ir, b))
    return errors, warnings


def _over(size: int, limit: int | None) -> bool:
    return limit is not None and size > limit


def _list_over(loaded: LoadedSpec, ir: ServerIR, b: ToolBudget) -> Diagnostic:
    return Diagnostic(
        "FG500",
        f'the tools/list entry of "{b.tool}" is about {b.list_tokens} tokens ({b.list_bytes} bytes / 4), over '
        f"max_list_tokens = {ir.max_list_tokens}",
        loaded.file_at("tools", b.spec_name),
        loaded.key_at("tools", b.spec_name),
        hint="shorten its description or inputs, return a smaller presenter, or raise max_list_tokens",
    )


def _audience(b: ResultBudget) -> str:
    return f" (as presenter {b.audience})" if b.audience else ""


def _result_over(loaded: LoadedSpec, ir: ServerIR, b: ResultBudget) -> Diagnostic:
    return Diagnostic(
        "FG501",
        f'the worst-case result of "{b.tool}"{_audience(b)} is about {b.result_tokens} tokens ({b.result_bytes} '
        f"bytes / 4), over max_result_tokens = {ir.max_result_tokens}",
        loaded.file_at("tools", b.spec_name),
        loaded.key_at("tools", b.spec_name),
        hint="lower the presenter's limit, max_items or max_length, show fewer fields, or raise max_result_tokens",
    )


def _result_unbounded(loaded: LoadedSpec, ir: ServerIR, b: ResultBudget, why: Unbounded) -> Diagnostic:
    return Diagnostic(
        "FG502",
        f'the result of "{b.tool}"{_audience(b)} has no bound, so max_result_tokens = {ir.max_result_tokens} '
        f"cannot be checked: {why.path} ({why.reason})",
        loaded.file_at("tools", b.spec_name),
        loaded.key_at("tools", b.spec_name),
        severity=Severity.WARNING,
        hint=(
            'a handler\'s text has no bound: return a presenter (returns = "X") to have one'
            if why.path == "result"
            else f"bound {why.path}: a max_length, a max_items or a presenter limit (docs/spec.md §4 max_result_tokens)"
        ),
    )


def budget_text(ir: ServerIR) -> str:
    """The `build --budget` table."""
    return budget_table(
        tool_budgets(ir), result_budgets(ir), ir.max_list_tokens, ir.max_result_tokens, exposition_line(ir)
    )


def generate(spec_path: Path, out_dir: Path, *, syntax_check: bool = True) -> Generation:
    """Every file the spec generates into `out_dir`, tidied and (unless the caller will do it for the
    files it needs, as `check` does) parse-checked by compiling it."""
    from fusiongen.codegen.render import CompiledModules, headers, parse_check, render

    loaded, ir, warnings = validate(spec_path)
    # The header names the spec as seen from the output folder; a folder spec with a trailing "/".
    spec_from_out = relative(spec_path, out_dir) + ("/" if loaded.folder else "")
    rendered, copied = render(
        ir,
        spec_from_out=spec_from_out,
        handlers_dir_from_package=relative(loaded.home, out_dir / ir.package),
    )
    tidied = tidy_files(rendered)
    compiled = CompiledModules(tidied)  # each compiled at most once: pruning reads some, parse-checking all
    copied = shipped_copies(tidied, copied, compiled)  # without what this server cannot reach
    if syntax_check:
        # The runtime copies too: what they leave out is this server's.
        parse_check({**tidied, **copied}, compiled.compiled)
    # Beside README.md, so a change to what the model can see is a readable diff in review (and drift for check).
    exposure_md = {EXPOSURE_FILE: headers(spec_from_out)[1] + as_markdown(exposure(ir), spec_from_out)}
    files = dict(sorted({**tidied, **copied, **exposure_md}.items()))
    return Generation(loaded, ir, files, headers(spec_from_out), warnings)


def publish(generation: Generation, out_dir: Path) -> Published:
    """Write a generation into `out_dir` (see `fusiongen.output.publish`)."""
    return publish_bundle(generation.bundle, out_dir)


def default_out(spec_path: Path) -> Path:
    """Where a spec's server goes when no `-o` is given: `<spec dir>/<spec stem>`, unless only the spec's own
    folder holds a project generated from it (as `fusiongen init` builds one): then that folder, so that
    `check` compares what is there and `build` rebuilds it, rather than a second server one folder down."""
    beside, below = spec_path.parent, spec_path.parent / spec_path.stem
    if not _generated_from(below, relative(spec_path, below)) and _generated_from(beside, spec_path.name):
        return beside
    return below


def _generated_from(out_dir: Path, spec_from_out: str) -> bool:
    """Whether `out_dir` holds the project files `build` writes from that spec (found by their header)."""
    from fusiongen.codegen.render import headers

    for name, header in zip(("pyproject.toml", "README.md"), headers(spec_from_out)[:2], strict=True):
        try:
            with (out_dir / name).open("rb") as handle:
                if handle.readline().decode("utf-8", "replace") == header:
                    return True
        except OSError:
            continue
    return False


@dataclass(frozen=True)
class BuildResult:
    generation: Generation
    published: Published
    handlers: Path
    handlers_note: str | None  # what happened to the handler module; None: it was already complete
    # What `check` would say of the handler module as written (FG401, FG410): the server is written anyway.
    handler_problems: list[Diagnostic] = field(default_factory=list)


def build(spec_path: Path, out_dir: Path) -> BuildResult:
    """Generate, write the server, then scaffold or extend the handler module beside the spec."""
    from fusiongen.scaffold.handlers import handler_path

    generation = generate(spec_path, out_dir)
    handlers = handler_path(generation.loaded.home, generation.ir.handlers_module)
    handlers_text, note = _handler_update(generation, handlers)
    published = publish(generation, out_dir)
    if handlers_text is not None:
        write_user_file(handlers, handlers_text)
    problems = [d for d in handler_diagnostics(generation) if d.is_error]  # stubs (FG411) are what build made
    return BuildResult(generation, published, handlers, note if handlers_text is not None else None, problems)


def _handler_update(generation: Generation, handlers: Path) -> tuple[str | None, str]:
    """The handler module's new text (None: unchanged) and what changed; FG403 if it does not parse."""
    from fusiongen.scaffold.handlers import append_stubs, bound_names, parse_handlers, scaffold

    if not handlers.exists():
        return scaffold(generation.ir), "scaffolded a stub per tool; implement them"
    source = handlers.read_text(encoding="utf-8")
    names = bound_names(source)
    if names is not None and all(tool.handler in names for tool in generation.ir.handled):
        return None, "unchanged"  # nothing to append: the module is not read with libcst at all
    parsed = parse_handlers(source, display_path(handlers))
    if isinstance(parsed, Diagnostic):
        raise SpecError([parsed])
    return append_stubs(source, generation.ir), "appended stubs for new tools"


@dataclass(frozen=True)
class CheckResult:
    generation: Generation
    drift: Drift
    problems: list[Diagnostic] = field(default_factory=list)  # warnings and handler-module findings

    @property
    def failed(self) -> bool:
        return not self.drift.clean or any(p.is_error for p in self.problems)


def check(spec_path: Path, out_dir: Path) -> CheckResult:
    """Compare `out_dir` with what the spec generates, and check the handler module statically."""
    from fusiongen.codegen.render import parse_check

    generation = generate(spec_path, out_dir, syntax_check=False)
    drift = compare(out_dir, generation.files, generation.headers)
    # Files identical to the committed ones were parse-checked when they were built.
    parse_check({p: t for p, t in generation.files.items() if p in drift.changed or p in drift.missing})
    return CheckResult(generation, drift, [*generation.warnings, *handler_diagnostics(generation)])


def handler_diagnostics(generation: Generation) -> list[Diagnostic]:
    """What `check` reports about the handler module, statically."""
    from fusiongen.scaffold.handlers import check_handlers, handler_path

    loaded, ir = generation.loaded, generation.ir
    path = handler_path(loaded.home, ir.handlers_module)
    shown = display_path(path)
    if not path.is_file():
        # Maybe installed elsewhere: it cannot be checked from here, which is worth saying but not failing.
        return [
            Diagnostic(
                "FG402",
                f'handler module "{ir.handlers_module}" not found at {shown}; not checked',
                loaded.display_path,
                loaded.key_at("server"),
                Severity.WARNING,
                hint="run `fusiongen build` to scaffold it beside the spec",
            )
        ]
    positions: dict[str, tuple[str, Position]] = {
        t.label: (loaded.file_at(table, t.name), loaded.key_at(table, t.name))
        for t in ir.handled
        for table in ["resources" if t.resource else "tools"]
    }
    source = path.read_bytes().decode("utf-8", "replace")
    return check_handlers(source, ir, shown, positions)


# The MCP Inspector the `inspect` command runs unless told otherwise: the version tooling/package.json pins (the
# one fusiongen's tests run), fetched by npx on first use.
INSPECTOR = ("npx", "-y", "@modelcontextprotocol/inspector@2.12.0")
# Where a stdio server keeps workflow state between Inspector calls (each call starts a new server process, so
# the memory store would forget every handle): a SQLite file in OUT.
INSPECTOR_STATE = "sqlite:///.inspector-state.db"


@dataclass(frozen=True)
class Inspection:
    """The Inspector command line for a built server, and where to run it."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]  # added to the environment
    note: str  # what to tell the user (on stderr)


def inspection(
    spec_path: Path,
    out_dir: Path,
    *,
    url: str | None = None,
    inspector: Sequence[str] = INSPECTOR,
    python: str,
    inspector_args: Sequence[str] = (),
) -> Inspection:
    """The MCP Inspector CLI against the server built from `spec_path` into `out_dir`: on stdio (`python -m
    <package>` in `out_dir`, with workflow state in a SQLite file there so handles outlive each call's server
    process) or, with `url`, over streamable HTTP. Always the 2026-07-28 era: every tool is listed and a
    workflow is walked by handles, which is how a client that opens a new session per call must walk it."""
    _, ir, _ = validate(spec_path)
    base = [*inspector, "--cli", "--protocol-era", "modern"]
    if url is not None:
        return Inspection([*base, url, "--transport", "http", *inspector_args], out_dir, {}, f"inspecting {url}")
    if not (out_dir / ir.package / "__main__.py").is_file():
        raise SpecError(
            [
                Diagnostic(
                    "FG412",
                    f"{display_path(out_dir / ir.package)} is not built",
                    display_path(spec_path),
                    hint=f"run `fusiongen build {display_path(spec_path)}` first (with the same -o)",
                )
            ]
        )
    store = ["--state-store", INSPECTOR_STATE] if ir.workflows else []
    server = ["--", python, "-m", ir.package, *store]
    argv = [*base, "--cwd", str(out_dir.resolve()), "-e", f"PYTHONPATH={out_dir.resolve()}", *inspector_args, *server]
    note = f"inspecting {ir.package} on stdio in {display_path(out_dir)}" + (
        f" (workflow state in {INSPECTOR_STATE}, so handles outlive each call)" if store else ""
    )
    return Inspection(argv, out_dir, {}, note)


def schema_text(*, part: bool = False) -> str:
    """The JSON Schema of the spec language, as `fusiongen schema` prints it and `init` writes it (`part`: of
    one file of a folder spec, `fusiongen schema --part`)."""
    return json.dumps(json_schema(part=part), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path, *, part: bool = False) -> None:
    """Write the spec language's JSON Schema to `path` (atomically, like every file fusiongen writes)."""
    write_user_file(path, schema_text(part=part))


def init_project(directory: Path, name: str | None) -> list[str]:
    """Write the starter files (never over existing ones), then build the server into `directory`.
    Returns what to tell the user."""
    from fusiongen.scaffold.starter import starter

    project = starter(directory, name, schema_text())
    existing = [display_path(p) for p in project.files if p.exists()]
    if existing:
        raise SpecError([Diagnostic("FG408", f"{p} already exists; init writes only new files", p) for p in existing])
    for path, text in project.files.items():
        write_user_file(path, text)
    try:
        generation = generate(project.spec, directory)
        foreign = foreign_files(generation.bundle, directory)
        if foreign:
            raise SpecError(foreign)
        publish(generation, directory)
    except BaseException:
        for path in project.files:  # leave the folder as it was: init either makes a working project or nothing
            path.unlink(missing_ok=True)
        raise
    go = "" if directory.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(display_path(directory))} && "
    return [
        f"created {', '.join(display_path(p) for p in project.files)}",
        f"built {display_path(directory / project.package)}/",
        f"run it:   {go}python -m {project.package}          (stdio; add --http for HTTP)",
        f"test it:  {go}pip install pytest && python -m pytest",
        f"rebuild:  {go}fusiongen build {shlex.quote(project.spec.name)}          (after editing the spec)",
    ]


def _imported_server_name(spec_path: Path, title: str) -> str:
    """The spec file's name (`-o pets.toml` → "pets"), unless it says nothing (`spec`, `api`): the API's title."""
    from fusiongen.importers.openapi.mapping import identifier as openapi_identifier

    stem = openapi_identifier(spec_path.stem)
    name = stem if stem not in ("spec", "api", "openapi", "x_") else openapi_identifier(title)
    return name[:40].rstrip("_")


def _validated_import(spec_path: Path, text: str, found: list[Diagnostic]) -> tuple[ServerIR, list[Diagnostic]]:
    """Validate the new spec text beside the spec (so its relative paths hold), then put it in place; on
    errors (the user's part may name what the document no longer has) nothing is written."""
    candidate = spec_path.with_name(f".{spec_path.name}.import-{os.getpid()}")
    write_user_file(candidate, text)
    try:
        ir, spec_warnings = lower(load_path(candidate, display_path(spec_path)))
    except SpecError as exc:
        candidate.unlink()
        raise SpecError([*found, *exc.diagnostics]) from None
    except BaseException:
        candidate.unlink()
        raise
    os.replace(candidate, spec_path)
    return ir, spec_warnings


@dataclass(frozen=True)
class ImportResult:
    spec: Path
    warnings: list[Diagnostic]  # what the document has that the spec cannot say, by JSON pointer
    spec_warnings: list[Diagnostic]  # `validate` of the written spec
    handlers: Path | None = None
    handlers_note: str | None = None


def import_openapi(
    document_path: Path,
    spec_path: Path,
    *,
    tags: frozenset[str] = frozenset(),
    include_ops: str | None = None,
    http_handlers: bool = False,
    exclude_tags: frozenset[str] = frozenset(),
    exclude_ops: str | None = None,
    paths: tuple[str, ...] = (),
    exclude_paths: tuple[str, ...] = (),
    methods: frozenset[str] = frozenset(),
    exclude_methods: frozenset[str] = frozenset(),
    compact: bool = False,
) -> ImportResult:
    """Map an OpenAPI document into `spec_path` (its region only, if it exists), validate what was written,
    and with `http_handlers` write (or extend) the httpx handler module beside it. The filters select
    operations (`Filters`); `compact`: the smaller view for a large API (docs/openapi.md §6)."""
    from fusiongen.importers.openapi.constraints import Checks
    from fusiongen.importers.openapi.document import load_document
    from fusiongen.importers.openapi.emit import NotOurs, emit_spec
    from fusiongen.importers.openapi.http_handlers import append_functions, module_text
    from fusiongen.importers.openapi.mapping import METHODS, Filters, map_document
    from fusiongen.scaffold.handlers import handler_path, parse_handlers, top_level_names

    patterns: dict[str, re.Pattern[str] | None] = {}
    problems: list[Diagnostic] = []
    for option, text in (("--include-ops", include_ops), ("--exclude-ops", exclude_ops)):
        try:
            patterns[option] = re.compile(text) if text is not None else None
        except re.error as exc:
            problems.append(Diagnostic("FG331", f"{option} is not a regular expression: {exc}", "<command line>"))
    unknown = sorted((methods | exclude_methods) - set(METHODS))
    if unknown:
        problems.append(
            Diagnostic(
                "FG331", f"not an HTTP method: {', '.join(unknown)} (one of {', '.join(METHODS)})", "<command line>"
            )
        )
    if problems:
        raise SpecError(problems)
    filters = Filters(
        tags,
        patterns["--include-ops"],
        exclude_tags,
        patterns["--exclude-ops"],
        paths,
        exclude_paths,
        methods,
        exclude_methods,
    )
    document = load_document(document_path)
    imported = map_document(document, filters, Checks(pattern_problem, value_refused), compact=compact)
    existing = spec_path.read_text(encoding="utf-8") if spec_path.exists() else None
    source = relative(document_path, spec_path.parent)
    try:
        text = emit_spec(
            imported, source, _imported_server_name(spec_path, imported.title), existing, http=http_handlers
        )
    except NotOurs:
        raise SpecError(
            [
                Diagnostic(
                    "FG330",
                    f"{display_path(spec_path)} exists and has no import region; refusing to overwrite it",
                    display_path(spec_path),
                    hint="import into a new file, or add the region markers",
                )
            ]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([Diagnostic("FG001", f"TOML syntax error: {exc}", display_path(spec_path))]) from None
    ir, spec_warnings = _validated_import(spec_path, text, imported.diagnostics)
    if not http_handlers:
        return ImportResult(spec_path, imported.diagnostics, spec_warnings)
    handlers = {tool.name: tool.handler for tool in ir.tools}
    path = handler_path(spec_path.parent, ir.handlers_module)
    if path.exists():
        source = path.read_text(encoding="utf-8")
        module = parse_handlers(source, display_path(path))
        defined = module if isinstance(module, Diagnostic) else top_level_names(module)
        extension = append_functions(source, defined, imported, handlers, display_path(path))
        if extension.problem is not None:
            return ImportResult(spec_path, [*imported.diagnostics, extension.problem], spec_warnings, path, "unchanged")
        note = (
            f"appended {len(extension.added)} function(s)"
            if extension.added
            else "unchanged (a function for every operation)"
        )
        if extension.text is not None:
            write_user_file(path, extension.text)
    else:
        write_user_file(path, module_text(imported, ir.package, ir.name, handlers))
        note = f"wrote {len(imported.tools)} httpx handler(s)"
    return ImportResult(spec_path, imported.diagnostics, spec_warnings, path, note)
