"""Diagnostics: the one way fusiongen talks to a user about their spec.

Every user mistake becomes a `Diagnostic` with a stable code, a position and, where one helps, a hint.
Phases collect them instead of raising, so a run reports every mistake at once, sorted by position.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, order=True)
class Position:
    line: int
    col: int


@dataclass(frozen=True)
class Diagnostic:
    """One finding about a spec, printable as `file:line:col: error[FG102]: message`."""

    code: str
    message: str
    file: str
    position: Position = Position(1, 1)
    severity: Severity = Severity.ERROR
    hint: str | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.position.line, self.position.col, self.code, self.message)

    def format(self) -> str:
        message = self.message.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever names it quotes
        head = f"{self.file}:{self.position.line}:{self.position.col}: {self.severity.value}[{self.code}]: {message}"
        hint = self.hint.replace("\r", "\\r").replace("\n", "\\n") if self.hint else None
        return f"{head}\n  hint: {hint}" if hint else head

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.position.line,
            "col": self.position.col,
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        }


class SpecError(Exception):
    """Raised by a phase that cannot go on; carries every diagnostic found so far."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = sorted_diagnostics(diagnostics)
        super().__init__(f"{len(self.diagnostics)} diagnostic(s)")


def sorted_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sort by file and position, dropping exact repeats (two phases may see the same mistake)."""
    unique = {(d.sort_key(), d.severity, d.hint): d for d in diagnostics}
    return sorted(unique.values(), key=Diagnostic.sort_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


def display_path(path: Path) -> str:
    """How a path is shown to the user: relative to the working directory when it is below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# The catalogue of codes. Codes are stable: tests and users' CI pin them.
CODES: dict[str, str] = {
    "FG001": "TOML syntax error",
    "FG002": "the spec file cannot be read",
    "FG100": "unknown key",
    "FG101": "wrong value type",
    "FG102": "defined twice",
    "FG103": "missing required key",
    "FG104": "invalid name",
    "FG105": "defined in two files of a folder spec, or differently in a mounted spec",
    "FG106": "a folder spec without files or without [server]",
    "FG107": "grouped exposition: two tools served or called by one name",
    "FG108": "a mount outside the spec folder, or a mounted spec that mounts specs",
    "FG109": "a mounted spec's [auth] differs from the mounting spec's",
    "FG110": "unknown type",
    "FG111": "unknown model or presenter in returns",
    "FG112": "enum values misused",
    "FG113": "list items misused",
    "FG114": "default does not match the field",
    "FG115": "constraint does not apply to the field",
    "FG116": "constraints leave no value that fits",
    "FG117": "pattern outside the portable regex subset",
    "FG118": "length or item count negative",
    "FG119": "example does not fit the field",
    "FG120": "hidden names an unknown field",
    "FG121": "guarded names an unknown field",
    "FG122": "fillable names an unknown field",
    "FG123": "casts names an unknown field",
    "FG124": "field both guarded and fillable",
    "FG125": "cast to an unsupported type",
    "FG126": "json field beside hidden fields (warning)",
    "FG130": "input_from names an unknown model",
    "FG131": "input_from names an unknown operation",
    "FG132": "input_from is malformed",
    "FG133": "input field also fillable",
    "FG134": "tool error code not UPPER_SNAKE_CASE",
    "FG135": "tool error code reserved by the server",
    "FG136": "tool icon unusable",
    "FG140": "not a valid Python identifier",
    "FG141": "a Python keyword or reserved name",
    "FG142": "handler names collide",
    "FG143": "generated names collide",
    "FG150": "presenter names an unknown model",
    "FG151": "presenter field unknown or hidden",
    "FG152": "presenter schema declared twice or not at all",
    "FG153": "embed misused",
    "FG154": "embedded presenters form a cycle",
    "FG155": "bad redaction path",
    "FG156": "limit must be positive",
    "FG157": "bad expression",
    "FG158": "expression reads a hidden or redacted field",
    "FG159": "suggestion names an unknown tool",
    "FG160": "UI block misused",
    "FG161": "user-only UI block shows a redacted field",
    "FG168": "resource without requires reads what only tools with requires show",
    "FG170": "workflow state unknown",
    "FG171": "workflow event unknown",
    "FG172": "unsupported XState feature",
    "FG173": "workflow machine file unusable",
    "FG174": "state binding misused",
    "FG175": "unreachable state",
    "FG176": "transition no tool can fire",
    "FG177": "generated workflow tool collides",
    "FG178": "workflow deadlock: a reachable state no tool can leave",
    "FG179": "no final state reachable from a state",
    "FG180": "resource URI template malformed",
    "FG181": "resource names an unknown presenter or model",
    "FG182": "resource variable and input disagree",
    "FG183": "two resources with the same URI",
    "FG184": "prompt placeholder names no argument",
    "FG185": "prompt argument misused",
    "FG186": "prompt argument unused in its template",
    "FG187": "tool tag malformed",
    "FG188": "suggestion names a tool the workflow never allows there",
    "FG189": "compact_description never shown",
    "FG190": "requires names an unknown scope",
    "FG191": "bad scope, role or claim name",
    "FG192": "returns_for_role names an unknown presenter or model",
    "FG193": "a presenter of returns_for_role presents another model than returns",
    "FG194": "returns_for_role without a presenter to return",
    "FG195": "fields on a field that is not an object",
    "FG196": "object without fields",
    "FG197": "hidden, guarded or cast outside an inline object",
    "FG198": "inline object's generated model name already taken",
    "FG199": "list items table declares more than a type and fields",
    "FG200": "invalidates names no tool (or a glob matches none)",
    "FG201": "invalidates on a query, immutable off a query, or invalidates naming a non-query or immutable tool",
    "FG202": "[server] registry_name is not the MCP registry's namespace/name",
    "FG203": "[server] transports leaves out stdio or lists one twice",
    "FG204": "[auth] on a server without the http transport",
    # fusiongen import openapi: what an OpenAPI document has that the spec cannot say (warnings), by JSON pointer
    "FG300": "OpenAPI document cannot be read or parsed",
    "FG301": "not an OpenAPI 3.0 or 3.1 document",
    "FG302": "$ref cannot be followed",
    "FG303": "free-form object or map not expressible",
    "FG304": "oneOf/anyOf or a type union not expressible",
    "FG305": "allOf parts disagree",
    "FG306": "property name unusable as a field",
    "FG307": "non-string enum",
    "FG310": "schema type not expressible",
    "FG311": "cookie parameter not expressible",
    "FG312": "parameter not expressible",
    "FG313": "request body not JSON: operation not imported",
    "FG314": "success response not expressible: tool returns no data",
    "FG320": "webhook not imported",
    "FG321": "OPTIONS/TRACE operation not imported",
    "FG322": "callbacks not expressible",
    "FG323": "tool name taken",
    "FG332": "pattern outside the portable regex subset: kept as a comment",
    "FG333": "constraint without a spec key, or not applicable to the field's type",
    "FG334": "constraint, default or example the spec would refuse: not carried",
    "FG335": "format the spec does not check",
    "FG336": "tag with nothing a spec tag can keep",
    "FG337": "handler module cannot be extended",
    "FG330": "import would overwrite a spec without an import region",
    "FG331": "--include-ops is not a regular expression",
    "FG500": "tools/list entry over [server] max_list_tokens",
    "FG501": "worst-case tool result over [server] max_result_tokens",
    "FG502": "tool result without a bound under [server] max_result_tokens",
    "FG400": "handler missing",
    "FG401": "handler signature incompatible",
    "FG402": "handler module missing",
    "FG403": "handler module cannot be parsed",
    "FG404": "output would overwrite a file fusiongen did not generate",
    "FG405": "generated file out of date (check)",
    "FG406": "generated file missing (check)",
    "FG407": "stale generated file (check)",
    "FG408": "init would overwrite a file",
    "FG409": "output directory unusable",
    "FG410": "handler is a generator function (check)",
    "FG411": "handler is still the scaffolded stub (check; a warning)",
    "FG412": "inspect: the server is not built",
    "FG420": "query tool whose handler can write or execute (read from the handler module)",
    "FG421": "query tool whose handler makes a call static analysis cannot follow (dynamic import, ...)",
}
