"""A TCP relay in front of the embedded cluster's API server, for tests of connections.

TLS passes through untouched (the simulator's certificate names 127.0.0.1, whatever the port),
so a kubeconfig pointing at the relay works as one pointing at the server; the relay counts the
connections the server would see, and closing it takes the endpoint away.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class TcpRelay:
    """Forwards TCP connections to the simulator, counting them as the API server sees them."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._stopped = False
        self._dropped = 0  # bumped by drop_connections: relays of an older count end
        self.opened = 0
        threading.Thread(target=self._accept, daemon=True, name="tcp-relay").start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def open_now(self) -> int:
        with self._lock:
            return len(self._open)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self.opened += 1
                self._open.add(client)
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes (or `drop_connections`), then close both."""
        dropped = self._dropped
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(client, selectors.EVENT_READ, upstream)
                selector.register(upstream, selectors.EVENT_READ, client)
                while not self._stopped and self._dropped == dropped:
                    for key, _ in selector.select(timeout=0.2):
                        source: socket.socket = key.fileobj  # type: ignore[assignment]
                        data = source.recv(65536)
                        if not data:
                            return
                        key.data.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
            client.close()
            upstream.close()

    def drop_connections(self) -> None:
        """Cut every relayed connection (within 0.2 s) but keep accepting new ones: a network blip."""
        self._dropped += 1

    def close(self) -> None:
        """Stop accepting and cut every relayed connection (within 0.2 s): the endpoint is gone."""
        self._stopped = True
        # shutdown() first: close() alone leaves a socket that another thread's accept() blocks
        # on listening (and accepting) until that accept returns.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
