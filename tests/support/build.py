"""The one way tests build a spec: generated and published into a temp dir, then imported from there."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from fusiongen.api import Generation, generate, publish, validate

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
FIXTURES = ROOT / "tests" / "fixtures"


def write_spec(
    directory: Path,
    text: str | bytes,
    *,
    name: str = "spec.toml",
    handlers: str | None = None,
    files: dict[str, bytes] | None = None,
) -> Path:
    """Write a spec (and the files beside it, such as XState machines) into `directory`; returns its path.

    `handlers`: the source of its handler module, written beside the spec under the module name the spec
    declares (or defaults to), which is why the spec must validate when `handlers` is given.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for file_name, content in (files or {}).items():
        target = directory / file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    spec = directory / name
    spec.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    if handlers is not None:
        module = validate(spec)[1].handlers_module
        (directory / f"{module}.py").write_text(handlers, encoding="utf-8")
    return spec


def build(spec: Path | str, out: Path, *, handlers: str | None = None) -> Generation:
    """Generate and publish `spec` (a path, or TOML text written to `out.parent / "spec.toml"`) into `out`."""
    if isinstance(spec, str):
        spec = write_spec(out.parent, spec, handlers=handlers)
    elif handlers is not None:
        module = validate(spec)[1].handlers_module
        (spec.parent / f"{module}.py").write_text(handlers, encoding="utf-8")
    generation = generate(spec, out)
    publish(generation, out)
    return generation


def forget(*prefixes: str) -> None:
    """Drop modules (and their submodules) from sys.modules, so the next import is fresh."""
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            del sys.modules[name]


@contextlib.contextmanager
def importable(*paths: Path, modules: tuple[str, ...] = ()) -> Iterator[None]:
    """`paths` on sys.path and `modules` freshly imported inside the block; both gone afterwards."""
    forget(*modules)
    entries = [str(p) for p in paths]
    sys.path[:0] = entries
    try:
        yield
    finally:
        for entry in entries:
            if entry in sys.path:
                sys.path.remove(entry)
        forget(*modules)


@contextlib.contextmanager
def imported(out: Path, package: str) -> Iterator[ModuleType]:
    """The generated package in `out`, freshly imported (without its handler module)."""
    with importable(out, modules=(package,)):
        yield importlib.import_module(package)


class GeneratedServer:
    """A generated package imported from a temp dir, with its handler module beside the spec."""

    def __init__(self, generation: Generation, out: Path) -> None:
        self.generation = generation
        self.out = out
        self.package_name = generation.ir.package
        self.handlers_name = generation.ir.handlers_module
        self.spec_dir = generation.loaded.home
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> GeneratedServer:
        modules = (self.package_name, self.handlers_name)
        self._stack.enter_context(importable(self.out, self.spec_dir, modules=modules))
        self.package: ModuleType = importlib.import_module(self.package_name)
        self.handlers: ModuleType = importlib.import_module(self.handlers_name)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def module(self, name: str) -> ModuleType:
        return importlib.import_module(f"{self.package_name}.{name}")

    def create_server(self, handlers: ModuleType | None = None, **options: Any) -> Any:
        return self.package.create_server(handlers, **options)

    def wire(self, name: str) -> str:
        """The name the model calls spec tool `name` by (the server's TOOL_NAMES), whatever `tool_names` is."""
        names: dict[str, str] = self.module("server").TOOL_NAMES
        return names[name]


def tool_names(out: Path, package: str) -> dict[str, str]:
    """The TOOL_NAMES map (spec and wire names → wire name) of the package generated in `out`."""
    with imported(out, package):
        names: dict[str, str] = dict(importlib.import_module(f"{package}.server").TOOL_NAMES)
    return names


def built_server(spec: Path | str, out: Path, *, handlers: str | None = None) -> GeneratedServer:
    """`build` and wrap it: use as a context manager (`with built_server(...) as server:`)."""
    return GeneratedServer(build(spec, out, handlers=handlers), out)
