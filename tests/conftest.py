"""Shared fixtures, and the hypothesis profile every test runs under."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.build import ROOT, SPECS, GeneratedServer, build

__all__ = ["ROOT", "SPECS", "GeneratedServer", "build"]

# Reproducible on a clean clone and on every rerun: the examples come from a fixed seed per test (derandomize),
# and no example database is written, so a failure saved by one run cannot make later runs differ. A failure
# prints its blob, to replay it with @reproduce_failure.
settings.register_profile("fusiongen", derandomize=True, database=None, print_blob=True)
settings.load_profile("fusiongen")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[GeneratedServer]:
    """The reference billing server, freshly built, with fresh seeded handler data."""
    out = tmp_path / "out"
    generation = build(SPECS / "billing.toml", out)
    with GeneratedServer(generation, out) as server:
        yield server
