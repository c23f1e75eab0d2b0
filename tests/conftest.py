"""Shared fixtures: build a spec into a temp dir and load the generated server from it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fusiongen.api import Generation, generate, publish

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def build(spec: Path, out: Path) -> Generation:
    generation = generate(spec, out)
    publish(generation, out)
    return generation


def _forget(prefixes: tuple[str, ...]) -> None:
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            del sys.modules[name]


class GeneratedServer:
    """A generated package imported from a temp dir, with its handler module beside the spec."""

    def __init__(self, generation: Generation, out: Path) -> None:
        self.generation = generation
        self.out = out
        self.package_name = generation.ir.package
        self.handlers_name = generation.ir.handlers_module
        self.spec_dir = generation.loaded.path.parent

    def __enter__(self) -> GeneratedServer:
        _forget((self.package_name, self.handlers_name))
        sys.path[:0] = [str(self.out), str(self.spec_dir)]
        self.package: ModuleType = importlib.import_module(self.package_name)
        self.handlers: ModuleType = importlib.import_module(self.handlers_name)
        return self

    def __exit__(self, *exc: object) -> None:
        for entry in (str(self.out), str(self.spec_dir)):
            if entry in sys.path:
                sys.path.remove(entry)
        _forget((self.package_name, self.handlers_name))

    def module(self, name: str) -> ModuleType:
        return importlib.import_module(f"{self.package_name}.{name}")

    def create_server(self, handlers: ModuleType | None = None):
        return self.package.create_server(handlers)


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[GeneratedServer]:
    """The reference billing server, freshly built, with fresh seeded handler data."""
    out = tmp_path / "out"
    generation = build(SPECS / "billing.toml", out)
    with GeneratedServer(generation, out) as server:
        yield server
