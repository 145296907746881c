"""The HTML page: one shell (``static/page.html``) for the jobs view and the job view.

Everything it needs is served by the app itself (``static/``): no build step, no CDN. The
shell carries the app's mount path, the view to show and the default timezone (``[core]
default_timezone``) in ``data-`` attributes; ``theme.js`` picks the light or dark palette
(Airflow's theme when Airflow's UI frames the page, else the browser's), and ``gang.js`` draws
the rest from the JSON API and refreshes it every few seconds.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from airflow_gang.plugins.settings import UiSettings

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Same-origin only; the page may be framed by Airflow's UI (external view with url_route).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"
)


@cache
def _shell() -> str:
    return (STATIC_DIR / "page.html").read_text(encoding="utf-8")


def render_page(root: str, view: str, namespace: str = "", name: str = "", timezone: str = "UTC") -> str:
    """The shell with its placeholders filled in (every value HTML-escaped).

    :param timezone: the page's default zone (`settings.ui_timezone`): an IANA name, ``UTC`` or
        ``system``; the page's own control and ``?tz=`` override it in the browser.
    """
    values = {"ROOT": root, "VIEW": view, "NAMESPACE": namespace, "NAME": name, "TIMEZONE": timezone}
    page = _shell()
    for key, value in values.items():
        page = page.replace("{{" + key + "}}", html.escape(value, quote=True))
    return page


def pages_router(settings_loader: Callable[[], UiSettings] | None = None) -> APIRouter:
    """The two pages; ``settings_loader`` (per request) gives their default timezone, UTC without one."""
    router = APIRouter()

    def default_timezone() -> str:
        if settings_loader is None:
            return "UTC"
        try:
            return settings_loader().timezone
        except Exception as error:  # the page still opens; its API calls report the problem
            log.warning("gang UI: could not read the UI settings, showing times in UTC: %s", error)
            return "UTC"

    def page(request: Request, view: str, namespace: str = "", name: str = "") -> HTMLResponse:
        root = str(request.scope.get("root_path") or "").rstrip("/")
        return HTMLResponse(
            render_page(root, view, namespace, name, default_timezone()),
            headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-store"},
        )

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def jobs_page(request: Request) -> HTMLResponse:
        return page(request, "jobs")

    @router.get("/jobs/{namespace}/{name}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(request: Request, namespace: str, name: str) -> HTMLResponse:
        return page(request, "job", namespace, name)

    return router
