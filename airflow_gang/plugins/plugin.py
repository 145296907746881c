"""`GangPlugin`: the "Gang jobs" page in Airflow's UI (Airflow 3.1+ ``fastapi_apps`` and
``external_views``).

Loaded through the ``airflow.plugins`` entry point and listed under the provider's ``plugins``
key. Every Airflow component loads plugins (a task process too, for macros), but only the API
server serves the app: it is built on its first request (`LazyApp`), so the others do not pay
for importing FastAPI routes and Airflow's API security.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_gang.plugins.listener import listener

URL_PREFIX = "/gang"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LazyApp:
    """An ASGI app that builds the real one (`airflow_gang.plugins.app.create_app`) when first called."""

    def __init__(self, factory: Callable[[], AsgiApp] | None = None) -> None:
        self._factory = factory
        self._app: AsgiApp | None = None
        self._lock = threading.Lock()

    def _build(self) -> AsgiApp:
        with self._lock:
            if self._app is None:
                if self._factory is None:
                    from airflow_gang.plugins.app import create_app

                    self._app = create_app()
                else:
                    self._app = self._factory()
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or self._build()
        await app(scope, receive, send)


class GangPlugin(AirflowPlugin):
    """Mounts the gang jobs app at ``/gang`` and adds "Gang jobs" to the navigation."""

    name = "airflow_gang"
    fastapi_apps: list[Any] = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Gang jobs"}]
    external_views: list[Any] = [
        {
            "name": "Gang jobs",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "gang-jobs",
            "icon": f"{URL_PREFIX}/static/icon.svg",
        }
    ]
    # The orphan reaper (airflow_gang.state.reaper), run by the scheduler.
    listeners: list[Any] = [listener]
