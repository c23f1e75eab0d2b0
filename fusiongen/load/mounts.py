"""Mounted specs (docs/spec.md §3.2): other specs served as part of this one, each under a name prefix.

`[[mounts]]` names a spec file or folder and a prefix. Its files are read as the spec's own are (each with
its own positions), then renamed before the merge: every tool, resource and prompt `x` becomes
`<prefix>.x`, and what the mounted spec says about its own tools follows (`invalidates`, a presenter's
`suggest`); its handlers keep the names they had (`handler` is set to the default the unprefixed name
gives), so the handler module written for it still serves it. Models, presenters and workflows are not
renamed: they describe the domain both specs share, so one defined alike in both is shared, and one
defined differently is FG105 naming both files, as in a folder spec.

What the mounting spec decides stays with it: a mounted spec's `[server]` is ignored, its `[auth]` must be
the mounting spec's (FG109, else its `requires` would name scopes and roles another server defines), and it
may not mount specs itself (FG108, as a mount outside the spec's folder: the folder is what `build` trusts).
"""

from __future__ import annotations

import copy
import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fusiongen.diagnostics import Diagnostic, Position, SpecError
from fusiongen.load.loader import SpecPart
from fusiongen.names import snake_case

__all__ = ["MOUNTED_TABLES", "Piece", "mounted_pieces"]

Piece = tuple[SpecPart, dict[str, Any]]  # a file as read, and its TOML document
ReadSpec = Callable[[Path, str], list[Piece]]  # a spec file or folder → its pieces (SpecError if unreadable)

MOUNTED_TABLES = ("tools", "resources", "prompts")  # what a prefix renames
SHARED_TABLES = ("models", "presenters", "workflows")  # what a mounted spec shares when defined alike
PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def mounted_pieces(pieces: list[Piece], home: Path, read: ReadSpec) -> tuple[list[Piece], list[Diagnostic]]:
    """The spec's own pieces followed by those of each spec it mounts, renamed, and the mistakes found."""
    problems: list[Diagnostic] = []
    mounted: list[Piece] = []
    targets: list[Path] = []
    root_auth = next((document["auth"] for _, document in pieces if "auth" in document), None)
    for part, index, spec, prefix in _mounts_of(pieces):
        loc = ("mounts", index)
        if not PREFIX.fullmatch(prefix):
            problems.append(
                _at(part, (*loc, "prefix"), "FG104", f'mount prefix "{prefix}" must match [A-Za-z][A-Za-z0-9_-]*')
            )
            continue
        target = part.path.parent / spec
        shown = posixpath.normpath(posixpath.join(posixpath.dirname(part.display_path), spec))
        resolved, inside = target.resolve(), home.resolve()
        if resolved == inside or inside not in resolved.parents:
            problems.append(
                _at(
                    part,
                    (*loc, "spec"),
                    "FG108",
                    f'mount "{spec}" is {"the spec itself" if resolved == inside else "outside the spec folder"}',
                    hint="mount a spec file or folder inside the folder of the spec that mounts it",
                )
            )
            continue
        try:
            found = read(target, shown)
        except SpecError as exc:  # a file that cannot be read or parsed
            problems += exc.diagnostics
            continue
        targets.append(resolved)
        mounted += _renamed(found, prefix, root_auth, problems)
    own = [piece for piece in pieces if not any(_under(piece[0].path, target) for target in targets)]
    return own + _without_shared(own, mounted), problems


def _mounts_of(pieces: list[Piece]) -> list[tuple[SpecPart, int, str, str]]:
    """Each well-formed `[[mounts]]` entry: the file naming it, its index, its spec and prefix (a malformed one
    is reported when the document is shape-checked)."""
    found = []
    for part, document in pieces:
        entries = document.get("mounts")
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if isinstance(entry, dict) and isinstance(entry.get("spec"), str) and isinstance(entry.get("prefix"), str):
                found.append((part, index, entry["spec"], entry["prefix"]))
    return found


def _renamed(pieces: list[Piece], prefix: str, root_auth: Any, problems: list[Diagnostic]) -> list[Piece]:
    """A mounted spec's pieces as the mounting spec serves them (the module docstring says how)."""
    tools = {name for _, document in pieces for name in _table(document, "tools")}  # its own names, unprefixed
    workflows = {name for _, document in pieces for name in _table(document, "workflows")}
    only_workflow = next(iter(workflows)) if len(workflows) == 1 else None
    renamed: list[Piece] = []
    for part, document in pieces:
        if "mounts" in document:
            problems.append(
                _at(
                    part,
                    ("mounts",),
                    "FG108",
                    "a mounted spec may not mount specs itself",
                    hint="mount every spec from the spec that serves them",
                )
            )
        if "auth" in document and document["auth"] != root_auth:
            problems.append(
                _at(
                    part,
                    ("auth",),
                    "FG109",
                    "a mounted spec's [auth] differs from the [auth] of the spec that mounts it",
                    hint="one server has one [auth]: write it in the mounting spec, and the same or none in the "
                    "mounted one",
                )
            )
        document = {key: value for key, value in document.items() if key not in ("server", "auth", "mounts")}
        document = copy.deepcopy(document)
        for table in MOUNTED_TABLES:
            if isinstance(document.get(table), dict):
                document[table] = {
                    f"{prefix}.{name}": _served(table, name, entity, prefix, tools, only_workflow)
                    for name, entity in document[table].items()
                }
        for presenter in _table(document, "presenters").values():
            for suggestion in presenter.get("suggest", []) if isinstance(presenter, dict) else []:
                if isinstance(suggestion, dict) and isinstance(suggestion.get("tool"), str):
                    suggestion["tool"] = _reference(suggestion["tool"], prefix, tools)
        source_map = part.source_map.with_prefix(MOUNTED_TABLES, prefix)
        renamed.append((replace(part, source_map=source_map, mount=prefix), document))
    return renamed


def _served(table: str, name: str, entity: Any, prefix: str, tools: set[str], only_workflow: str | None) -> Any:
    """One tool, resource or prompt of a mounted spec, as it is served under `prefix`."""
    if not isinstance(entity, dict) or table == "prompts":
        return entity
    if table == "resources":
        entity.setdefault("handler", f"read_{snake_case(name)}")
        return entity
    entity.setdefault("handler", snake_case(name))
    invalidates = entity.get("invalidates")
    if isinstance(invalidates, list):
        entity["invalidates"] = [_reference(i, prefix, tools) if isinstance(i, str) else i for i in invalidates]
    bind_state = entity.get("bind_state")
    if isinstance(bind_state, dict) and "workflow" not in bind_state and only_workflow is not None:
        bind_state["workflow"] = only_workflow  # the mounting spec may have more workflows than one
    return entity


def _reference(name: str, prefix: str, tools: set[str]) -> str:
    """A tool name or glob the mounted spec writes: prefixed when it names its own tools (a workflow's
    `<workflow>.start` or a tool of another spec is left as written)."""
    if name in tools or any(fnmatch.fnmatchcase(tool, name) for tool in tools):
        return f"{prefix}.{name}"
    return name


def _without_shared(own: list[Piece], mounted: list[Piece]) -> list[Piece]:
    """The mounted pieces without the models, presenters and workflows an earlier piece defines alike."""
    seen: dict[tuple[str, str], Any] = {}
    for _, document in own:
        for table in SHARED_TABLES:
            for name, entity in _table(document, table).items():
                seen.setdefault((table, name), entity)
    kept: list[Piece] = []
    for part, document in mounted:
        document = dict(document)
        for table in SHARED_TABLES:
            entities = _table(document, table)
            if not entities:
                continue
            document[table] = {}
            for name, entity in entities.items():
                if seen.get((table, name), _ABSENT) != entity:
                    document[table][name] = entity
                    seen.setdefault((table, name), entity)
            if not document[table]:
                del document[table]
        kept.append((part, document))
    return kept


_ABSENT = object()


def _table(document: dict[str, Any], table: str) -> dict[str, Any]:
    value = document.get(table)
    return value if isinstance(value, dict) else {}


def _under(path: Path, target: Path) -> bool:
    resolved = path.resolve()
    return resolved == target or target in resolved.parents


def _at(part: SpecPart, loc: tuple[str | int, ...], code: str, message: str, *, hint: str | None = None) -> Diagnostic:
    """A diagnostic at `loc` of `part` (its value when written, else its key)."""
    span = part.source_map.value(loc)
    if span is None:
        span, _ = part.source_map.nearest(loc)
    return Diagnostic(code, message, part.display_path, Position(span.line, span.col), hint=hint)
