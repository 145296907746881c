"""The API server's listening socket and the uvicorn server behind it, which can go down and come back.

`Listener` binds at construction (port 0 picks a free port, known at once for URLs and the
kubeconfig), then serves an ASGI app from a daemon thread. An outage (`interrupt`) is what a
crashed kube-apiserver looks like from outside: the listening socket closes (new connections
are refused) and every open connection is aborted, watches included. `resume` listens again on
the same host and port; the app, and so every stored object, is untouched. ``SO_REUSEADDR``
lets the port be bound again while connections of the previous run linger in TIME_WAIT.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    """A uvicorn server that remembers its event loop, so another thread can drop its connections."""

    loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)

    def drop_everything(self) -> None:
        """On the server's loop: stop accepting, then abort every open connection."""
        for server in getattr(self, "servers", []):
            server.close()
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        self.should_exit = True
        self.force_exit = True


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class Listener:
    """Serves one ASGI app on ``host``:``port`` from a background thread; see the module docstring."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.host = host
        self._socket: socket.socket | None = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        self._app: ASGIApp | None = None
        self._options: dict[str, Any] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def serving(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self, app: ASGIApp, *, startup_timeout: float = 15.0, **uvicorn_options: Any) -> None:
        """Serve ``app`` (``uvicorn_options`` go to `uvicorn.Config`); returns once it accepts."""
        self._app = app
        self._options = dict(uvicorn_options)
        with self._lock:
            self._serve(startup_timeout)

    def interrupt(self, timeout: float = 10.0) -> None:
        """Go down: refuse new connections and drop open ones, until `resume`."""
        with self._lock:
            server, thread = self._server, self._thread
            if server is None or thread is None or not thread.is_alive():
                return
            if server.loop is not None and not server.loop.is_closed():
                # A loop closed meanwhile (RuntimeError) means it is down already.
                with contextlib.suppress(RuntimeError):
                    server.loop.call_soon_threadsafe(server.drop_everything)
            else:
                server.should_exit = server.force_exit = True
            thread.join(timeout)
            self._server = self._thread = None

    def resume(self, startup_timeout: float = 15.0) -> None:
        """Listen again on the same address, after `interrupt`; no-op while serving or once stopped."""
        with self._lock:
            if self._stopped or self.serving or self._app is None:
                return
            deadline = time.monotonic() + startup_timeout
            while True:
                try:
                    self._socket = _bind(self.host, self.port)
                    break
                except OSError:  # the old socket may take a moment to be released
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            self._serve(max(1.0, deadline - time.monotonic()))

    def stop(self, timeout: float = 10.0) -> None:
        """End for good: a graceful shutdown, then a forced one after a short grace."""
        with self._lock:
            self._stopped = True
            server, thread = self._server, self._thread
            if self._socket is not None:  # bound but never served
                self._socket.close()
                self._socket = None
            if server is None or thread is None:
                return
            server.should_exit = True
            thread.join(0.3)
            if thread.is_alive():
                # Idle keep-alive TLS connections never finish their close handshake on their own
                # (the client is not reading); stop waiting for them.
                server.force_exit = True
                thread.join(timeout)

    def _serve(self, startup_timeout: float) -> None:
        sock = self._socket
        if sock is None or self._app is None:
            raise RuntimeError("the listener has no socket to serve on")
        self._socket = None  # uvicorn owns it now and closes it on shutdown
        server = _Server(uvicorn.Config(self._app, **self._options))
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            daemon=True,
            name=f"airflow-gang-apiserver-{self.port}",
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"API server did not start on {self.host}:{self.port}")
            time.sleep(0.01)


class Listeners:
    """Several listeners serving one app, down and up together (an outage is the whole server's)."""

    def __init__(self, listeners: list[Listener]) -> None:
        self.listeners = listeners

    @property
    def serving(self) -> bool:
        return any(listener.serving for listener in self.listeners)

    @property
    def stopped(self) -> bool:
        return all(listener.stopped for listener in self.listeners)

    def interrupt(self, timeout: float = 10.0) -> None:
        for listener in self.listeners:
            listener.interrupt(timeout)

    def resume(self, startup_timeout: float = 15.0) -> None:
        for listener in self.listeners:
            listener.resume(startup_timeout)

    def stop(self, timeout: float = 10.0) -> None:
        for listener in self.listeners:
            listener.stop(timeout)
