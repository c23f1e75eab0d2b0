"""An OpenAPI document → what the spec can say about it: models, tools and, for the rest, diagnostics.

The rules (docs/openapi.md): object schemas in `components.schemas` (and inline object schemas, named after
where they appear) become models; `readOnly` → guarded, `writeOnly` → hidden; each operation becomes a tool
(GET/HEAD → query; DELETE, PUT, PATCH → mutation, as they change or remove what exists; POST → action), its
parameters and JSON body its input (a body that is a model's schema: `input_from = "Model.<op>"`), its
success response `returns`. Whatever has no spec equivalent is a warning with the JSON pointer, and a
comment in the TOML where it was simplified: nothing is dropped silently.
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fusiongen.diagnostics import Diagnostic
from fusiongen.importers.openapi.constraints import Carried, Checks, constraints_of, json_value, why_refused
from fusiongen.importers.openapi.document import Document, RefError, child, items
from fusiongen.importers.openapi.upstream_errors import DESCRIPTION_LIMIT, GENERIC, MAPPED_STATUSES, RAISES
from fusiongen.ir import SCALAR_KINDS, TypeIR
from fusiongen.names import IDENTIFIER, RESERVED_WORDS, pascal_case

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
KINDS = {"get": "query", "head": "query", "delete": "mutation", "put": "mutation", "patch": "mutation"}
BODY_OPERATIONS = {"post": "create", "patch": "update", "put": "replace"}
FORMATS = {"date": "date", "date-time": "datetime", "uuid": "uuid"}
# Formats the base type already says all of (the spec's integers and numbers are not width-bounded).
NUMERIC_FORMATS = frozenset({"int32", "int64", "float", "double"})
TAG_CHARACTERS = re.compile(r"[^a-z0-9_-]+")
FORM = "application/x-www-form-urlencoded"
IGNORED_HEADERS = {"accept", "content-type", "authorization"}
SCHEMAS = "#/components/schemas/"
UNION: Mapping[str, Any] = {"oneOf": "a union: mapped to a json field"}  # unwrap_nullable's answer for a union
MAX_TOOL_NAME = 64  # a wire name under `tool_names = "snake"` (FG104): so a name fits either style
MAX_DEPTH = 32


@dataclass
class Field:
    """One field of a model or of a tool's input, as the spec writes it."""

    name: str
    type: str
    required: bool = True
    nullable: bool = False
    description: str | None = None
    values: list[str] | None = None
    items: str | None = None
    default: Any = None
    constraints: dict[str, Any] = field(default_factory=dict)  # spec keys: minimum, max_length, pattern...
    examples: list[Any] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    wire: str | None = None  # the property's name upstream, when the spec names it otherwise (`type` → `type_`)


@dataclass
class Model:
    name: str
    pointer: str
    description: str | None = None
    fields: list[Field] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    guarded: list[str] = field(default_factory=list)
    fillable: dict[str, list[str]] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Param:
    """How one input argument travels upstream: `where` is path, query, header or body."""

    arg: str
    wire: str
    where: str


@dataclass
class Tool:
    name: str
    pointer: str
    method: str
    path: str
    kind: str
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    input: list[Field] = field(default_factory=list)
    input_from: str | None = None
    returns: str | None = None
    params: list[Param] = field(default_factory=list)
    whole_body: str | None = None  # the argument sent as the whole JSON body (an array or scalar body)
    form: bool = False  # the body goes up as application/x-www-form-urlencoded, not JSON
    errors: dict[str, str] = field(default_factory=dict)  # what the httpx handler raises, with what it means
    comments: list[str] = field(default_factory=list)


@dataclass
class Imported:
    title: str
    servers: list[str]
    security: list[str]
    models: dict[str, Model] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unsafe_server: bool = False  # servers[0] is not a default the handlers may call (FG338)
    compact: bool = False  # --compact: summaries, documented error meanings only, no output schemas


@dataclass
class Filters:
    """Which operations are imported: each filter given must hold (an include: at least one of its values
    matches; an exclude: none does). Tags match as written or normalized; paths are `fnmatch` globs on the
    path template (`/repos/*`: `*` crosses `/`); methods are lower case."""

    tags: frozenset[str] = frozenset()
    include_ops: re.Pattern[str] | None = None
    exclude_tags: frozenset[str] = frozenset()
    exclude_ops: re.Pattern[str] | None = None
    paths: tuple[str, ...] = ()
    exclude_paths: tuple[str, ...] = ()
    methods: frozenset[str] = frozenset()
    exclude_methods: frozenset[str] = frozenset()


def identifier(name: str) -> str:
    """A snake_case Python identifier for an OpenAPI name: `find pet by id` → `find_pet_by_id`,
    `getMuseumHours` → `get_museum_hours`, `api_key` stays."""
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    name = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()
    if not name or not name[0].isalpha():
        name = f"x_{name}"
    return f"{name}_" if name in RESERVED_WORDS else name


COMPARISONS = (("<=", " lte "), (">=", " gte "), ("<", " lt "), (">", " gt "), ("!=", " ne "), ("=", " eq "))


def parameter_identifier(name: str) -> str:
    """A parameter's input name: snake case, comparison suffixes spelled out (`StartTime<` → `start_time_lt`)."""
    for operator, word in COMPARISONS:
        name = name.replace(operator, word)
    return identifier(name)


def field_identifier(name: str) -> str:
    """The spec name of a property or parameter: kept if it is a usable identifier, else snake case, with
    comparison suffixes spelled out (`StartTime<` → `start_time_lt`: Twilio's ranges) and `_` after a reserved
    word (`type` → `type_`)."""
    if IDENTIFIER.match(name) and name not in RESERVED_WORDS:
        return name
    return parameter_identifier(name)


def unique(name: str, taken: set[str] | dict[str, Any]) -> str:
    """`name`, or the first of `name_2`, `name_3`, ... not in `taken` (deterministic: document order; `type_`
    taken: `type_2`)."""
    if name not in taken:
        return name
    base, number = name.rstrip("_") or name, 2
    while f"{base}_{number}" in taken:
        number += 1
    return f"{base}_{number}"


def tool_name(name: str) -> str:
    """A tool name valid under both `tool_names` styles: an identifier of at most 64 characters (a longer one
    keeps its first 55 and a digest of the whole, so two long names that share a beginning stay apart)."""
    name = identifier(name)
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9].rstrip('_')}_{digest}"


def model_name(name: str) -> str:
    name = pascal_case(re.sub(r"[^A-Za-z0-9]+", "_", name))
    return name if name and name[0].isalpha() else f"M{name}"


class Mapper:
    """Holds the document and what has been mapped so far; one instance per import."""

    def __init__(self, document: Document, filters: Filters, checks: Checks, *, compact: bool = False) -> None:
        self.doc = document
        self.filters = filters
        self.checks = checks
        self.compact = compact
        info: Any = document.data.get("info") if isinstance(document.data.get("info"), Mapping) else {}
        self.out = Imported(
            title=str(info.get("title") or "API"),
            servers=[str(s.get("url")) for s in document.data.get("servers") or [] if isinstance(s, Mapping)],
            security=[name for name, _ in items((document.data.get("components") or {}).get("securitySchemes"))],
        )
        self.building: set[str] = set()
        self.reported: set[tuple[str, str, str]] = set()
        self.depth = 0
        self.check_first_server()

    def check_first_server(self) -> None:
        """A first server the handlers must not call by default (cloud metadata, link-local, unspecified,
        multicast): the default base URL stays unset, so nothing (the auth header least of all) goes there
        until `<SERVER>_BASE_URL` names it."""
        if not self.out.servers:
            return
        why = unsafe_default_server(self.out.servers[0])
        if why is not None:
            self.out.unsafe_server = True
            self.warn(
                "FG338",
                "#/servers/0/url",
                f"the first server {self.out.servers[0]!r} is {why}; it is not the handlers' default base URL",
                hint="set <SERVER>_BASE_URL to the upstream's address; the handlers refuse to call without it",
            )

    def warn(self, code: str, pointer: str, message: str, hint: str | None = None) -> str:
        """Record a warning (once: a scalar component used in many places is read at each); returns the
        comment text for the TOML."""
        if (code, pointer, message) not in self.reported:
            self.reported.add((code, pointer, message))
            self.out.diagnostics.append(self.doc.diagnostic(code, pointer, message, hint=hint))
        return f"{message} [{code}, {pointer}]"

    # --- schemas → types and models ----------------------------------------------------------------

    def model_for_ref(self, ref: str) -> str | None:
        """The model a `#/components/schemas/X` ref becomes, mapped once; None if X is not an object."""
        schema, pointer = self.doc.resolve({"$ref": ref}, ref)
        if not self.is_object(schema):
            return None
        name = model_name(ref.removeprefix(SCHEMAS).split("/")[0]) if ref.startswith(SCHEMAS) else None
        return self.model(schema, pointer, name or model_name(pointer.rsplit("/", 1)[-1]))

    def is_object(self, schema: Any) -> bool:
        if not isinstance(schema, Mapping):
            return False
        if "properties" in schema or "allOf" in schema:
            return True
        return schema.get("type") == "object" and not schema.get("additionalProperties")

    def model(self, schema: Mapping[str, Any], pointer: str, name: str) -> str:
        if name in self.out.models or name in self.building:
            existing = self.out.models.get(name)
            if existing is None or existing.pointer == pointer:
                return name
            name = self.unique_model_name(name)
        self.building.add(name)
        model = Model(name, pointer, _text(schema.get("description")))
        properties, required = self.properties(schema, pointer, model.comments)
        taken = {p for p in properties if IDENTIFIER.match(p) and p not in RESERVED_WORDS}
        for prop, (prop_schema, prop_pointer) in properties.items():
            self.add_field(model, prop, prop_schema, prop_pointer, prop in required, taken)
        self.building.discard(name)
        self.out.models[name] = model
        return name

    def unique_model_name(self, name: str) -> str:
        number = 2
        while f"{name}{number}" in self.out.models or f"{name}{number}" in self.building:
            number += 1
        return f"{name}{number}"

    def properties(
        self, schema: Mapping[str, Any], pointer: str, comments: list[str], seen: frozenset[str] = frozenset()
    ) -> tuple[dict[str, tuple[Any, str]], set[str]]:
        """An object schema's properties and required names, `allOf` parts merged in order (a part that
        includes itself again, directly or not, is reported once and contributes nothing more)."""
        found: dict[str, tuple[Any, str]] = {}
        seen = seen | {pointer}
        required: set[str] = set(schema.get("required") or [])
        for index, part in enumerate(schema.get("allOf") or []):
            try:
                resolved, part_pointer = self.doc.resolve(part, child(pointer, "allOf", index))
            except RefError as exc:
                comments.append(self.warn("FG302", child(pointer, "allOf", index), str(exc)))
                continue
            if not isinstance(resolved, Mapping):
                continue
            if part_pointer in seen:
                comments.append(
                    self.warn(
                        "FG305",
                        child(pointer, "allOf", index),
                        "this allOf part includes the schema itself; it adds nothing",
                    )
                )
                continue
            more, more_required = self.properties(resolved, part_pointer, comments, seen)
            for name, value in more.items():
                if name in found and _kind(found[name][0], self.doc) != _kind(value[0], self.doc):
                    comments.append(
                        self.warn(
                            "FG305",
                            child(pointer, "allOf", index),
                            f"allOf parts disagree on {name!r}; the first part's declaration is kept",
                        )
                    )
                    continue
                found.setdefault(name, value)
            required |= more_required
        for key in ("oneOf", "anyOf"):
            if key in schema:
                comments.append(
                    self.warn(
                        "FG304",
                        child(pointer, key),
                        f"{key} is not expressible; only the "
                        "properties shared by every variant are not merged in either",
                    )
                )
        for name, prop in items(schema.get("properties")):
            found.setdefault(name, (prop, child(pointer, "properties", name)))
        extra = schema.get("additionalProperties")
        if extra not in (None, False) and found:
            comments.append(
                self.warn(
                    "FG303",
                    child(pointer, "additionalProperties"),
                    "additionalProperties are not carried: only the named properties are",
                )
            )
        return found, required

    def add_field(self, model: Model, prop: str, schema: Any, pointer: str, required: bool, taken: set[str]) -> None:
        """`taken`: the names the model's fields have or will have (the properties that keep theirs), so a
        renamed property never takes another's name."""
        name = prop
        if not IDENTIFIER.match(prop) or prop in RESERVED_WORDS:
            name = unique(field_identifier(prop), taken)
            taken.add(name)
        mapped = self.field(name, schema, pointer, required, context=model.name)
        if mapped is None:
            model.comments.append(f"{prop}: not in the model (see the warning at {pointer})")
            return
        if name != prop:
            mapped.wire = prop
            mapped.comments.append(f"{prop!r} upstream (not a usable field name); the httpx handlers rename it")
        model.fields.append(mapped)
        prop = name
        resolved = self.safe_resolve(schema, pointer)[0]
        if isinstance(resolved, Mapping) and resolved.get("readOnly"):
            model.guarded.append(prop)
        if isinstance(resolved, Mapping) and resolved.get("writeOnly"):
            model.hidden.append(prop)

    def safe_resolve(self, schema: Any, pointer: str) -> tuple[Any, str]:
        try:
            return self.doc.resolve(schema, pointer)
        except RefError:
            return None, pointer

    def field(self, name: str, schema: Any, pointer: str, required: bool, *, context: str) -> Field | None:
        """A spec field for `schema`, or None (with a warning) when the spec has no type for it."""
        if self.depth >= MAX_DEPTH:  # arrays of arrays of themselves through $refs: no model breaks the cycle
            self.warn(
                "FG310",
                pointer,
                f"the schema nests more than {MAX_DEPTH} levels (a cycle through arrays?); the field is not carried",
            )
            return None
        self.depth += 1
        try:
            return self._field(name, schema, pointer, required, context=context)
        finally:
            self.depth -= 1

    def _field(self, name: str, schema: Any, pointer: str, required: bool, *, context: str) -> Field | None:
        out = Field(name, "string", required=required)
        ref = schema.get("$ref") if isinstance(schema, Mapping) else None
        try:
            resolved, resolved_pointer = self.doc.resolve(schema, pointer)
        except RefError as exc:
            self.warn("FG302", pointer, str(exc))
            return None
        if not isinstance(resolved, Mapping):
            self.warn("FG310", pointer, "the schema is not an object; the field is not carried")
            return None
        out.description = _text(resolved.get("description"))
        resolved = self.unwrap_nullable(resolved, resolved_pointer, out)
        if resolved is UNION:
            out.type = "json"
            return out
        if resolved is None:
            return None
        if isinstance(ref, str) and self.is_object(resolved):
            out.type = self.model_for_ref(ref) or "string"
            return out
        if not self.set_type(out, resolved, resolved_pointer, f"{context}{pascal_case(name)}"):
            return None
        self.note_constraints(out, resolved, resolved_pointer)
        return out

    def unwrap_nullable(self, schema: Mapping[str, Any], pointer: str, out: Field) -> Mapping[str, Any] | None:
        """3.0 `nullable`, 3.1 `type: [T, "null"]`, `anyOf/oneOf: [T, {type: null}]` and a one-ref `allOf`."""
        out.nullable = bool(schema.get("nullable"))
        types = schema.get("type")
        if isinstance(types, list):
            out.nullable = out.nullable or "null" in types
            rest = [t for t in types if t != "null"]
            if len(rest) != 1:
                where = child(pointer, "type")
                out.comments.append(f"a union of types {types}: a json field (any JSON value) [{where}]")
                return UNION
            schema = {**schema, "type": rest[0]}
        for key in ("anyOf", "oneOf"):
            variants = schema.get(key)
            if isinstance(variants, list):
                concrete = [v for v in variants if not (isinstance(v, Mapping) and v.get("type") == "null")]
                if len(concrete) == 1 and len(variants) == 2:
                    out.nullable = True
                    resolved, _ = self.safe_resolve(concrete[0], child(pointer, key, 0))
                    return resolved if isinstance(resolved, Mapping) else None
                out.comments.append(
                    f"{key} of {len(concrete)} variants: a json field (any JSON value, the variants "
                    f"not checked; the spec has no unions) [{child(pointer, key)}]"
                )
                out.nullable = out.nullable or len(concrete) < len(variants)
                return UNION
        parts = schema.get("allOf")
        if isinstance(parts, list) and len(parts) == 1 and "properties" not in schema:
            resolved, _ = self.safe_resolve(parts[0], child(pointer, "allOf", 0))
            return {**resolved, **{k: v for k, v in schema.items() if k != "allOf"}} if resolved else None
        return schema

    def set_type(self, out: Field, schema: Mapping[str, Any], pointer: str, inline_name: str) -> bool:
        kind = schema.get("type")
        if "enum" in schema:
            values = [v for v in schema["enum"] if v is not None]
            if all(isinstance(v, str) for v in values) and values:
                out.type, out.values = "enum", values
                out.nullable = out.nullable or None in schema["enum"]
                return True
            out.comments.append(
                self.warn(
                    "FG307", child(pointer, "enum"), "a non-string enum is not expressible; its values are not checked"
                )
            )
        if self.is_object(schema):
            out.type = self.model(schema, pointer, inline_name)
            return True
        if kind == "array":
            return self.set_items(out, schema, pointer, inline_name)
        if kind == "object" or (kind is None and "additionalProperties" in schema):
            self.warn("FG303", pointer, "a free-form object or map is not expressible; the field is not carried")
            return False
        fmt = schema.get("format")
        if kind in ("integer", "number", "boolean"):
            out.type = str(kind)
            if fmt is not None and str(fmt) not in NUMERIC_FORMATS:
                self.unknown_format(out, fmt, pointer)
            return True
        if kind == "string" or kind is None:
            out.type = FORMATS.get(str(fmt), "string")
            if fmt == "binary":
                self.warn("FG310", pointer, "binary data is not expressible; the field is not carried")
                return False
            if fmt is not None and str(fmt) not in FORMATS:
                self.unknown_format(out, fmt, pointer)
            return True
        self.warn("FG310", pointer, f"type {kind!r} is not expressible; the field is not carried")
        return False

    def unknown_format(self, out: Field, fmt: Any, pointer: str) -> None:
        out.comments.append(
            self.warn(
                "FG335",
                child(pointer, "format"),
                f"format {str(fmt)!r} is not checked (the spec checks date, date-time, uuid): a plain {out.type}",
            )
        )

    def set_items(self, out: Field, schema: Mapping[str, Any], pointer: str, inline_name: str) -> bool:
        item_schema = schema.get("items")
        if not isinstance(item_schema, Mapping):
            self.warn("FG310", pointer, "an array without items is not expressible; the field is not carried")
            return False
        item = self.field("item", item_schema, child(pointer, "items"), True, context=inline_name)
        if item is not None and item.nullable:
            out.comments.append(f"null items are not accepted [{child(pointer, 'items')}]")
        if item is None:
            return False
        if item.type == "json":  # a list of unions: the whole list is one JSON value
            out.type = "json"
            out.comments += item.comments
            return True
        if item.type in ("list", "enum"):
            self.warn(
                "FG310", child(pointer, "items"), f"a list of {item.type} is not expressible; the field is not carried"
            )
            return False
        out.type, out.items = "list", item.type
        out.comments += item.comments
        out.constraints.update(item.constraints)  # value bounds of a list bound each item (spec §5.10)
        return True

    def note_constraints(self, out: Field, schema: Mapping[str, Any], pointer: str) -> None:
        """The schema's constraints, default and examples on `out`, each checked as `validate` will check it."""
        carried = constraints_of(self.checks, schema, pointer, out.type, value_level=out.type != "list")
        out.constraints.update(carried.constraints)
        self.report(out, carried)
        field_type = type_of(out)
        if field_type is None:
            return
        if schema.get("default") is not None:
            default = json_value(schema["default"])
            why = (
                why_refused(self.checks, default, field_type, out.nullable, out.constraints)
                if not out.required
                else None
            )
            if why:
                out.comments.append(self.warn("FG334", child(pointer, "default"), f"the default {why}; not carried"))
            else:
                out.default = default
        self.add_examples(out, field_type, schema_examples(schema, pointer))

    def report(self, out: Field, carried: Carried) -> None:
        for problem in carried.problems:
            out.comments.append(self.warn(problem.code, problem.pointer, problem.message))

    def add_examples(self, out: Field, field_type: TypeIR, found: list[tuple[Any, str]]) -> None:
        """Examples that `validate` would accept; each other one is a warning (an example the field refuses
        would teach an agent to send something wrong)."""
        for example, pointer in found:
            example = json_value(example)
            if not _toml_writable(example):
                continue  # a null inside: TOML cannot write it, and the schema's type already says enough
            why = why_refused(self.checks, example, field_type, False, out.constraints)
            if why:
                out.comments.append(self.warn("FG334", pointer, f"the example {why}; not carried"))
            elif example not in out.examples:
                out.examples.append(example)

    # --- operations → tools ------------------------------------------------------------------------

    def operations(self) -> None:
        paths = self.doc.data.get("paths")
        for path, item in items(paths):
            item_pointer = child("#/paths", path)
            try:
                resolved, _ = self.doc.resolve(item, item_pointer)
            except RefError as exc:
                self.warn("FG302", item_pointer, str(exc))
                continue
            shared = resolved.get("parameters") or [] if isinstance(resolved, Mapping) else []
            for method, operation in items(resolved):
                if method in METHODS and isinstance(operation, Mapping):
                    self.operation(path, method, operation, child(item_pointer, method), shared, item_pointer)
        for name, _ in items(self.doc.data.get("webhooks")):
            self.warn(
                "FG320",
                child("#/webhooks", name),
                "a webhook is a call the API makes, not an operation it serves; not imported",
            )

    def tags(self, operation: Mapping[str, Any], pointer: str, comments: list[str]) -> list[str]:
        """The operation's tags as spec tags (`[a-z0-9][a-z0-9_-]*`, FG187): lower case, each run of other
        characters one `-` (`Special Events` → `special-events`); one with nothing left is reported."""
        found: list[str] = []
        raw = operation.get("tags")
        for index, tag in enumerate(raw if isinstance(raw, list) else []):
            name = normalized_tag(tag) if isinstance(tag, str) else None
            if name is None:
                why = "has no letter or digit a spec tag can keep" if isinstance(tag, str) else "is not a string"
                comments.append(self.warn("FG336", child(pointer, "tags", index), f"tag {tag!r} {why}; not carried"))
                continue
            if name != str(tag):
                comments.append(f"tag {tag!r} is {name!r} here (spec tags are [a-z0-9][a-z0-9_-]*)")
            if name not in found:
                found.append(name)
        return found

    def selected(self, operation: Mapping[str, Any], name: str, path: str, method: str) -> bool:
        wanted = self.filters
        raw = operation.get("tags")
        tags = {t for t in raw if isinstance(t, str)} if isinstance(raw, list) else set()
        tags |= {n for t in tags if (n := normalized_tag(t)) is not None}
        if (wanted.tags and not tags & wanted.tags) or tags & wanted.exclude_tags:
            return False
        if (wanted.methods and method not in wanted.methods) or method in wanted.exclude_methods:
            return False
        if wanted.paths and not any(fnmatch.fnmatchcase(path, glob) for glob in wanted.paths):
            return False
        if any(fnmatch.fnmatchcase(path, glob) for glob in wanted.exclude_paths):
            return False
        operation_id = str(operation.get("operationId") or name)
        if wanted.exclude_ops is not None and wanted.exclude_ops.search(operation_id):
            return False
        return wanted.include_ops is None or bool(wanted.include_ops.search(operation_id))

    def operation(
        self, path: str, method: str, operation: Mapping[str, Any], pointer: str, shared: list[Any], item_pointer: str
    ) -> None:
        name = tool_name(str(operation.get("operationId") or f"{method} {path}"))
        if not self.selected(operation, name, path, method):
            return
        if method in ("options", "trace"):
            self.warn("FG321", pointer, f"{method.upper()} operations are not imported")
            return
        for key in ("callbacks",):
            if key in operation:
                self.warn(
                    "FG322", child(pointer, key), "callbacks are not expressible; the tool is imported without them"
                )
        if name in self.out.tools:
            unique = tool_name(f"{name}_{method}")
            self.warn("FG323", pointer, f"tool name {name!r} is taken; this one is {unique!r}")
            name = unique
        tool = Tool(name, pointer, method, path, KINDS.get(method, "action"))
        tool.description = _summary(operation) if self.compact else _description(operation)
        tool.tags = self.tags(operation, pointer, tool.comments)
        if not self.body(tool, operation, pointer):
            return
        self.parameters(tool, shared, item_pointer, operation.get("parameters") or [], pointer)
        self.response(tool, operation, pointer)
        self.out.tools[name] = tool

    def parameters(self, tool: Tool, shared: list[Any], item_pointer: str, own: list[Any], pointer: str) -> None:
        merged: dict[tuple[str, str], tuple[Mapping[str, Any], str]] = {}
        for base, params in ((item_pointer, shared), (pointer, own)):
            if not isinstance(params, list):
                tool.comments.append(
                    self.warn("FG312", child(base, "parameters"), "parameters is not a list; none of them is an input")
                )
                continue
            for index, param in enumerate(params):
                param_pointer = child(base, "parameters", index)
                resolved, _ = self.safe_resolve(param, param_pointer)
                if isinstance(resolved, Mapping) and "name" in resolved:
                    merged[(str(resolved["name"]), str(resolved.get("in")))] = (resolved, param_pointer)
        taken = {f.name for f in tool.input} | set(self.fillable_fields(tool))
        for (wire, where), (param, param_pointer) in merged.items():
            if where == "cookie":
                tool.comments.append(
                    self.warn("FG311", param_pointer, f"cookie parameter {wire!r} is not expressible; not an input")
                )
                continue
            if where == "header" and wire.lower() in IGNORED_HEADERS:
                continue  # OpenAPI says these are ignored: the client sets them
            if "schema" not in param:
                tool.comments.append(
                    self.warn("FG312", param_pointer, f"parameter {wire!r} has `content`, not a `schema`; not an input")
                )
                continue
            if param.get("style") not in (None, "simple", "form") or param.get("explode") is False:
                tool.comments.append(
                    self.warn(
                        "FG312",
                        param_pointer,
                        f"parameter {wire!r}: style {param.get('style')!r} / explode=false is sent as form, exploded",
                    )
                )
            arg = parameter_identifier(wire)
            if arg in taken:
                arg = unique(parameter_identifier(f"{where}_{wire}"), taken)
                tool.comments.append(f"{where} parameter {wire!r} is the input {arg!r} (another input has its name)")
            required = bool(param.get("required")) or where == "path"
            mapped = self.field(arg, param["schema"], child(param_pointer, "schema"), required, context=tool.name)
            if mapped is None:
                tool.comments.append(f"parameter {wire!r} is not an input (see the warning at {param_pointer})")
                continue
            mapped.description = _text(param.get("description")) or mapped.description
            field_type = type_of(mapped)
            if not mapped.examples and field_type is not None:
                self.add_examples(mapped, field_type, self.parameter_examples(param, param_pointer))
            if mapped.type not in (
                "string",
                "integer",
                "number",
                "boolean",
                "date",
                "datetime",
                "uuid",
                "enum",
                "list",
            ):
                tool.comments.append(
                    self.warn("FG312", param_pointer, f"parameter {wire!r} is an object; not an input")
                )
                continue
            if mapped.default is not None and mapped.required:
                mapped.default = None
            taken.add(arg)
            tool.input.append(mapped)
            tool.params.append(Param(arg, wire, where))

    def parameter_examples(self, param: Mapping[str, Any], pointer: str) -> list[tuple[Any, str]]:
        """A parameter's `example`, or the values of its named `examples` (Example Objects, maybe `$ref`s)."""
        if "example" in param:
            return [(param["example"], child(pointer, "example"))]
        found: list[tuple[Any, str]] = []
        for name, example in items(param.get("examples")):
            resolved, _ = self.safe_resolve(example, child(pointer, "examples", name))
            if isinstance(resolved, Mapping) and "value" in resolved:
                found.append((resolved["value"], child(pointer, "examples", name, "value")))
        return found

    def fillable_fields(self, tool: Tool) -> list[str]:
        if tool.input_from is None:
            return []
        model, operation = tool.input_from.split(".")
        return self.out.models[model].fillable.get(operation, [])

    def body(self, tool: Tool, operation: Mapping[str, Any], pointer: str) -> bool:
        """Map the request body; False (with a warning) if the operation cannot be imported without it."""
        if "requestBody" not in operation:
            return True
        body_pointer = child(pointer, "requestBody")
        body, _ = self.safe_resolve(operation["requestBody"], body_pointer)
        content: Any = body.get("content") if isinstance(body, Mapping) else None
        media = [m for m, _ in items(content)]
        json_type = next((m for m in media if m == "application/json" or m.endswith("+json")), None)
        if json_type is None and FORM in media:
            json_type, tool.form = FORM, True
        if json_type is None:
            self.warn(
                "FG313",
                child(body_pointer, "content"),
                f"the request body is only {', '.join(media) or 'declared without content'}"
                "; the operation is not imported (only JSON and form bodies are)",
            )
            return False
        others = [m for m in media if m != json_type]
        if others:
            tool.comments.append(f"the body is sent as {json_type}; also accepted upstream: {', '.join(others)}")
        schema = content[json_type].get("schema") if isinstance(content[json_type], Mapping) else None
        schema_pointer = child(body_pointer, "content", json_type, "schema")
        ref = schema.get("$ref") if isinstance(schema, Mapping) else None
        resolved, resolved_pointer = self.safe_resolve(schema, schema_pointer)
        if isinstance(ref, str) and self.is_object(resolved):
            self.body_from_model(tool, self.model_for_ref(ref) or "", body_pointer)
        elif self.is_object(resolved):
            self.body_from_model(
                tool, self.model(resolved, resolved_pointer, model_name(f"{tool.name}_body")), body_pointer
            )
        else:
            whole = self.field("body", schema, schema_pointer, bool(body.get("required")), context=tool.name)
            if whole is None or tool.form:
                self.warn(
                    "FG313",
                    schema_pointer,
                    "the request body's schema is not expressible (a form body must be an object)"
                    "; the operation is not imported",
                )
                return False
            tool.input.append(whole)
            tool.whole_body = "body"
        if isinstance(body, Mapping) and not body.get("required") and tool.whole_body is None:
            tool.comments.append("the body is optional upstream; its required fields are required here")
        return True

    def body_from_model(self, tool: Tool, name: str, body_pointer: str) -> None:
        model = self.out.models[name]
        operation = BODY_OPERATIONS.get(tool.method, "create")
        writable = [f.name for f in model.fields if f.name not in model.guarded]
        fillable = model.fillable.setdefault(operation, writable)
        tool.input_from = f"{name}.{operation}"
        for arg in fillable:
            tool.params.append(Param(arg, arg, "body"))
        if operation == "update":
            tool.comments.append("PATCH: every body field is optional (input_from ….update); only those sent go up")

    def errors(self, tool: Tool, operation: Mapping[str, Any], pointer: str) -> None:
        """`errors`: every code the httpx handler can raise, meant as the operation's responses describe
        it (their descriptions), else generically; documented error statuses it does not map are noted."""
        described: dict[str, list[str]] = {code: [] for code in RAISES}
        unmapped: list[str] = []
        for status, response in items(operation.get("responses")):
            if not (status.isdigit() and status[0] in "45"):
                continue
            resolved, _ = self.safe_resolve(response, child(pointer, "responses", status))
            text = _text(resolved.get("description")) if isinstance(resolved, Mapping) else None
            first_line = (text or "").splitlines()[0][:DESCRIPTION_LIMIT] if text else ""
            if int(status) in MAPPED_STATUSES:
                code = next(c for c, statuses in RAISES.items() if int(status) in statuses)
                described[code].append(f"{status}: {first_line or GENERIC[code]}")
            else:
                unmapped.append(f"{status}" + (f" ({first_line})" if first_line else ""))
        generic = {code: "" if self.compact else GENERIC[code] for code in described}  # --compact: the code alone
        tool.errors = {code: "; ".join(texts) or generic[code] for code, texts in described.items()}
        if unmapped:
            tool.comments.append(
                f"documented {', '.join(unmapped)}: the httpx handler reports it as INTERNAL_ERROR "
                "(it maps 400, 404, 409, 422, 429 and 503)"
            )

    def response(self, tool: Tool, operation: Mapping[str, Any], pointer: str) -> None:
        self.errors(tool, operation, pointer)
        responses: Any = operation.get("responses")
        codes = [c for c, _ in items(responses)]
        success = next((c for c in codes if c.startswith("2")), None)
        if success is None:
            tool.comments.append("no 2xx response is documented: the tool returns no data")
            return
        response_pointer = child(pointer, "responses", success)
        response, _ = self.safe_resolve(responses[success], response_pointer)
        content: Any = response.get("content") if isinstance(response, Mapping) else None
        media = [m for m, _ in items(content)]
        if not media:
            return
        json_type = next((m for m in media if m == "application/json" or m.endswith("+json")), None)
        if json_type is None:
            tool.comments.append(
                self.warn(
                    "FG314",
                    child(response_pointer, "content"),
                    f"the {success} response is {', '.join(media)}, not JSON: the tool returns no data",
                )
            )
            return
        media_object = content[json_type] if isinstance(content[json_type], Mapping) else {}
        schema_pointer = child(response_pointer, "content", json_type, "schema")
        returned = self.field(
            "result", media_object.get("schema"), schema_pointer, True, context=pascal_case(tool.name)
        )
        if returned is not None and returned.type in self.out.models:
            tool.returns = returned.type
        elif returned is not None and returned.type == "list" and returned.items in self.out.models:
            tool.returns = f"{returned.items}[]"
        else:
            shape = "not expressible" if returned is None else f"a {returned.type}, not an object"
            tool.comments.append(
                self.warn(
                    "FG314",
                    schema_pointer,
                    f"the {success} response is {shape}: the tool "
                    "returns no data (`returns` names a model or a list of one)",
                    hint="return it from a presenter with an inline schema, or wrap it in an object in the handler",
                )
            )


METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})


def unsafe_default_server(url: str) -> str | None:
    """Why `url` must not be a default upstream (a cloud metadata service or an address that is no
    upstream's), or None."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return "a cloud metadata service"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_link_local:
        return "link-local (169.254.169.254 is the cloud metadata service)"
    if address.is_unspecified or address.is_multicast:
        return "not an address an upstream answers on"
    return None


def normalized_tag(tag: str) -> str | None:
    name = TAG_CHARACTERS.sub("-", tag.strip().lower()).strip("-_")
    return name or None


def type_of(out: Field) -> TypeIR | None:
    """The spec type a mapped field will have, for checking its default and examples; None for a model."""
    if out.type == "enum":
        return TypeIR("enum", enum_values=tuple(out.values or ()))
    if out.type == "list" and out.items is not None:
        item = TypeIR(out.items) if out.items in SCALAR_KINDS else TypeIR("model", model=out.items)
        return TypeIR("list", items=item)
    return TypeIR(out.type) if out.type in SCALAR_KINDS else None


def schema_examples(schema: Mapping[str, Any], pointer: str) -> list[tuple[Any, str]]:
    """JSON Schema's `examples` (an array; 3.1) and OpenAPI 3.0's `example` (one value)."""
    found: list[tuple[Any, str]] = []
    if isinstance(schema.get("examples"), list):
        found += [(v, child(pointer, "examples", i)) for i, v in enumerate(schema["examples"])]
    if "example" in schema:
        found.append((schema["example"], child(pointer, "example")))
    return found


def _toml_writable(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, list):
        return all(_toml_writable(v) for v in value)
    if isinstance(value, Mapping):
        return all(_toml_writable(v) for v in value.values())
    return isinstance(value, str | int | float | bool)


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _summary(operation: Mapping[str, Any]) -> str | None:
    """`--compact`: the summary, else the description's first paragraph (what a model chooses a tool by)."""
    summary = _text(operation.get("summary"))
    if summary:
        return summary
    description = _text(operation.get("description"))
    return description.split("\n\n", 1)[0].strip() if description else None


def _description(operation: Mapping[str, Any]) -> str | None:
    summary, description = _text(operation.get("summary")), _text(operation.get("description"))
    if summary and description and description != summary:
        return f"{summary}\n\n{description}" if not description.startswith(summary) else description
    return summary or description


def _kind(schema: Any, document: Document) -> Any:
    try:
        resolved, _ = document.resolve(schema, "#")
    except RefError:
        return None
    return resolved.get("type") if isinstance(resolved, Mapping) else None


def map_document(document: Document, filters: Filters, checks: Checks, *, compact: bool = False) -> Imported:
    """Every component schema, then every selected operation (models they name inline are added)."""
    mapper = Mapper(document, filters, checks, compact=compact)
    mapper.out.compact = compact
    for name, _ in items((document.data.get("components") or {}).get("schemas")):
        mapper.model_for_ref(f"{SCHEMAS}{name}")
    mapper.operations()
    return mapper.out
