"""The ASGI application: routers, bearer-token authentication and the one Status error path.

Authentication mirrors kube-apiserver with anonymous access limited to the public info
endpoints: without a valid ``Authorization: Bearer <token>`` every request gets 401
``Unauthorized`` except ``/healthz``, ``/readyz``, ``/livez`` and ``/version`` (what the
``system:public-info-viewer`` role grants); a wrong token gets 401 everywhere. Every
:class:`StatusError` becomes a ``Status`` body with its code in one handler; any other
exception becomes a 500 ``InternalError`` Status.

Middleware, outermost first: authentication, request counting (``metrics.py``), then injected
faults (``faults/middleware.py``), so an injected error is authenticated and counted like a
real one, and last the resource URLs' direct path to their handlers (``resource_dispatch.py``).
"""

from __future__ import annotations

import hmac
import json

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from gang_sim.apiserver.errors import MethodNotAllowed, StatusError, Unauthorized
from gang_sim.apiserver.faults.middleware import FaultMiddleware
from gang_sim.apiserver.faults.routes import faults_router
from gang_sim.apiserver.metrics import RequestCounter, RequestMetrics, metrics_router
from gang_sim.apiserver.resource_dispatch import ResourceDispatch
from gang_sim.apiserver.routes import internal_error_response, router, status_response
from gang_sim.apiserver.state import ServerConfig, ServerState

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version"})


class BearerTokenAuth:
    """Pure ASGI middleware (streaming-safe) checking the bearer token."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        if header is None and scope.get("path") in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        if header is None or not hmac.compare_digest(header, self._expected):
            body = json.dumps(Unauthorized().to_status()).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def _status_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, StatusError):  # pragma: no cover - registered for StatusError only
        raise exc
    return status_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover - registered for HTTPException only
        raise exc
    if exc.status_code == 405:
        return status_response(MethodNotAllowed())
    if exc.status_code == 404:
        return Response("404 page not found\n", status_code=404, media_type="text/plain")
    return Response(str(exc.detail), status_code=exc.status_code, media_type="text/plain")


async def _unexpected(request: Request, exc: Exception) -> Response:
    return internal_error_response(request, exc)


def build_app(config: ServerConfig, state: ServerState | None = None) -> FastAPI:
    """The FastAPI app for ``config``; ``app.state.sim`` holds the :class:`ServerState`."""
    app = FastAPI(
        title="airflow-gang simulated kube-apiserver", docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.sim = state or ServerState(config)
    app.include_router(router)
    if config.sim_endpoints:  # without them, /sim/v1/... is an unknown path (plain-text 404)
        app.include_router(metrics_router)
        app.include_router(faults_router)
    app.add_exception_handler(StatusError, _status_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    app.state.request_metrics = RequestMetrics()
    # Innermost: resource URLs go straight to their handlers, after everything below.
    app.add_middleware(ResourceDispatch, state=app.state.sim)
    # Injected errors are counted and authenticated like real ones.
    app.add_middleware(FaultMiddleware, injector=app.state.sim.faults)
    app.add_middleware(RequestCounter, metrics=app.state.request_metrics)  # inside auth: counts callers
    if config.token:
        app.add_middleware(BearerTokenAuth, token=config.token)
    return app
