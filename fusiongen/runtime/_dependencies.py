"""What the server imports, from which distributions, in which version ranges; checked when the package is imported.

The generated `pyproject.toml` declares exactly these ranges (fusiongen reads this table when it writes it), so
`pip install` of the server brings everything it imports. A server is committed and deployed for months, and the
environment it lands in may hold other versions than the ones it was tested with (a pin elsewhere, an older
image, `pip install --no-deps`): as protobuf's generated code checks its runtime's version, importing the package
checks the installed versions of what it always needs (`REQUIRED`) and fails with an ImportError naming the
distribution and the range, rather than with an AttributeError deep in a call. What only some deployments use
(`EXTRAS`: HTTP, bearer tokens, tracing, Redis, the faster serializer and event loop) is checked when the
command line asks for it (`check_extras` in `_cli.py`); a distribution that is not installed at all is not
this module's business (its import fails, or the feature says which extra to install).

Each range is the one fusiongen's tests ran: the `mcp` minor exactly (the serving fast path in `_fast_path.py`
reaches into it), and for the others, from the lowest version `mcp` itself accepts to the next major.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Final

# (distribution, pip extras of it, lowest version, first version excluded).
Requirement = tuple[str, str, str, str]

REQUIRED: Final[tuple[Requirement, ...]] = (
    ("anyio", "", "4.9", "5"),
    ("mcp", "", "2.3", "2.4"),
    ("mcp-types", "", "2.3", "2.4"),
    ("opentelemetry-api", "", "1.28", "2"),
    ("pydantic", "", "2.12", "3"),
)

# The generated project's optional dependencies, by extra. `redis` is declared only by servers with workflows.
EXTRAS: Final[dict[str, tuple[Requirement, ...]]] = {
    "auth": (("pyjwt", "crypto", "2.10.1", "3"),),
    "fast": (("httptools", "", "0.6", "1"), ("orjson", "", "3.9", "4"), ("uvloop", "", "0.19", "1")),
    "http": (("starlette", "", "0.27", "2"), ("uvicorn", "", "0.31.1", "1")),
    "otel": (("opentelemetry-exporter-otlp-proto-http", "", "1.28", "2"), ("opentelemetry-sdk", "", "1.28", "2")),
    "redis": (("redis", "", "5.0.8", "9"),),
}

# What only the http transport imports: a server built without it (`[server] transports = ["stdio"]`) declares
# neither these extras nor these distributions of `fast` (fusiongen reads both when it writes pyproject.toml).
HTTP_EXTRAS: Final[tuple[str, ...]] = ("auth", "http")
HTTP_DISTRIBUTIONS: Final[tuple[str, ...]] = ("httptools", "uvloop")

_PACKAGE = __name__.rpartition(".")[0]


def version_key(version: str) -> tuple[int, ...]:
    """The release numbers of a version (`2.3.0` → (2, 3, 0); `0.66b2` → (0, 66)), enough to compare with a
    range whose bounds are plain releases. A pre-release sorts with its release."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def specifier(requirement: Requirement) -> str:
    """The requirement as pyproject.toml writes it: `pyjwt[crypto]>=2.10.1,<3`."""
    name, extras, lowest, below = requirement
    return f"{name}{f'[{extras}]' if extras else ''}>={lowest},<{below}"


def outside(requirements: tuple[Requirement, ...]) -> list[str]:
    """One sentence for each installed distribution whose version is outside its range."""
    problems = []
    for requirement in requirements:
        name, _, lowest, below = requirement
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:  # not installed (or installed without metadata): its import decides
            continue
        if not version_key(lowest) <= version_key(installed) < version_key(below):
            problems.append(f"{specifier(requirement)} (installed: {name} {installed})")
    return problems


def check_installed() -> None:
    """Raise ImportError when an installed version of what the server always imports is outside its range."""
    problems = outside(REQUIRED)
    if problems:
        raise ImportError(
            f"{_PACKAGE} was generated and tested for {'; '.join(problems)}: install versions in these ranges "
            f"(pip install -e <the generated project>), or regenerate the server with a fusiongen that supports them"
        )
