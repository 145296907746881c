"""Extra links: "Gang job" (the plugin's page for the job) and an optional Kubernetes dashboard.

Airflow 3 never calls ``get_link`` in the API server: the worker stores each link's URL in XCom
under ``_link_<Class>`` when the task finalizes. A deferred task finalizes only when it defers
and when it ends, so the operator and the sensors also `persist` the URLs as soon as they know
the job, before waiting: the buttons work while the gang is queued, while it runs and after a
failure. ``get_link`` returns the stored URL, or rebuilds it from the task's ``job_name`` and
``job_namespace`` XComs.

URLs come from ``[gang] ui_url_template`` (default ``{base_url}/gang/jobs/{namespace}/{name}``,
``base_url`` being ``[api] base_url``, empty for a link relative to the Airflow UI) and
``[gang] dashboard_url_template``. Without the latter the dashboard button still works: it opens
the job's Gang jobs page, which says which option an administrator sets to point it at a
dashboard (a button that silently does nothing helps nobody).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.configuration import conf
from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context
    from airflow.sdk.types import TaskInstanceKey

DEFAULT_UI_URL_TEMPLATE = "{base_url}/gang/jobs/{namespace}/{name}"
DASHBOARD_NOT_CONFIGURED = "#kubernetes-dashboard-not-configured"
JOB_NAME_KEY = "job_name"
JOB_NAMESPACE_KEY = "job_namespace"


def _format(template: str, namespace: str, name: str) -> str:
    base_url = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return template.format(base_url=base_url, namespace=quote(namespace, safe=""), name=quote(name, safe=""))


def gang_job_url(namespace: str, name: str) -> str:
    """The plugin page of one job."""
    template = conf.get("gang", "ui_url_template", fallback="") or DEFAULT_UI_URL_TEMPLATE
    return _format(template, namespace, name)


def dashboard_url(namespace: str, name: str) -> str:
    """The configured Kubernetes dashboard URL of one job; without one, the job's Gang jobs page
    with a note saying how to configure it."""
    template = conf.get("gang", "dashboard_url_template", fallback="") or ""
    if not template:
        return gang_job_url(namespace, name) + DASHBOARD_NOT_CONFIGURED
    return _format(template, namespace, name)


class _JobLink(BaseOperatorLink):
    def url(self, namespace: str, name: str) -> str:
        raise NotImplementedError

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        stored = XCom.get_value(ti_key=ti_key, key=self.xcom_key)
        if isinstance(stored, str) and stored:
            return stored
        name = XCom.get_value(ti_key=ti_key, key=JOB_NAME_KEY)
        namespace = XCom.get_value(ti_key=ti_key, key=JOB_NAMESPACE_KEY)
        if not name or not namespace:
            return ""  # nothing submitted yet (say, the spec was rejected): no link
        return self.url(str(namespace), str(name))


class GangJobLink(_JobLink):
    """The "Gang job" button: this job's page in the airflow-gang UI plugin."""

    name = "Gang job"

    def url(self, namespace: str, name: str) -> str:
        return gang_job_url(namespace, name)


class KubernetesDashboardLink(_JobLink):
    """The "Kubernetes dashboard" button, when ``[gang] dashboard_url_template`` is set."""

    name = "Kubernetes dashboard"

    def url(self, namespace: str, name: str) -> str:
        return dashboard_url(namespace, name)


JOB_LINKS = (GangJobLink(), KubernetesDashboardLink())


def persist(context: Context, namespace: str, name: str) -> None:
    """Publish the job's identity and link URLs now, before any wait."""
    ti: Any = context["ti"]
    ti.xcom_push(key=JOB_NAME_KEY, value=name)
    ti.xcom_push(key=JOB_NAMESPACE_KEY, value=namespace)
    for link in JOB_LINKS:
        ti.xcom_push(key=link.xcom_key, value=link.url(namespace, name))
