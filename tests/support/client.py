"""MCP clients for generated servers: in-process (`mcp.Client(create_server())`) and over stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.support.processes import server_env

LEGACY, MODERN = "legacy", "2026-07-28"
MODES = [LEGACY, MODERN]


def connect(server: Any, mode: str = LEGACY, **options: Any) -> Client:
    """A client for `server`: a server object (in-process), stdio parameters or an HTTP URL; no cache."""
    return Client(server, mode=mode, cache=None, **options)


def stdio_params(
    out: Path,
    *args: str,
    package: str = "billing_server",
    python_args: tuple[str, ...] | None = None,
    env: dict[str, str] | None = None,
) -> StdioServerParameters:
    """`python -m PACKAGE ARGS` in `out`, only `out` importable; `python_args` replaces `-m PACKAGE`."""
    arguments = [*(python_args if python_args is not None else ("-m", package)), *args]
    return StdioServerParameters(
        command=sys.executable, args=arguments, cwd=str(out), env=env if env is not None else server_env(out)
    )


def stdio(out: Path, mode: str = LEGACY, *args: str, **options: Any) -> Client:
    """A client for the generated server in `out` started as a subprocess on stdio."""
    return connect(stdio_params(out, *args), mode, **options)


async def tool_names(server: Any, mode: str = LEGACY) -> list[str]:
    """What tools/list returns, in order, on a fresh session."""
    async with connect(server, mode) as client:
        return [t.name for t in (await client.list_tools()).tools]
