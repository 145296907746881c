"""The resource URLs' own entry: ``/api/v1/...`` and ``/apis/{group}/{version}/...`` requests go
straight from the middleware to their handler.

Every read and write of every controller is a resource request. Through Starlette they passed
two exception layers, FastAPI's exit stack, the router's match of each route in turn and the
endpoint's wrappers before reaching a handler that needs none of it, about a tenth of the API
server's time under load. This pure ASGI layer sits innermost among the app's middleware, so
authentication, request counting and injected faults still apply, and it answers as the routes
did: the same handlers (``routes.RESOURCE_HANDLERS``), a ``Status`` for a `StatusError`, a 405
``MethodNotAllowed`` for a verb the URL does not take, and a 500 ``InternalError`` for anything
unexpected. Discovery, health and ``/sim/v1`` URLs go on to the router.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from gang_sim.apiserver.errors import MethodNotAllowed, StatusError
from gang_sim.apiserver.routes import (
    RESOURCE_HANDLERS,
    internal_error_response,
    parse_target,
    status_response,
)
from gang_sim.apiserver.state import ServerState


def resource_url(path: str) -> tuple[str, str, str] | None:
    """``(group, version, rest)`` when ``path`` names resources, else None (discovery and others)."""
    if path.startswith("/api/v1/"):
        rest = path[len("/api/v1/") :]
        return ("", "v1", rest) if rest else None
    if path.startswith("/apis/"):
        parts = path[len("/apis/") :].split("/", 2)
        if len(parts) == 3 and parts[0] and parts[1] and parts[2]:
            return parts[0], parts[1], parts[2]
    return None


class ResourceDispatch:
    """Pure ASGI: serve resource URLs with their handler, pass anything else to ``app``."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        url = resource_url(scope["path"]) if scope["type"] == "http" else None
        if url is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        method = scope["method"]
        handler = RESOURCE_HANDLERS.get("GET" if method == "HEAD" else method)
        try:
            if handler is None:
                raise MethodNotAllowed()
            response = await handler(request, parse_target(self.state.registry, *url), self.state)
        except StatusError as error:
            response = status_response(error)
        except Exception as error:  # what the app's catch-all handler answers for other routes
            response = internal_error_response(request, error)
        await response(scope, receive, send)
