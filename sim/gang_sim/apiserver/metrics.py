"""Request counting by client: who asked what, exposed at ``GET /sim/v1/metrics`` (simulator-only).

kube-apiserver answers "who is loading me" with ``apiserver_request_total`` and audit logs;
this is the simulator's small equivalent for benchmarks and tests that compare clients. A pure
ASGI middleware (streaming-safe) counts every request it sees by ``(user agent, verb,
resource)`` when the request arrives, so a watch counts once, however long it streams.

The verb is kube-apiserver's, derived from the method and the path as its ``RequestInfo``
does it: ``get``/``list``/``watch`` (``GET`` on an object, on a collection, with
``watch=true``), ``create``, ``update``, ``patch``, ``delete``, ``deletecollection``; paths
outside ``/api`` and ``/apis`` (health, discovery roots, ``/sim/v1``) count under the
lower-case HTTP method with an empty resource. The resource is ``plural[.group][/subresource]``
(``pods``, ``pods/log``, ``podgroups.scheduling.volcano.sh``).

Wired inside the bearer-token check, so only authenticated requests count. Counting is one
dict update under a lock; the reply is a snapshot, with the fault injector's counters of
injected faults by kind (see ``gang_sim.faults.FAULT_KINDS``)::

    {"kind": "RequestMetrics", "apiVersion": "sim.airflow-gang.io/v1", "total": 3,
     "requests": [{"userAgent": "bench/poll", "verb": "get", "resource": "pods", "count": 3}],
     "openWatches": [{"userAgent": "bench/watch", "verb": "watch", "resource": "pods", "count": 1}],
     "faults": {"error_500": 0, "error_503": 1, ..., "node_failure": 0}}

``openWatches`` is a gauge: the watch streams open right now, counted from the request's arrival
until its stream ends (closed by either side).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import NamedTuple
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

METRICS_PATH = "/sim/v1/metrics"
metrics_router = APIRouter()
# Namespace subresources stay on the namespace, as in kube-apiserver's RequestInfo.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


class RequestKey(NamedTuple):
    user_agent: str
    verb: str
    resource: str


def request_key(method: str, path: str, query: str, user_agent: str) -> RequestKey:
    """Classify one request the way kube-apiserver labels it (see the module docstring)."""
    method = method.upper()
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return RequestKey(user_agent, method.lower(), "")
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        rest = rest[2:]  # a namespaced resource; "namespaces/<ns>[/status]" is the namespace itself
    if not rest:  # a group-version's discovery document
        return RequestKey(user_agent, method.lower(), "")
    resource = f"{rest[0]}.{group}" if group else rest[0]
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    named = len(rest) > 1
    if method == "GET":
        watch = parse_qs(query).get("watch", [""])[-1].lower() in ("true", "1")
        verb = "watch" if watch else "get" if named else "list"
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return RequestKey(user_agent, verb, resource)


class RequestMetrics:
    """Thread-safe counters of requests by `RequestKey`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[RequestKey] = Counter()
        self._open: Counter[RequestKey] = Counter()

    def record(self, key: RequestKey) -> None:
        with self._lock:
            self._counts[key] += 1

    def opened(self, key: RequestKey, change: int) -> None:
        with self._lock:
            self._open[key] += change
            if self._open[key] <= 0:
                del self._open[key]

    def snapshot(self) -> dict[RequestKey, int]:
        with self._lock:
            return dict(self._counts)

    def to_json(self) -> dict[str, object]:
        counts = sorted(self.snapshot().items())
        with self._lock:
            watching = sorted(self._open.items())
        return {
            "kind": "RequestMetrics",
            "apiVersion": "sim.airflow-gang.io/v1",
            "total": sum(count for _, count in counts),
            "requests": [_entry(key, count) for key, count in counts],
            "openWatches": [_entry(key, count) for key, count in watching],
        }


def _entry(key: RequestKey, count: int) -> dict[str, object]:
    return {"userAgent": key.user_agent, "verb": key.verb, "resource": key.resource, "count": count}


class RequestCounter:
    """Pure ASGI middleware recording each HTTP request in a `RequestMetrics` on arrival."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            agent = next((v for k, v in scope.get("headers", ()) if k == b"user-agent"), b"")
            key = request_key(
                scope.get("method", "GET"),
                scope.get("path", ""),
                scope.get("query_string", b"").decode("latin-1"),
                agent.decode("latin-1"),
            )
            self.metrics.record(key)
            if key.verb == "watch":
                self.metrics.opened(key, +1)
                try:
                    await self.app(scope, receive, send)
                finally:
                    self.metrics.opened(key, -1)
                return
        await self.app(scope, receive, send)


@metrics_router.get(METRICS_PATH)
async def read_metrics(request: Request) -> Response:
    """Simulator-only: the request counters (see the module docstring)."""
    metrics: RequestMetrics = request.app.state.request_metrics
    body = metrics.to_json()
    body["faults"] = request.app.state.sim.faults.counts()
    return Response(json.dumps(body), media_type="application/json")
