"""Names: the patterns names in a spec must match, and how spec names become Python names."""

from __future__ import annotations

import keyword
import re

SERVER_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}\Z")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
# Attribute names the generated input objects use themselves.
RESERVED_FIELDS = frozenset({"fields_set"})
# A fixed list, not the running interpreter's: a spec must be valid or not whatever Python runs fusiongen.
# Soft keywords are legal identifiers, but code that names things `match` or `type` reads badly.
RESERVED_WORDS = frozenset(keyword.kwlist) | {"match", "case", "type", "_"} | RESERVED_FIELDS
# What generated servers import: a package of that name would shadow it.
RESERVED_PACKAGES = frozenset({"mcp", "mcp_types", "pydantic", "anyio", "starlette", "uvicorn", "orjson"})


def snake_case(name: str) -> str:
    """`LineItem` → `line_item`, `invoice.get` → `invoice_get`."""
    name = re.sub(r"[.\-\s]+", "_", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return name.lower()


def pascal_case(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[._\-\s]+", name) if part)
