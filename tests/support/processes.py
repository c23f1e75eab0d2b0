"""Processes and ports: free ports, waiting for a server to listen, the fusiongen CLI as a process or in-process,
and stopping what a test started."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 120.0  # seconds for one CLI run in a fresh interpreter, on a loaded machine
LISTEN_TIMEOUT = 30.0  # seconds for a server process to start listening


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (someone may take it before it is used)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def wait_for_port(
    process: subprocess.Popen[bytes],
    port: int,
    *,
    timeout: float = LISTEN_TIMEOUT,
    log: IO[bytes] | None = None,
    what: str = "the server",
) -> None:
    """Until `process` listens on `port`; AssertionError (with what it logged) if it exits or never does."""
    deadline = time.monotonic() + timeout
    while not listening(port):
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}:\n{logged(log)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not listen on {port} within {timeout} s:\n{logged(log)}")
        time.sleep(0.05)


def logged(log: IO[bytes] | None) -> str:
    """The end of what a server wrote to its log file."""
    if log is None:
        return ""
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 10.0) -> None:
    """Terminate `process`, and kill it if it does not exit in `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def server_env(*importable: Path, **extra: str) -> dict[str, str]:
    """The environment for a generated server: only `importable` on PYTHONPATH (the handler module is found
    beside the spec by the server itself), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, importable))
    env.update(extra)
    return env


@contextlib.contextmanager
def http_server(
    out: Path,
    *args: str,
    package: str = "billing_server",
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> Iterator[str]:
    """`python -m PACKAGE --http --port P ARGS` in `out` until the block ends; yields its MCP URL."""
    port = free_port()
    command = [sys.executable, "-m", package, "--http", "--port", str(port), *args]
    with contextlib.ExitStack() as stack:
        # stderr to a file, never an unread pipe: a server that logs a lot would block on a full pipe.
        sink = (
            stack.enter_context(log.open("w+b")) if log is not None else stack.enter_context(tempfile.TemporaryFile())
        )
        process = subprocess.Popen(
            command,
            cwd=out,
            env=dict(env) if env is not None else server_env(out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
        stack.callback(stop, process)
        wait_for_port(process, port, log=sink, what=f"{package} --http")
        yield f"http://127.0.0.1:{port}/mcp"


# --- the fusiongen CLI ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def returncode(self) -> int:  # as subprocess.CompletedProcess calls it
        return self.code


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for `python -m fusiongen`: this checkout importable, no FUSIONGEN_DEBUG."""
    env = {k: v for k, v in os.environ.items() if k != "FUSIONGEN_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def fusiongen_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "fusiongen", *map(str, args)]


def run_process(
    *args: str | Path, cwd: Path, timeout: float = CLI_TIMEOUT, env: Mapping[str, str] | None = None
) -> Run:
    """`python -m fusiongen ARGS` in a fresh interpreter."""
    done = subprocess.run(
        fusiongen_command(*args),
        cwd=cwd,
        env=dict(env) if env is not None else cli_env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def start_process(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """`python -m fusiongen ARGS` started, not waited for (several at once); read it with `communicate`."""
    return subprocess.Popen(
        fusiongen_command(*args),
        cwd=cwd,
        env=dict(env) if env is not None else cli_env(),
        text=True,
        encoding="utf-8",
        errors="replace",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def run(*args: str | Path, cwd: Path) -> Run:
    """The same command in-process (CliRunner keeps stdout and stderr apart)."""
    from fusiongen.cli import app

    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, [str(a) for a in args])
    return Run(result.exit_code, result.stdout, result.stderr)


def run_python(
    args: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = CLI_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` (a module with `-m`, code with `-c`) in a fresh interpreter, its output captured."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
