"""What each handler can do, read from the handler module's text with libcst (it is never imported).

A handler's effects are the effectful calls in its body and, through the call graph, in the bodies of the
module's own functions it calls (and of every method of a module class it instantiates). A call is named by
what its callee resolves to through the module's imports (`import subprocess as sp` makes `sp.run` be
`subprocess.run`) and classified by the tables below: files, processes, network (an HTTP method other than
GET/HEAD/OPTIONS is a write), evaluated code, the environment. Constructs that hide the callee by design —
`__import__`, `importlib`, `getattr` on a module with a computed name, `globals()` — are reported as
"dynamic"; a call into any other module the analysis does not read (a database driver, the user's own
modules) is reported as "unknown", never assumed safe. docs/spec.md §6.8 says what this cannot see.

An HTTP method passed down as an argument (the OpenAPI importer's handlers call `call("GET", ...)`, which
calls `client().request(method, ...)`) is resolved at each call site that passes a string literal.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import libcst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from fusiongen.ir import EffectIR

FILES, PROCESSES, NETWORK, CODE, ENVIRONMENT, DYNAMIC, UNKNOWN = (
    "files",
    "processes",
    "network",
    "code",
    "environment",
    "dynamic",
    "unknown",
)
READ, WRITE, EXECUTE = "read", "write", "execute"
_Statement = libcst.SimpleStatementLine | libcst.BaseCompoundStatement  # what a module's body holds

# Callees (as resolved through the imports) with a known effect.
_OS_WRITES = "remove unlink rename renames replace mkdir makedirs rmdir removedirs chmod chown lchown link symlink"
_OS_WRITES += " truncate ftruncate write mkfifo mknod utime"
_SHUTIL_WRITES = (
    "copy copy2 copyfile copyfileobj copytree copymode copystat move rmtree make_archive unpack_archive chown"
)
_OS_PROCESSES = "system popen fork forkpty posix_spawn posix_spawnp kill killpg startfile"
_EXACT: dict[str, tuple[str, str]] = {
    **{f"os.{n}": (FILES, WRITE) for n in _OS_WRITES.split()},
    **{f"os.{n}": (FILES, READ) for n in ["listdir", "scandir", "walk", "stat", "read", "readlink"]},
    **{f"os.path.{n}": (FILES, READ) for n in ["exists", "isfile", "isdir", "getsize", "getmtime"]},
    **{f"shutil.{n}": (FILES, WRITE) for n in _SHUTIL_WRITES.split()},
    **{f"os.{n}": (PROCESSES, EXECUTE) for n in _OS_PROCESSES.split()},
    "asyncio.create_subprocess_exec": (PROCESSES, EXECUTE),
    "asyncio.create_subprocess_shell": (PROCESSES, EXECUTE),
    "pty.spawn": (PROCESSES, EXECUTE),
    "multiprocessing.Process": (PROCESSES, EXECUTE),
    "webbrowser.open": (PROCESSES, EXECUTE),
    "asyncio.open_connection": (NETWORK, WRITE),
    "asyncio.open_unix_connection": (NETWORK, WRITE),
    "eval": (CODE, EXECUTE),
    "exec": (CODE, EXECUTE),
    "compile": (CODE, EXECUTE),
    "breakpoint": (CODE, EXECUTE),
    "pickle.load": (CODE, EXECUTE),  # unpickling runs code named by the data
    "pickle.loads": (CODE, EXECUTE),
    "marshal.load": (CODE, EXECUTE),
    "marshal.loads": (CODE, EXECUTE),
    "shelve.open": (FILES, WRITE),
    "__import__": (DYNAMIC, DYNAMIC),
    "importlib.import_module": (DYNAMIC, DYNAMIC),
    "importlib.reload": (DYNAMIC, DYNAMIC),
    "importlib.__import__": (DYNAMIC, DYNAMIC),
    "globals": (DYNAMIC, DYNAMIC),
    "vars": (DYNAMIC, DYNAMIC),
    "locals": (DYNAMIC, DYNAMIC),
    "setattr": (DYNAMIC, DYNAMIC),
    "delattr": (DYNAMIC, DYNAMIC),
    "os.putenv": (ENVIRONMENT, WRITE),
    "os.unsetenv": (ENVIRONMENT, WRITE),
    "os.getenv": (ENVIRONMENT, READ),
    "os.getenvb": (ENVIRONMENT, READ),
    "os.environ.get": (ENVIRONMENT, READ),
    "os.environ.copy": (ENVIRONMENT, READ),
    "os.environ.items": (ENVIRONMENT, READ),
    "os.environ.keys": (ENVIRONMENT, READ),
    "os.environ.values": (ENVIRONMENT, READ),
    **{f"os.environ.{n}": (ENVIRONMENT, WRITE) for n in ("update", "pop", "popitem", "setdefault", "clear")},
    "urllib.request.urlretrieve": (NETWORK, WRITE),  # and writes a file
}
# Whole modules (and everything below them) with one effect.
_PREFIXES: dict[str, tuple[str, str]] = {
    "subprocess": (PROCESSES, EXECUTE),
    "os.exec": (PROCESSES, EXECUTE),  # execv, execvp, ...: matched as a name prefix
    "os.spawn": (PROCESSES, EXECUTE),
    "socket": (NETWORK, WRITE),  # a raw socket can send anything
    "ssl": (NETWORK, WRITE),
    "smtplib": (NETWORK, WRITE),
    "ftplib": (NETWORK, WRITE),
    "telnetlib": (NETWORK, WRITE),
    "http.client": (NETWORK, WRITE),
    "xmlrpc.client": (NETWORK, WRITE),
    "tempfile": (FILES, WRITE),
    "ctypes": (CODE, EXECUTE),  # native code
    "cffi": (CODE, EXECUTE),
    "runpy": (CODE, EXECUTE),
    "code": (CODE, EXECUTE),
    "codeop": (CODE, EXECUTE),
}
HTTP_LIBRARIES = ("httpx", "requests", "aiohttp")
READ_METHODS = frozenset({"get", "head", "options"})
WRITE_METHODS = frozenset({"post", "put", "patch", "delete"})
HTTP_CLIENTS = frozenset(
    {"httpx.Client", "httpx.AsyncClient", "requests.Session", "requests.session", "aiohttp.ClientSession"}
)
# Methods whose name alone says what they do (pathlib's; no common type shares them).
_FILE_METHODS = {
    **dict.fromkeys(("write_text", "write_bytes", "unlink", "touch", "mkdir", "rmdir", "symlink_to"), WRITE),
    **dict.fromkeys(("hardlink_to", "rmtree", "chmod"), WRITE),
    **dict.fromkeys(("read_text", "read_bytes", "iterdir", "glob", "rglob"), READ),
}
# Modules whose functions have no effect the classes above name: the pure standard library, typing helpers,
# pydantic. A call into any other module is "unknown".
_SAFE = """abc array asyncio base64 binascii bisect builtins calendar cmath collections contextlib contextvars copy
dataclasses datetime decimal difflib email enum errno fnmatch fractions functools hashlib heapq hmac html inspect io
ipaddress itertools json keyword locale logging math numbers operator os pathlib pprint random re secrets statistics
string struct sys textwrap threading time types typing typing_extensions unicodedata urllib.parse uuid warnings weakref
zoneinfo zlib pydantic annotated_types __future__"""
SAFE_MODULES = frozenset((*_SAFE.split(), *HTTP_LIBRARIES))
_BUILTINS = frozenset(
    {"open", "eval", "exec", "compile", "breakpoint", "__import__", "getattr", "globals", "vars", "locals"}
    | {"setattr", "delattr", "print", "input"}
)


@dataclass(frozen=True)
class _Site:
    """An effect found in one function; `method_param` names the parameter its HTTP method comes from."""

    effect: EffectIR
    method_param: str | None = None


@dataclass
class _Function:
    node: libcst.FunctionDef
    params: tuple[str, ...]  # positional parameters in order
    sites: list[_Site] = field(default_factory=list)
    calls: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)  # callee, its bound parameters


@dataclass(frozen=True)
class ModuleEffects:
    """The effects of every top-level function of a handler module, by name; `bound_elsewhere`: names the
    module binds by import or assignment (their code is elsewhere)."""

    functions: Mapping[str, tuple[EffectIR, ...]]
    bound_elsewhere: Mapping[str, EffectIR]

    def of(self, name: str) -> tuple[EffectIR, ...]:
        if name in self.functions:
            return self.functions[name]
        unknown = self.bound_elsewhere.get(name)
        return (unknown,) if unknown is not None else ()


def analyse(module: libcst.Module, package: str) -> ModuleEffects:
    """The effects of each top-level function of `module`; `package` is the generated server's (its runtime
    has no effect the handler's author controls)."""
    positions = _Positions(module)
    imports = _imports(module)
    top = {s.name.value: s for s in module.body if isinstance(s, libcst.FunctionDef)}
    class_defs = [s for s in module.body if isinstance(s, libcst.ClassDef)]
    classes = {c.name.value: [m for m in c.body.body if isinstance(m, libcst.FunctionDef)] for c in class_defs}
    clients = _module_clients(module, imports)
    context = _Context(imports, top, classes, package, positions, clients, _constants(module))
    functions: dict[str, _Function] = {}
    for name, node in top.items():
        functions[name] = context.scan(node, node)
    for class_def in class_defs:
        for method in classes[class_def.name.value]:
            functions[f"{class_def.name.value}.{method.name.value}"] = context.scan(method, class_def)
    resolved = _Resolver(functions)
    found = {name: resolved.effects(name, {}) for name in top}
    elsewhere: dict[str, EffectIR] = {}
    for statement in module.body:
        for name, origin in _bound_elsewhere(statement, imports):
            line, column = positions.where(statement, statement)
            elsewhere[name] = EffectIR(UNKNOWN, UNKNOWN, f"{origin} (bound here, not analysed)", line, column)
    return ModuleEffects(found, elsewhere)


class _Positions:
    """Where nodes are, resolved one top-level statement at a time, and only for statements that hold an effect:
    resolving a whole large module (an OpenAPI import's hundreds of one-line handlers) costs more than reading it.
    A statement's first line is counted from the code of those before it (its leading blank and comment lines
    included, as libcst keeps them with it)."""

    def __init__(self, module: libcst.Module) -> None:
        self.module = module
        self.starts: dict[int, int] = {}
        line = 1 + len(module.header)
        for statement in module.body:
            self.starts[id(statement)] = line
            line += module.code_for_node(statement).count("\n")
        self.resolved: dict[int, Mapping[libcst.CSTNode, CodeRange]] = {}

    def where(self, node: libcst.CSTNode, statement: _Statement) -> tuple[int, int]:
        """`node`'s 1-based line and column in the module; `statement` is the top-level statement holding it."""
        key = id(statement)
        if key not in self.resolved:
            wrapper = MetadataWrapper(
                libcst.Module(
                    body=[statement],
                    default_indent=self.module.default_indent,
                    default_newline=self.module.default_newline,
                ),
                unsafe_skip_copy=True,
            )
            self.resolved[key] = wrapper.resolve(PositionProvider)
        start = self.resolved[key][node].start
        return self.starts[key] + start.line - 1, start.column + 1


def _imports(module: libcst.Module) -> dict[str, str]:
    """Every name an import anywhere in the module binds → the dotted name it stands for."""
    found: dict[str, str] = {}

    class Finder(libcst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: libcst.SimpleStatementLine) -> bool:
            for small in node.body:  # imports are statements: the expressions beside them need no visit
                if isinstance(small, libcst.Import):
                    self.visit_Import(small)
                elif isinstance(small, libcst.ImportFrom):
                    self.visit_ImportFrom(small)
            return False

        def visit_Import(self, node: libcst.Import) -> None:
            for alias in node.names:
                dotted = _dotted(alias.name)
                if dotted is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, libcst.Name):
                    found[alias.asname.name.value] = dotted
                else:
                    found[dotted.split(".")[0]] = dotted.split(".")[0]

        def visit_ImportFrom(self, node: libcst.ImportFrom) -> None:
            base = _dotted(node.module) if node.module is not None else ""
            prefix = "." * len(node.relative) + (base or "")
            if isinstance(node.names, libcst.ImportStar):
                return
            for alias in node.names:
                name = _dotted(alias.name)
                bound = alias.asname.name if alias.asname else alias.name
                if name is not None and isinstance(bound, libcst.Name):
                    found[bound.value] = f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name

    module.visit(Finder())
    return found


def _dotted(node: libcst.BaseExpression | None) -> str | None:
    if isinstance(node, libcst.Name):
        return node.value
    if isinstance(node, libcst.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def _bound_elsewhere(statement: _Statement, imports: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """Top-level names bound to code defined elsewhere: `from x import f` and `f = something`."""
    if not isinstance(statement, libcst.SimpleStatementLine):
        return
    for small in statement.body:
        if isinstance(small, libcst.ImportFrom) and not isinstance(small.names, libcst.ImportStar):
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                if isinstance(bound, libcst.Name):
                    yield bound.value, imports.get(bound.value, bound.value)
        elif isinstance(small, libcst.Assign):
            for target in small.targets:
                if isinstance(target.target, libcst.Name):
                    yield target.target.value, "an assignment"


def _constants(module: libcst.Module) -> dict[str, str]:
    """Top-level `NAME = "text"` (or annotated): what an environment variable's name may be written as."""
    found: dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, libcst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, libcst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, libcst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            literal = _literal(value)
            if isinstance(target, libcst.Name) and literal is not None:
                found[target.value] = literal
    return found


def _module_clients(module: libcst.Module, imports: Mapping[str, str]) -> frozenset[str]:
    """Top-level names assigned an HTTP client (`client = httpx.Client(...)`)."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, libcst.SimpleStatementLine):
            for small in statement.body:
                if (
                    isinstance(small, libcst.Assign)
                    and isinstance(small.value, libcst.Call)
                    and _resolve(small.value.func, imports) in HTTP_CLIENTS
                ):
                    names.update(t.target.value for t in small.targets if isinstance(t.target, libcst.Name))
    return frozenset(names)


def _resolve(node: libcst.BaseExpression, imports: Mapping[str, str]) -> str | None:
    """What an expression names through the imports: `sp.run` → "subprocess.run"; a builtin by its name;
    `getattr(os, "system")` → "os.system"; None for anything else (a local value, a computed callee)."""
    if isinstance(node, libcst.Name):
        if node.value in imports:
            return imports[node.value]
        return node.value if node.value in _BUILTINS else None
    if isinstance(node, libcst.Attribute):
        base = _resolve(node.value, imports)
        return f"{base}.{node.attr.value}" if base is not None and base not in _BUILTINS else None
    if isinstance(node, libcst.Call) and _resolve(node.func, imports) == "getattr" and len(node.args) >= 2:
        base = _resolve(node.args[0].value, imports)
        name = _literal(node.args[1].value)
        if base is not None and base not in _BUILTINS and name is not None:
            return f"{base}.{name}"
    return None


def _literal(node: libcst.BaseExpression) -> str | None:
    if isinstance(node, libcst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _argument(call: libcst.Call, index: int, keyword: str) -> libcst.BaseExpression | None:
    """The argument passed as parameter `keyword`, at position `index`; None when not passed."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return positional[index].value if index < len(positional) else None


def _params(node: libcst.FunctionDef) -> tuple[str, ...]:
    return tuple(p.name.value for p in (*node.params.posonly_params, *node.params.params))


def _in_package(dotted: str, roots: frozenset[str]) -> bool:
    return any(dotted == root or dotted.startswith(root + ".") for root in roots)


@dataclass
class _Context:
    imports: Mapping[str, str]
    functions: Mapping[str, libcst.FunctionDef]  # the module's top-level functions
    classes: Mapping[str, list[libcst.FunctionDef]]
    package: str
    positions: _Positions
    module_clients: frozenset[str]
    constants: Mapping[str, str]  # top-level names assigned a string literal

    def scan(self, node: libcst.FunctionDef, statement: _Statement) -> _Function:
        """One function's sites and calls; `statement`: the top-level statement it is in (itself, or its class)."""
        function = _Function(node, _params(node))
        node.body.visit(_Scanner(self, function, _local_clients(node, self.imports), statement))
        return function

    def where(self, node: libcst.CSTNode, statement: _Statement) -> tuple[int, int]:
        return self.positions.where(node, statement)


def _local_clients(node: libcst.FunctionDef, imports: Mapping[str, str]) -> frozenset[str]:
    """Names in a function that hold an HTTP client: assigned one, bound by `with ... as`, or annotated so."""
    names: set[str] = set()
    for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
        if param.annotation is not None and _resolve(param.annotation.annotation, imports) in HTTP_CLIENTS:
            names.add(param.name.value)

    class Finder(libcst.CSTVisitor):
        def visit_Assign(self, assign: libcst.Assign) -> None:
            if isinstance(assign.value, libcst.Call) and _resolve(assign.value.func, imports) in HTTP_CLIENTS:
                names.update(t.target.value for t in assign.targets if isinstance(t.target, libcst.Name))

        def visit_AnnAssign(self, assign: libcst.AnnAssign) -> None:
            if (
                isinstance(assign.target, libcst.Name)
                and _resolve(assign.annotation.annotation, imports) in HTTP_CLIENTS
            ):
                names.add(assign.target.value)

        def visit_WithItem(self, item: libcst.WithItem) -> None:
            if (
                isinstance(item.item, libcst.Call)
                and _resolve(item.item.func, imports) in HTTP_CLIENTS
                and item.asname is not None
                and isinstance(item.asname.name, libcst.Name)
            ):
                names.add(item.asname.name.value)

    node.body.visit(Finder())
    return frozenset(names)


class _Scanner(libcst.CSTVisitor):
    """Collects one function's effectful calls and its calls of the module's own functions. Nested functions,
    lambdas and classes are scanned as part of it: whatever they can do, it can."""

    def __init__(self, context: _Context, function: _Function, clients: frozenset[str], statement: _Statement) -> None:
        self.context = context
        self.function = function
        self.clients = clients | context.module_clients
        self.statement = statement  # the top-level statement it is in: positions are resolved per statement

    def add(
        self,
        node: libcst.CSTNode,
        category: str,
        access: str,
        call: str,
        method_param: str | None = None,
        variable: tuple[str, bool] | None = None,
    ) -> None:
        line, column = self.context.where(node, self.statement)
        name, required = variable if variable is not None else (None, False)
        effect = EffectIR(category, access, call, line, column, variable=name, required=required)
        self.function.sites.append(_Site(effect, method_param))

    def _variable(self, node: libcst.BaseExpression | None) -> str | None:
        """An environment variable's name: a string literal, or a module constant assigned one."""
        if node is None:
            return None
        literal = _literal(node)
        if literal is None and isinstance(node, libcst.Name):
            literal = self.context.constants.get(node.value)
        return literal

    def visit_Call(self, node: libcst.Call) -> None:
        imports = self.context.imports
        func = node.func
        if isinstance(func, libcst.Name) and func.value not in imports:
            if func.value in self.context.functions:
                self.function.calls.append((func.value, self._bindings(node, func.value)))
                return
            if func.value in self.context.classes:
                for method in self.context.classes[func.value]:
                    self.function.calls.append((f"{func.value}.{method.name.value}", {}))
                return
        dotted = _resolve(func, imports)
        if dotted is not None:
            self._resolved(node, dotted)
        elif isinstance(func, libcst.Attribute):
            self._method(node, func)

    def _bindings(self, node: libcst.Call, callee: str) -> dict[str, str | None]:
        """The literal strings (or, passed down, this function's parameters) a call binds its callee's
        parameters to; other values bind to None."""
        target = self.context.functions[callee]
        bound: dict[str, str | None] = {}
        for index, name in enumerate(_params(target)):
            value = _argument(node, index, name)
            if value is None:
                continue
            literal = _literal(value)
            if literal is not None:
                bound[name] = "=" + literal
            elif isinstance(value, libcst.Name) and value.value in self.function.params:
                bound[name] = "@" + value.value
            else:
                bound[name] = None
        return bound

    def _resolved(self, node: libcst.Call, dotted: str) -> None:
        if dotted == "open":
            self._open(node, node.args[1].value if len(node.args) > 1 and node.args[1].keyword is None else None)
            return
        if dotted == "getattr":
            computed = len(node.args) >= 2 and _literal(node.args[1].value) is None
            if computed and _resolve(node.args[0].value, self.context.imports) is not None:
                self.add(node, DYNAMIC, DYNAMIC, "getattr on a module with a computed name")
            return
        if dotted in _EXACT:
            category, access = _EXACT[dotted]
            name = self._variable(_argument(node, 0, "key")) if category == ENVIRONMENT else None
            if name is not None:
                self.add(node, category, access, f"{dotted}({name!r})", variable=(name, False))
            else:
                self.add(node, category, access, dotted)
            return
        for prefix, (category, access) in _PREFIXES.items():
            if (
                dotted == prefix
                or dotted.startswith(prefix + ".")
                or (prefix.startswith("os.") and dotted.startswith(prefix))
            ):
                self.add(node, category, access, dotted)
                return
        root = dotted.split(".")[0]
        if root in HTTP_LIBRARIES:
            self._http_function(node, dotted)
            return
        if dotted == "urllib.request.urlopen":
            sends = _argument(node, 1, "data") is not None
            self.add(node, NETWORK, WRITE if sends else READ, dotted + ("(data=...)" if sends else ""))
            return
        if dotted.startswith("os.environ"):
            return
        if dotted.startswith(".") or not (
            _in_package(dotted, SAFE_MODULES)
            or _in_package(dotted, frozenset({self.context.package}))
            or dotted in _BUILTINS
        ):
            self.add(node, UNKNOWN, UNKNOWN, dotted)

    def _http_function(self, node: libcst.Call, dotted: str) -> None:
        verb = dotted.rsplit(".", 1)[-1]
        if verb in READ_METHODS:
            self.add(node, NETWORK, READ, dotted)
        elif verb in WRITE_METHODS:
            self.add(node, NETWORK, WRITE, dotted)
        elif verb in ("request", "stream"):
            self._request(node, dotted, _argument(node, 0, "method"))
        # anything else of an HTTP library (clients, timeouts, URLs) makes values; their requests are the effect

    def _request(self, node: libcst.Call, shown: str, method: libcst.BaseExpression | None) -> None:
        literal = _literal(method) if method is not None else None
        if literal is not None:
            access = READ if literal.lower() in READ_METHODS else WRITE
            self.add(node, NETWORK, access, f"{shown}({literal.upper()!r})")
        elif isinstance(method, libcst.Name) and method.value in self.function.params:
            self.add(node, NETWORK, WRITE, shown, method_param=method.value)
        else:
            self.add(node, NETWORK, WRITE, f"{shown}(method not a literal)")

    def _open(self, node: libcst.Call, mode: libcst.BaseExpression | None, shown: str = "open") -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "mode":
                mode = arg.value
        if mode is None:
            self.add(node, FILES, READ, shown)
            return
        literal = _literal(mode)
        if literal is not None and not set(literal) & set("wax+"):
            self.add(node, FILES, READ, f"{shown}(mode {literal!r})")
        else:
            self.add(
                node, FILES, WRITE, f"{shown}(mode {literal!r})" if literal is not None else f"{shown}(mode computed)"
            )

    def _method(self, node: libcst.Call, func: libcst.Attribute) -> None:
        name = func.attr.value
        receiver = func.value
        if self._is_client(receiver):
            if name in READ_METHODS:
                self.add(node, NETWORK, READ, f"client.{name}")
            elif name in WRITE_METHODS or name == "send":
                self.add(node, NETWORK, WRITE, f"client.{name}")
            elif name in ("request", "stream"):
                self._request(node, f"client.{name}", _argument(node, 0, "method"))
            return
        if name in _FILE_METHODS:
            self.add(node, FILES, _FILE_METHODS[name], f".{name}()")
        elif name == "open":
            self._open(node, node.args[0].value if node.args and node.args[0].keyword is None else None, ".open")

    def _is_client(self, node: libcst.BaseExpression) -> bool:
        if isinstance(node, libcst.Name):
            return node.value in self.clients
        if isinstance(node, libcst.Call):
            if _resolve(node.func, self.context.imports) in HTTP_CLIENTS:
                return True
            if isinstance(node.func, libcst.Name) and node.func.value in self.context.functions:
                returns = self.context.functions[node.func.value].returns
                return returns is not None and _resolve(returns.annotation, self.context.imports) in HTTP_CLIENTS
        return False

    def visit_Subscript(self, node: libcst.Subscript) -> None:
        if _resolve(node.value, self.context.imports) == "os.environ":
            key = node.slice[0].slice if len(node.slice) == 1 else None
            name = self._variable(key.value) if isinstance(key, libcst.Index) else None
            if name is not None:
                self.add(node, ENVIRONMENT, READ, f"os.environ[{name!r}]", variable=(name, True))
            else:
                self.add(node, ENVIRONMENT, READ, "os.environ[...]")

    def visit_Assign(self, node: libcst.Assign) -> None:
        for target in node.targets:
            self._environment_target(target.target)

    def visit_AugAssign(self, node: libcst.AugAssign) -> None:
        self._environment_target(node.target)

    def visit_Del(self, node: libcst.Del) -> None:
        self._environment_target(node.target)

    def _environment_target(self, target: libcst.BaseExpression) -> None:
        if isinstance(target, libcst.Subscript) and _resolve(target.value, self.context.imports) == "os.environ":
            self.add(target, ENVIRONMENT, WRITE, "os.environ[...] = ...")


class _Resolver:
    """Effects through the call graph, with HTTP methods passed down as literals resolved per call site."""

    def __init__(self, functions: Mapping[str, _Function]) -> None:
        self.functions = functions
        self.active: set[str] = set()

    def effects(self, name: str, bound: Mapping[str, str | None]) -> tuple[EffectIR, ...]:
        function = self.functions.get(name)
        if function is None or name in self.active:
            return ()  # recursion: what it can do is already being collected
        self.active.add(name)
        try:
            found: list[EffectIR] = [self._site(site, bound) for site in function.sites]
            for callee, arguments in function.calls:
                passed = {
                    param: (bound.get(value[1:]) if value is not None and value.startswith("@") else value)
                    for param, value in arguments.items()
                }
                for effect in self.effects(callee, passed):
                    found.append(replace(effect, via=(callee, *effect.via)))
        finally:
            self.active.discard(name)
        return tuple(dict.fromkeys(found))

    @staticmethod
    def _site(site: _Site, bound: Mapping[str, str | None]) -> EffectIR:
        effect = site.effect
        if site.method_param is None:
            return effect
        value = bound.get(site.method_param)
        if value is not None and value.startswith("="):
            method = value[1:]
            access = READ if method.lower() in READ_METHODS else WRITE
            return replace(effect, access=access, call=f"{effect.call}({method.upper()!r})")
        return replace(effect, access=WRITE, call=f"{effect.call}({site.method_param}: not a literal)")
