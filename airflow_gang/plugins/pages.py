"""The HTML page: one shell (``static/page.html``) for the jobs view and the job view.

Everything it needs is served by the app itself (``static/``): no build step, no CDN. The
shell carries the app's mount path and the view to show in ``data-`` attributes; ``gang.js``
draws the rest from the JSON API and refreshes it every few seconds.
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Same-origin only; the page may be framed by Airflow's UI (external view with url_route).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"
)


@cache
def _shell() -> str:
    return (STATIC_DIR / "page.html").read_text(encoding="utf-8")


def render_page(root: str, view: str, namespace: str = "", name: str = "") -> str:
    """The shell with its placeholders filled in (every value HTML-escaped)."""
    values = {"ROOT": root, "VIEW": view, "NAMESPACE": namespace, "NAME": name}
    page = _shell()
    for key, value in values.items():
        page = page.replace("{{" + key + "}}", html.escape(value, quote=True))
    return page


def _page(request: Request, view: str, namespace: str = "", name: str = "") -> HTMLResponse:
    root = str(request.scope.get("root_path") or "").rstrip("/")
    return HTMLResponse(
        render_page(root, view, namespace, name),
        headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-store"},
    )


def pages_router() -> APIRouter:
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def jobs_page(request: Request) -> HTMLResponse:
        return _page(request, "jobs")

    @router.get("/jobs/{namespace}/{name}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(request: Request, namespace: str, name: str) -> HTMLResponse:
        return _page(request, "job", namespace, name)

    return router
