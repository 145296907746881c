"""The plugin's FastAPI app: JSON API under ``/api``, the page at ``/`` and ``/jobs/{ns}/{name}``,
its files under ``/static``. Airflow mounts it at ``/gang``.
"""

# No `from __future__ import annotations`: FastAPI must evaluate the route signatures, which
# name dependencies local to the factory functions.
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from airflow_gang import __version__
from airflow_gang.plugins.access import Access, airflow_user_access, open_access
from airflow_gang.plugins.api import api_router
from airflow_gang.plugins.cluster_reader import ClusterReader
from airflow_gang.plugins.errors import PageError, classify
from airflow_gang.plugins.metadata import MetadataReader
from airflow_gang.plugins.pages import STATIC_DIR, pages_router
from airflow_gang.plugins.service import GangPageService
from airflow_gang.plugins.settings import UiSettings, load_settings


def create_app(
    *,
    authenticate: bool = True,
    settings_loader: Callable[[], UiSettings] = load_settings,
    reader_factory: Callable[[UiSettings], ClusterReader] = ClusterReader.from_settings,
    metadata: MetadataReader | None = None,
) -> FastAPI:
    """The app; its JSON routes need a signed-in Airflow user unless ``authenticate`` is False.

    :param authenticate: authenticate with the API server's auth manager (inside Airflow); False
        shows everything to anyone (tests, or an app behind another authenticating proxy).
    :param settings_loader: reads the ``[gang]`` options (and the pages' default timezone), per request.
    :param reader_factory: the cluster reader for those options.
    :param metadata: reads the metadata DB.
    """
    app = FastAPI(
        title="Gang jobs",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    access_dependency: Callable[..., Access] = airflow_user_access() if authenticate else open_access
    metadata_reader = metadata or MetadataReader()

    def service(access: Annotated[Access, Depends(access_dependency)]) -> GangPageService:
        settings = settings_loader()
        try:
            reader = reader_factory(settings)
        except Exception as error:  # a missing or broken connection
            raise classify(error, settings.conn_id) from error
        return GangPageService(reader, metadata_reader, access, settings.airflow_base_path, settings.conn_id)

    @app.exception_handler(PageError)
    def page_error(request: Request, error: PageError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status, headers={"Cache-Control": "no-store"})

    app.include_router(api_router(service), prefix="/api")
    app.include_router(pages_router(settings_loader))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
