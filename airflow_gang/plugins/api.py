"""The read-only JSON API under ``/gang/api``.

``GET /api/jobs``
    Gang jobs (PyTorchJobs labelled ``airflow-gang.io/managed-by=airflow-gang``; every
    PyTorchJob with ``all=true``) of the namespaces shown, newest first. Filters:
    ``namespace``, ``queue``, ``dag_id``, ``state`` (``queued``, ``admitted``, ``running``,
    ``succeeded``, ``failed``; comma-separated for several).
``GET /api/jobs/{namespace}/{name}``
    One job: conditions, PodGroup, replica statuses, pods, recent events, identity labels, the
    task instance (with a link into Airflow's UI) and its task state store ``progress`` entry.
``GET /api/queues``
    Volcano queues: state, capability, allocated, PodGroups by phase.
``GET /api/timeline``
    Per queue, each job's queued/admitted/running/finished moments (same filters as jobs).

Failures answer ``{"error": {"kind", "message", "status"}}`` with status 400/403/404 (the
request), 502 (the cluster failed or is unreachable), 503 (CRDs or the connection missing) or
500 (a bug; details only in the API server log).
"""

# No `from __future__ import annotations`: FastAPI must evaluate the route signatures, which
# name dependencies local to the factory functions.
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from airflow_gang.plugins.errors import PageError, classify
from airflow_gang.plugins.service import GangPageService, JobFilter

JsonDict = dict[str, Any]


def _answer(service: GangPageService, produce: Callable[[], JsonDict]) -> JsonDict:
    try:
        return produce()
    except Exception as error:  # every failure becomes a PageError the handler renders
        raise classify(error, service.conn_id) from error


def _job_filter(
    namespace: str | None = None,
    queue: str | None = None,
    dag_id: str | None = None,
    state: str | None = None,
    include_all: Annotated[bool, Query(alias="all")] = False,
) -> JobFilter:
    """The query parameters the jobs list and the timeline share."""
    return JobFilter.parse(namespace, queue, dag_id, state, include_all)


def api_router(service_dependency: Callable[..., GangPageService]) -> APIRouter:
    """The JSON routes, each given a `GangPageService` by ``service_dependency``."""
    router = APIRouter()
    Service = Annotated[GangPageService, Depends(service_dependency)]

    Filter = Annotated[JobFilter, Depends(_job_filter)]

    @router.get("/jobs")
    def list_jobs(service: Service, job_filter: Filter) -> JsonDict:
        return _answer(service, lambda: service.jobs(job_filter))

    @router.get("/jobs/{namespace}/{name}")
    def get_job(service: Service, namespace: str, name: str) -> JsonDict:
        return _answer(service, lambda: service.job(namespace, name))

    @router.get("/queues")
    def list_queues(service: Service) -> JsonDict:
        return _answer(service, service.queues)

    @router.get("/timeline")
    def timeline(service: Service, job_filter: Filter) -> JsonDict:
        return _answer(service, lambda: service.timeline(job_filter))

    return router


__all__ = ["PageError", "api_router"]
