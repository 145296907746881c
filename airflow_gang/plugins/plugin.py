"""`GangPlugin`: the "Gang jobs" page in Airflow's UI (Airflow 3.1+ ``fastapi_apps`` and
``external_views``).

Loaded through the ``airflow.plugins`` entry point and listed under the provider's ``plugins``
key. The app is built when Airflow imports this module, i.e. in the API server.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_gang.plugins.app import create_app

URL_PREFIX = "/gang"

gang_app = create_app()


class GangPlugin(AirflowPlugin):
    """Mounts the gang jobs app at ``/gang`` and adds "Gang jobs" to the navigation."""

    name = "airflow_gang"
    fastapi_apps: list[Any] = [{"app": gang_app, "url_prefix": URL_PREFIX, "name": "Gang jobs"}]
    external_views: list[Any] = [
        {
            "name": "Gang jobs",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "gang-jobs",
            "icon": f"{URL_PREFIX}/static/icon.svg",
        }
    ]
