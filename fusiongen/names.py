"""Names: the patterns names in a spec must match, and how spec names become Python names."""

from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import re
from importlib import resources

SERVER_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}\Z")
# What LLM APIs accept as a function name (OpenAI's rule, the strictest common one): `[server] tool_names = "snake"`.
WIRE_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
# A domain error code a tool declares (`errors`): as the runtime's ToolError checks it when raised
# (runtime/_results.py; tests/test_tool_errors.py compares the two).
ERROR_CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\Z")
ERROR_CODE_MAX_LENGTH = 64
RESERVED_ERROR_CODES = frozenset({"INTERNAL_ERROR", "OUTPUT_INVALID", "VALIDATION_ERROR", "IN_DOUBT"})
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A code block's fence info (```python, ```{r}): on the fence's line, so no line break, no other control
# character and no backtick (which would make the line not a fence) may end the block early.
CODE_LANGUAGE = re.compile("[^`\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]{0,100}\\Z")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
# Attribute names the generated input objects use themselves.
RESERVED_FIELDS = frozenset({"fields_set"})
# A fixed list, not the running interpreter's: a spec must be valid or not whatever Python runs fusiongen.
# Soft keywords are legal identifiers, but code that names things `match` or `type` reads badly.
RESERVED_WORDS = frozenset(keyword.kwlist) | {"match", "case", "type", "_"} | RESERVED_FIELDS
# What generated servers import: a package of that name would shadow it.
RESERVED_PACKAGES = frozenset({"mcp", "mcp_types", "pydantic", "anyio", "starlette", "uvicorn", "orjson"})

# The standard library's top-level modules (Python 3.11 to 3.14, those later versions removed included), as
# a literal: a package or handler module of that name would shadow it or be shadowed, whichever Python runs.
STDLIB_MODULES = frozenset(
    {
        "__future__",
        "__main__",
        "__phello__",
        "_abc",
        "_aix_support",
        "_android_support",
        "_apple_support",
        "_ast",
        "_asyncio",
        "_bisect",
        "_blake2",
        "_bootsubprocess",
        "_bz2",
        "_codecs",
        "_codecs_cn",
        "_codecs_hk",
        "_codecs_iso2022",
        "_codecs_jp",
        "_codecs_kr",
        "_codecs_tw",
        "_collections",
        "_collections_abc",
        "_colorize",
        "_compat_pickle",
        "_compression",
        "_contextvars",
        "_crypt",
        "_csv",
        "_ctypes",
        "_curses",
        "_curses_panel",
        "_datetime",
        "_dbm",
        "_decimal",
        "_elementtree",
        "_frozen_importlib",
        "_frozen_importlib_external",
        "_functools",
        "_gdbm",
        "_hashlib",
        "_heapq",
        "_imp",
        "_interpchannels",
        "_interpqueues",
        "_interpreters",
        "_io",
        "_ios_support",
        "_json",
        "_locale",
        "_lsprof",
        "_lzma",
        "_markupbase",
        "_md5",
        "_msi",
        "_multibytecodec",
        "_multiprocessing",
        "_opcode",
        "_opcode_metadata",
        "_operator",
        "_osx_support",
        "_overlapped",
        "_pickle",
        "_posixshmem",
        "_posixsubprocess",
        "_py_abc",
        "_pydatetime",
        "_pydecimal",
        "_pyio",
        "_pylong",
        "_pyrepl",
        "_queue",
        "_random",
        "_remote_debugging",
        "_scproxy",
        "_sha1",
        "_sha256",
        "_sha3",
        "_sha512",
        "_signal",
        "_sitebuiltins",
        "_socket",
        "_sqlite3",
        "_sre",
        "_ssl",
        "_stat",
        "_statistics",
        "_string",
        "_strptime",
        "_struct",
        "_suggestions",
        "_symtable",
        "_sysconfig",
        "_thread",
        "_threading_local",
        "_tkinter",
        "_tokenize",
        "_tracemalloc",
        "_types",
        "_typing",
        "_uuid",
        "_warnings",
        "_weakref",
        "_weakrefset",
        "_winapi",
        "_wmi",
        "_zoneinfo",
        "_zstd",
        "abc",
        "aifc",
        "annotationlib",
        "antigravity",
        "argparse",
        "array",
        "ast",
        "asynchat",
        "asyncio",
        "asyncore",
        "atexit",
        "audioop",
        "base64",
        "bdb",
        "binascii",
        "bisect",
        "builtins",
        "bz2",
        "cProfile",
        "calendar",
        "cgi",
        "cgitb",
        "chunk",
        "cmath",
        "cmd",
        "code",
        "codecs",
        "codeop",
        "collections",
        "colorsys",
        "compileall",
        "compression",
        "concurrent",
        "configparser",
        "contextlib",
        "contextvars",
        "copy",
        "copyreg",
        "crypt",
        "csv",
        "ctypes",
        "curses",
        "dataclasses",
        "datetime",
        "dbm",
        "decimal",
        "difflib",
        "dis",
        "distutils",
        "doctest",
        "email",
        "encodings",
        "ensurepip",
        "enum",
        "errno",
        "faulthandler",
        "fcntl",
        "filecmp",
        "fileinput",
        "fnmatch",
        "fractions",
        "ftplib",
        "functools",
        "gc",
        "genericpath",
        "getopt",
        "getpass",
        "gettext",
        "glob",
        "graphlib",
        "grp",
        "gzip",
        "hashlib",
        "heapq",
        "hmac",
        "html",
        "http",
        "idlelib",
        "imaplib",
        "imghdr",
        "imp",
        "importlib",
        "inspect",
        "io",
        "ipaddress",
        "itertools",
        "json",
        "keyword",
        "lib2to3",
        "linecache",
        "locale",
        "logging",
        "lzma",
        "mailbox",
        "mailcap",
        "marshal",
        "math",
        "mimetypes",
        "mmap",
        "modulefinder",
        "msilib",
        "msvcrt",
        "multiprocessing",
        "netrc",
        "nis",
        "nntplib",
        "nt",
        "ntpath",
        "nturl2path",
        "numbers",
        "opcode",
        "operator",
        "optparse",
        "os",
        "ossaudiodev",
        "pathlib",
        "pdb",
        "pickle",
        "pickletools",
        "pipes",
        "pkgutil",
        "platform",
        "plistlib",
        "poplib",
        "posix",
        "posixpath",
        "pprint",
        "profile",
        "pstats",
        "pty",
        "pwd",
        "py_compile",
        "pyclbr",
        "pydoc",
        "pydoc_data",
        "pyexpat",
        "queue",
        "quopri",
        "random",
        "re",
        "readline",
        "reprlib",
        "resource",
        "rlcompleter",
        "runpy",
        "sched",
        "secrets",
        "select",
        "selectors",
        "shelve",
        "shlex",
        "shutil",
        "signal",
        "site",
        "smtpd",
        "smtplib",
        "sndhdr",
        "socket",
        "socketserver",
        "spwd",
        "sqlite3",
        "sre_compile",
        "sre_constants",
        "sre_parse",
        "ssl",
        "stat",
        "statistics",
        "string",
        "stringprep",
        "struct",
        "subprocess",
        "sunau",
        "symtable",
        "sys",
        "sysconfig",
        "syslog",
        "tabnanny",
        "tarfile",
        "telnetlib",
        "tempfile",
        "termios",
        "textwrap",
        "this",
        "threading",
        "time",
        "timeit",
        "tkinter",
        "token",
        "tokenize",
        "tomllib",
        "trace",
        "traceback",
        "tracemalloc",
        "tty",
        "turtle",
        "turtledemo",
        "types",
        "typing",
        "unicodedata",
        "unittest",
        "urllib",
        "uu",
        "uuid",
        "venv",
        "warnings",
        "wave",
        "weakref",
        "webbrowser",
        "winreg",
        "winsound",
        "wsgiref",
        "xdrlib",
        "xml",
        "xmlrpc",
        "zipapp",
        "zipfile",
        "zipimport",
        "zlib",
        "zoneinfo",
    }
)


def snake_case(name: str) -> str:
    """`LineItem` → `line_item`, `invoice.get` → `invoice_get`."""
    name = re.sub(r"[.\-\s]+", "_", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return name.lower()


def wire_tool_name(name: str, style: str) -> str:
    """The name the model sees for spec tool `name`: itself ("dotted"), or with each run of characters
    outside `[A-Za-z0-9_-]` as one `_` ("snake": `invoice.get` → `invoice_get`). Case is kept, unlike
    `snake_case`: the wire name is what the model calls, not a Python name."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name) if style == "snake" else name


def generated_tool_name(workflow: str, suffix: str, style: str, exposition: str = "flat") -> str:
    """The wire name of a tool fusiongen generates for a workflow: `invoice.start`, or `invoice_start` (or, grouped,
    `invoice(action=start)`)."""
    return exposed_tool_name(f"{workflow}.{suffix}", style, exposition)


def group_and_action(name: str, style: str) -> tuple[str, str] | None:
    """With `[server] exposition = "grouped"`: the served tool spec tool `name` is an action of, and the action
    (`invoice.get` → `("invoice", "get")`: the group is the part before the first ".", in the spec's wire style;
    the action is the rest with every run of other characters as "_"). None for a name without a "."."""
    if "." not in name:
        return None
    group, action = name.split(".", 1)
    return wire_tool_name(group, style), wire_tool_name(action, "snake")


def exposed_tool_name(name: str, style: str, exposition: str = "flat") -> str:
    """How every text the model reads names spec tool `name` (descriptions, suggestions, refusals, the
    workflow's allowed tools): its wire name, or, grouped, the served tool with its action,
    `invoice(action=get)`. Generated servers route by this name too; grouped, the served tool and its
    `action` argument are mapped to it (runtime/_grouping.py)."""
    grouped = group_and_action(name, style) if exposition == "grouped" else None
    if grouped is None:
        return wire_tool_name(name, style)
    return f"{grouped[0]}(action={grouped[1]})"


def pascal_case(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[._\-\s]+", name) if part)


# The one registry of the runtime modules copied into generated servers (fusiongen/runtime/<name>.py, the same file
# name there): which servers get each (`when`: every server, or only those whose spec has workflows, whose
# presenters use expressions, which are grouped, or which have resources or prompts: `catalog`) and why. The
# generator copies by it (codegen/render.py), the tests check the golden servers and the docs against it
# (tests/test_runtime_source.py, tests/test_docs.py).
@dataclasses.dataclass(frozen=True)
class RuntimeModule:
    name: str
    when: str  # one of RUNTIME_CONDITIONS
    why: str
    # Whether the module's public names are entry points of their own: code outside the server (the user's tests)
    # calls them, so the build keeps them even when nothing generated does (codegen/prune.py).
    public_entry_points: bool = False


RUNTIME_CONDITIONS = ("always", "workflows", "expressions", "grouped", "catalog", "http", "auth")
RUNTIME: tuple[RuntimeModule, ...] = (
    RuntimeModule("_catalog", "catalog", "resources, prompts and completion (only a spec with resources or prompts)"),
    RuntimeModule("_auth", "auth", "bearer-token verifiers for --auth (HTTP), and the spec's requires checks"),
    RuntimeModule("_dependencies", "always", "the version ranges pyproject.toml declares, checked at import"),
    RuntimeModule("_expressions", "expressions", "the total helpers compiled presenter expressions call"),
    RuntimeModule("_fast_path", "always", "the serving fast path, fenced; imported only when serving"),
    RuntimeModule("_gate", "workflows", "the workflow gate, W.start/W.status, per-session listing"),
    RuntimeModule("_grouping", "grouped", "grouped exposition: one tool per group, its action an argument"),
    RuntimeModule("_identity", "always", "the caller's identity as a tool call sees it"),
    RuntimeModule("_presenting", "always", "how a presented result reads: envelope, guidance, UI blocks, stale notice"),
    RuntimeModule("_results", "always", "what a call answers: result builders, errors, the handler's ToolError"),
    RuntimeModule("_runtime", "always", "the call path: the call and audit logs, handler binding, run_tool"),
    RuntimeModule("_cli", "always", "python -m's command line: the options, checked as parsed, and their extras"),
    RuntimeModule("_http", "http", "streamable HTTP (--http): Host/Origin checks, the app, session fairness"),
    RuntimeModule("_observability", "always", "logging with credentials redacted, tracing (--otel), store readiness"),
    RuntimeModule("_serving", "always", "python -m: serving over stdio (HTTP in _http, imported with --http), signals"),
    RuntimeModule("_stdio", "always", "the stdio transport on the event loop"),
    RuntimeModule("_store_base", "workflows", "the state store contract and the lease protocol"),
    RuntimeModule("_surface", "always", "the exposure filter: --expose and --tags"),
    RuntimeModule("_values", "always", "values: reading handler data, input and output checks, casts (no SDK import)"),
    RuntimeModule("redis_store", "workflows", "the Redis state store (the redis extra)"),
    RuntimeModule("state_store", "workflows", "the memory and SQLite state stores, open_store"),
    # Always: the tests `fusiongen init` scaffolds and the generated README's testing section import it; nothing
    # in the server does, so it costs a deployment no import.
    RuntimeModule(
        "testing", "always", "for the user's tests: call a tool in-process, read the outcome", public_entry_points=True
    ),
)
RUNTIME_MODULES = tuple(module.name for module in RUNTIME)


@functools.cache
def runtime_source(module: str) -> str:
    """The text of `fusiongen/runtime/<module>.py`, read as data (nothing in fusiongen imports it)."""
    if module not in RUNTIME_MODULES:
        raise KeyError(module)
    return resources.files("fusiongen.runtime").joinpath(f"{module}.py").read_text(encoding="utf-8")


@functools.cache
def runtime_exports(module: str) -> frozenset[str]:
    """Every name generated code may import from a runtime module: its public top-level definitions and the
    names it re-exports from a sibling (`from ._x import A as A`, the explicit re-export idiom) (in
    `_expressions`, the `_x_` names). Generated modules import those their code uses (`codegen.imports`), so
    a name the spec generates must not be one of them (lowering checks it)."""
    names: list[str] = []
    for node in ast.parse(runtime_source(module)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.level == 1:  # `from ._x import A as A`: re-exported
            names += [alias.name for alias in node.names if alias.asname == alias.name]
    if module == "_expressions":  # the expression helpers are all prefixed: they live among user data names
        return frozenset(n for n in names if n.startswith("_x_"))
    return frozenset(n for n in names if not n.startswith("_") and n != "logger")
