"""The kubelet API of one simulated node: ``GET /containerLogs/{namespace}/{pod}/{container}``.

This is what kube-apiserver's ``pods/log`` proxies to: the node's address (``status.addresses``)
and port (``status.daemonEndpoints.kubeletEndpoint.Port``), over HTTPS. Each simulated node
serves its own, as each real node does; all nodes of a machine share its address, so each
gets its own port (picked by the OS). The certificate is self-signed and made once per process;
kube-apiserver does not check it unless started with ``--kubelet-certificate-authority``.

Like a real kubelet, it answers from what the node knows: the pod must be bound here (else
404 ``pod "x" does not exist``), the container must be in its spec (else 404), and the log is
the container instance its status names (`logs.log_container_id`; else 400 with the
kubelet's message). ``follow`` streams until the container exits or the pod goes. Anyone who
can reach the port may read logs (a real kubelet authenticates kube-apiserver's client
certificate, whose CA the simulator does not know), so it listens on loopback by default.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import socket
import ssl
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from gang_sim.certs import make_serving_certificate
from gang_sim.controllers.kubelet.logs import (
    LogQuery,
    LogUnavailable,
    NodeLogs,
    log_container_id,
    render,
    tail,
)

log = logging.getLogger(__name__)

JsonDict = dict[str, Any]
PodLookup = Callable[[str, str], "JsonDict | None"]
LOOPBACK = "127.0.0.1"
_TRUE, _FALSE = ("1", "t", "true"), ("0", "f", "false", "")


class BadQuery(ValueError):
    """A query parameter that does not parse."""


@functools.cache
def serving_context(address: str) -> ssl.SSLContext:
    """One self-signed serving certificate per process and address, shared by its nodes."""
    certificate = make_serving_certificate(
        list(dict.fromkeys([address, LOOPBACK, "localhost"])), common_name="sim-kubelet"
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory(prefix="airflow-gang-kubelet-") as directory:
        certfile, keyfile = certificate.write(Path(directory))
        context.load_cert_chain(certfile, keyfile)  # read now: the files may go
    return context


def _flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name, "").lower()
    if value not in _TRUE + _FALSE:
        raise BadQuery(f'invalid value for {name}: "{query[name]}"')
    return value in _TRUE


def _number(query: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError as error:
        raise BadQuery(f'invalid value for {name}: "{value}"') from error
    if number < minimum:
        raise BadQuery(f"{name}: Invalid value: {number}: must be greater than or equal to {minimum}")
    return number


def parse_query(query: Mapping[str, str], now: dt.datetime) -> LogQuery:
    """The ``containerLogs`` query, as ``kubectl logs`` and kube-apiserver send it."""
    since = None
    seconds = _number(query, "sinceSeconds", 1)
    if seconds is not None:
        since = now - dt.timedelta(seconds=seconds)
    elif query.get("sinceTime"):
        try:
            since = dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00"))
        except ValueError as error:
            raise BadQuery(f'invalid value for sinceTime: "{query["sinceTime"]}"') from error
    return LogQuery(
        follow=_flag(query, "follow"),
        previous=_flag(query, "previous"),
        timestamps=_flag(query, "timestamps"),
        tail=_number(query, "tailLines", 0),
        since=since,
        limit_bytes=_number(query, "limitBytes", 1),
    )


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message, content_type="text/plain")


def _containers(pod: JsonDict) -> list[str]:
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return [str(c.get("name")) for c in containers]


def _running_container_id(pod: JsonDict, container: str) -> str:
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        if entry.get("name") == container and "running" in (entry.get("state") or {}):
            return str(entry.get("containerID") or "")
    return ""


class KubeletServer:
    """Serves one node's container logs over HTTPS; `start` returns the port it listens on.

    :param logs: the node's logs.
    :param pods: ``(namespace, name) -> pod`` for pods bound to this node, else None.
    :param address: where to listen (the Node's ``InternalIP``).
    :param clock: now, for ``sinceSeconds``.
    """

    def __init__(
        self,
        logs: NodeLogs,
        pods: PodLookup,
        *,
        address: str = LOOPBACK,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.logs = logs
        self.pods = pods
        self.address = address
        self.clock = clock
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, port: int = 0) -> int:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._container_logs)
        # A client gone mid-follow cancels its handler; stopping waits briefly for the rest.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.address, port))
            await web.SockSite(runner, sock, ssl_context=serving_context(self.address)).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(sock.getsockname()[1])
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _container_logs(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["pod"]
        container = request.match_info["container"]
        pod = self.pods(namespace, name)
        if pod is None:
            return _text(404, f'pod "{name}" does not exist\n')
        if container not in _containers(pod):
            return _text(404, f'container "{container}" not found in pod "{name}"\n')
        try:
            query = parse_query(request.query, self.clock())
            container_id = log_container_id(pod, container, query.previous)
        except (BadQuery, LogUnavailable) as error:
            return _text(400, str(error))
        pod_uid = str((pod.get("metadata") or {}).get("uid", ""))
        found = self.logs.find(pod_uid, container_id)
        if found is None and container_id and container_id == _running_container_id(pod, container):
            found = self.logs.container(pod_uid, container_id)  # running, silent so far
        if found is None:  # e.g. a container a previous kubelet process ran: its output is gone
            return _text(200, "")
        lines, offset = tail(found.lines(), query.tail), found.offset
        if not query.follow:
            return web.Response(body=render(lines, query, query.limit_bytes)[0], content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        budget = query.limit_bytes
        while True:
            data, budget = render(lines, query, budget)
            if data:
                await response.write(data)
            if budget == 0 or (found.closed and found.offset == offset):
                break
            await found.wait(offset)
            lines, offset = found.lines(offset), found.offset
        await response.write_eof()
        return response
