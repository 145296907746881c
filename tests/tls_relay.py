"""A TLS-terminating relay in front of the embedded cluster's API server, for tests of a rotated CA.

Clients see the relay's own certificate (made by `gang_sim.certs` for 127.0.0.1, signed by a CA
of the relay's), and the relay speaks TLS to the API server behind it. Closing one relay and
starting another on the same port with a new certificate is a CA rotation as a client sees it:
the same endpoint, another CA. The relay runs an asyncio loop in a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import threading
from pathlib import Path

from gang_sim.certs import ServingCertificate, make_serving_certificate


class TlsRelay:
    """Terminates TLS on ``port`` (0: a free one) with ``certificate`` (default: one of a new CA)
    and forwards to ``upstream``."""

    def __init__(
        self, upstream: tuple[str, int], port: int = 0, certificate: ServingCertificate | None = None
    ) -> None:
        self.certificate = certificate or make_serving_certificate(["127.0.0.1"])
        self._upstream = upstream
        self.opened = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="tls-relay")
        self._thread.start()
        self._connections: set[asyncio.Task[None]] = set()
        self._server = asyncio.run_coroutine_threadsafe(self._serve(port), self._loop).result(timeout=10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _serve(self, port: int) -> asyncio.Server:
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as folder:
            serving.load_cert_chain(*self.certificate.write(Path(folder)))
        return await asyncio.start_server(self._handle, "127.0.0.1", port, ssl=serving, reuse_address=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.opened += 1
        upstream_tls = ssl.create_default_context()
        # The relay stands in for the API server; whom it reaches behind it is the test's business.
        upstream_tls.check_hostname = False
        upstream_tls.verify_mode = ssl.CERT_NONE
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream, ssl=upstream_tls)
        except OSError:
            writer.close()
            self._connections.discard(task)
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except asyncio.CancelledError:
            pass  # closed: the connection is cut
        finally:
            for side in (writer, up_writer):
                side.close()
            self._connections.discard(task)

    def close(self) -> None:
        """Stop listening and cut every relayed connection: the old certificate is gone."""

        async def stop() -> None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError, ssl.SSLError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.write_eof() if writer.can_write_eof() else writer.close()
