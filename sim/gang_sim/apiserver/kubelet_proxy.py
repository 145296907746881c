"""How ``pods/log`` reaches a node: kube-apiserver's proxy to the kubelet API, reproduced.

kube-apiserver keeps no logs: it finds the pod's node, picks the node's address from
``status.addresses`` in the order of ``--kubelet-preferred-address-types`` (Hostname,
InternalDNS, InternalIP, ExternalDNS, ExternalIP), takes the port from
``status.daemonEndpoints.kubeletEndpoint.Port`` (10250 when unset) and relays
``GET https://<address>:<port>/containerLogs/<ns>/<pod>/<container>?...`` without checking the
kubelet's certificate (no ``--kubelet-certificate-authority``, the default). A kubelet's error
becomes a ``Status`` as kube-apiserver's response checker makes it (400 BadRequest with the
kubelet's text, 500 InternalError, other codes generic), and a kubelet out of reach a 500
carrying the dial error. The simulator's kubelets serve that API (`controllers/kubelet/server.py`),
so the embedded API server and a real one read logs the same way.

`LogStreams` remembers the relayed follow streams, so a stopping API server (or an injected
outage) can cut them at once from another thread, as a dying kube-apiserver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from gang_sim.apiserver.errors import BadRequest, InternalError, NotFound, StatusError

JsonDict = dict[str, Any]
PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
CONNECT_TIMEOUT = 10.0
_CHUNK = 64 * 1024


class KubeletUnreachable(StatusError):
    """A proxy failure that is no Status of its own: kube-apiserver answers 500 with no reason."""

    code = 500
    reason = ""


class UnexpectedKubeletResponse(StatusError):
    """``NewGenericServerResponse`` for the kubelet's other codes (404 among them)."""

    reason = ""

    def __init__(self, code: int, pod: str, body: str) -> None:
        message = (
            "the server could not find the requested resource"
            if code == 404
            else f"the server responded with the status code {code} but did not return more information"
        )
        details = {
            "name": pod,
            "kind": "pods/log",
            "causes": [{"reason": "UnexpectedServerResponse", "message": body}],
        }
        super().__init__(f"{message} ( pods/log {pod})", details)
        self.code = code
        self.reason = "NotFound" if code == 404 else ""


def kubelet_endpoint(node: JsonDict) -> tuple[str, int]:
    """``(address, port)`` of a Node's kubelet API, chosen as kube-apiserver chooses it."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or []
    for kind in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == kind and address.get("address"):
                port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
                return str(address["address"]), int(port or DEFAULT_KUBELET_PORT)
    known = ", ".join(f"{a.get('type')}={a.get('address')}" for a in addresses)
    raise KubeletUnreachable(f"no preferred addresses found; known addresses: [{known}]")


def container_logs_url(node: JsonDict, namespace: str, pod: str, container: str) -> str:
    host, port = kubelet_endpoint(node)
    shown = f"[{host}]" if ":" in host else host
    path = "/".join(quote(part, safe="") for part in (namespace, pod, container))
    return f"https://{shown}:{port}/containerLogs/{path}"


def response_error(status: int, body: str, pod: str) -> StatusError:
    """What kube-apiserver makes of a kubelet's non-2xx answer."""
    if status == 400:
        return BadRequest(body)
    if status == 500:
        return InternalError(body)
    return UnexpectedKubeletResponse(status, pod, body)


class LogStreams:
    """The follow streams being relayed, across the API server's (re)started event loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[tuple[asyncio.AbstractEventLoop, aiohttp.ClientResponse]] = set()

    def add(self, response: aiohttp.ClientResponse) -> None:
        with self._lock:
            self._open.add((asyncio.get_running_loop(), response))

    def discard(self, response: aiohttp.ClientResponse) -> None:
        with self._lock:
            self._open = {entry for entry in self._open if entry[1] is not response}

    def close_all(self) -> None:
        """Cut every relayed stream (callable from any thread)."""
        with self._lock:
            streams, self._open = self._open, set()
        for loop, response in streams:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its streams are gone
                loop.call_soon_threadsafe(response.close)


class KubeletLogRequest:
    """One proxied ``containerLogs`` request: `open` it, then `read` it or `relay` a follow stream."""

    def __init__(self, url: str, params: Mapping[str, str], pod: str) -> None:
        self.url = url
        self.params = dict(params)
        self.pod = pod
        self._session: aiohttp.ClientSession | None = None
        self._response: aiohttp.ClientResponse | None = None

    async def open(self) -> None:
        """Connect and check the kubelet's answer; raises the `StatusError` clients should see."""
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=False),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
        )
        try:
            self._response = await self._session.get(self.url, params=self.params)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            await self.close()
            raise KubeletUnreachable(f'Get "{self.url}": {error}') from error
        if not 200 <= self._response.status <= 206:
            body = (await self._response.read()).decode("utf-8", "replace")
            status = self._response.status
            await self.close()
            raise response_error(status, body, self.pod)

    async def read(self) -> bytes:
        assert self._response is not None, "open() first"
        try:
            return await self._response.read()
        except (aiohttp.ClientError, OSError) as error:
            raise KubeletUnreachable(f'Get "{self.url}": {error}') from error
        finally:
            await self.close()

    async def relay(self, streams: LogStreams) -> AsyncIterator[bytes]:
        """The kubelet's stream as it comes; ends when it ends, breaks, or the server cuts it."""
        response = self._response
        assert response is not None, "open() first"
        streams.add(response)
        try:
            while chunk := await response.content.readany():
                yield chunk
        except (aiohttp.ClientError, OSError):
            return  # the kubelet (or a stopping API server) ended it: so ends ours
        finally:
            streams.discard(response)
            await self.close()

    async def close(self) -> None:
        if self._response is not None:
            self._response.close()
        if self._session is not None:
            await self._session.close()


def node_or_404(node: JsonDict | None, name: str) -> JsonDict:
    if node is None:
        raise NotFound("nodes", name)
    return node
