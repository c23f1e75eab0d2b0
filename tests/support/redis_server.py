"""Start a throw-away, real ``redis-server`` for tests.

A real server rather than a fake, because what needs testing is the Redis store (redis-py, our Lua scripts,
expiry, ACL users, TLS) against Redis itself.  CI installs Debian's ``redis-server``; a machine without it
must fail loudly, not skip quietly, or the Redis store would go untested without anyone noticing.
"""

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.processes import free_port, stop

_START_TIMEOUT = 30.0  # seconds, on a loaded machine


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    # -NOAUTH also proves the server is up, when it was started with --requirepass.
    return reply.startswith((b"+PONG", b"-NOAUTH"))


def start_redis(tmp_path: Path, *extra_args: str, port: int | None = None) -> tuple[int, Callable[[], None]]:
    """Start redis-server on a free 127.0.0.1 port (or on `port`, e.g. one a server already tries to reach);
    return the port and a function stopping it."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(
            "redis-server is not on PATH: install Debian's redis-server package "
            "(apt-get install redis-server); the Redis state store tests need a real server",
            pytrace=False,
        )
    log = tmp_path / "redis.log"
    wanted = port
    for _attempt in range(3):  # The free port may be taken by someone else before Redis binds it.
        port = wanted if wanted is not None else free_port()
        command = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--dir", str(tmp_path), "--logfile", str(log), *extra_args]
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline and not _answers_ping(port):
            time.sleep(0.02)
        if proc.poll() is None and _answers_ping(port):
            return port, lambda proc=proc: stop(proc, timeout=5)
        stop(proc, timeout=5)
    output = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    pytest.fail(f"redis-server did not start:\n{output}", pytrace=False)
