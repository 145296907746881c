"""ASGI middleware applying per-request faults: latency first, then an injected error.

It sits inside authentication and request counting (see ``../app.py``), where kube-apiserver's
own overload answers come from (API Priority and Fairness runs after authentication), so a
client sees an injected 503 or 429 exactly as a real one: a ``Status`` body with kube-apiserver's
reason, and ``Retry-After`` on a 429. Requests are classified with the metrics' verb and
resource names. Simulator-only paths (``/sim/...``) and health probes are never faulted, so
tests can always read counters and change the spec.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from gang_sim.apiserver.errors import InternalError, ServiceUnavailable, StatusError, TooManyRequests
from gang_sim.apiserver.faults.injector import FaultInjector, InjectedError
from gang_sim.apiserver.metrics import request_key

_EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/livez"})
_SIM_PREFIX = "/sim/"


def injected_status(injected: InjectedError) -> StatusError:
    """The Status kube-apiserver would send for this code, its message saying it was injected."""
    origin = f"injected by the simulator's fault spec, errors[{injected.rule}]"
    if injected.status == 429:
        return TooManyRequests(f"Too many requests, please try again later. ({origin})", injected.retry_after)
    if injected.status == 503:
        return ServiceUnavailable(f"the server is currently unable to handle the request ({origin})")
    return InternalError(origin)


class FaultMiddleware:
    """Pure ASGI (streaming-safe): delays or fails requests as the `FaultInjector` decides."""

    def __init__(self, app: ASGIApp, injector: FaultInjector):
        self.app = app
        self.injector = injector

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            not self.injector.active
            or scope["type"] != "http"
            or path in _EXEMPT_PATHS
            or path.startswith(_SIM_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        agent = next((v for k, v in scope.get("headers", ()) if k == b"user-agent"), b"").decode("latin-1")
        key = request_key(
            scope.get("method", "GET"), path, scope.get("query_string", b"").decode("latin-1"), agent
        )
        delay = self.injector.latency(key.verb, key.resource, agent)
        if delay:
            await asyncio.sleep(delay)
        injected = self.injector.error(key.verb, key.resource, agent)
        if injected is None:
            await self.app(scope, receive, send)
            return
        error = injected_status(injected)
        body = json.dumps(error.to_status()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if isinstance(error, TooManyRequests):
            headers.append((b"retry-after", str(error.retry_after).encode()))
        await send({"type": "http.response.start", "status": error.code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
