"""A Redis server as the CeleryExecutor's message broker, started and stopped with the stack.

Redis has no wheel with its binaries on PyPI, so the server is the system's ``redis-server``
(Debian's package ``redis-server``; ``make services`` installs it where apt-get and root are
available). `RedisBroker.start` runs it on a free loopback port, without persistence (a test
broker keeps nothing across starts), and returns the Celery broker URL once it answers PING.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from gang_stack.errors import StackError
from gang_stack.settings import free_port

# Another server binary (a Valkey build, say) may be named by this variable.
SERVER_VARIABLE = "GANG_REDIS_SERVER"
INSTALL_HINT = (
    "the CeleryExecutor needs a Redis server: install Debian's redis-server (`make services` runs "
    "`apt-get install redis-server` as root) or name a redis-server binary in $GANG_REDIS_SERVER"
)


def redis_server_binary() -> str | None:
    """The redis-server to run: ``$GANG_REDIS_SERVER``, else ``redis-server`` on PATH."""
    named = os.environ.get(SERVER_VARIABLE)
    if named:
        return named if Path(named).is_file() else None
    return shutil.which("redis-server")


def ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """Redis answers PING with PONG (the inline protocol: no client library needed)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisBroker:
    """One ``redis-server`` on 127.0.0.1, for one stack."""

    host = "127.0.0.1"

    def __init__(self, startup_timeout: float = 20.0) -> None:
        self.startup_timeout = startup_timeout
        self.port = 0
        self.folder: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start the server; the broker URL once it answers PING (else `StackError`)."""
        binary = redis_server_binary()
        if binary is None:
            raise StackError(INSTALL_HINT)
        self.folder = Path(tempfile.mkdtemp(prefix="gang-redis-"))
        self.port = free_port(self.host)
        log = (self.folder / "redis.log").open("wb")
        command = [
            binary, "--bind", self.host, "--port", str(self.port), "--dir", str(self.folder),
            "--save", "", "--appendonly", "no", "--daemonize", "no",
        ]  # fmt: skip
        with log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while not ping(self.host, self.port):
            if not self.running or time.monotonic() > deadline:
                text = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise StackError(f"redis-server did not answer on port {self.port}:\n{text}")
            time.sleep(0.1)
        return self.url

    def stop(self) -> None:
        """Stop the server (idempotent) and remove its folder."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
