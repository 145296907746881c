"""The JSON API under ``/gang/api``: reads, and the three actions on a job.

``GET /api/jobs``
    Gang jobs of the namespaces shown, newest first (by submission): live ones (every kind of
    `airflow_gang.kinds`, labelled ``airflow-gang.io/managed-by=airflow-gang``; every one with
    ``all=true``; each row's ``kind`` says which) and the ones cleanup deleted, as their tasks
    recorded them (``live: false``). A cluster that does not serve a kind shows the others.
    Filters: ``kind`` (a kind's name, e.g. ``VolcanoJob``),
    ``namespace``, ``queue``, ``dag_id``, ``state`` (comma-separated; the ``states`` of the
    answer list them), ``since``/``until`` (ISO 8601, on submission); paging ``limit`` (default
    100, at most 1000) and ``offset``; ``total`` counts every match.
``GET /api/jobs/{namespace}/{name}``
    One job (``?kind=TrainJob`` names its kind; without it the first kind with a job of that
    name): conditions, PodGroup, replica statuses, pods, recent events, identity labels, the
    task instance (with a link into Airflow's UI) and its task state store ``progress`` entry.
    A deleted job answers what its task recorded (``recorded``: when, and the master's log tail).
``POST /api/jobs/{namespace}/{name}/{action}``
    ``delete``, ``suspend`` or ``resume`` a live job an Airflow task submitted (`actions`;
    ``?kind=`` as for the job): 403
    unless the auth manager lets the user change the DAG's task instances; 409 when the job's
    state does not allow it; recorded in Airflow's audit log. Needs the ``X-Requested-By``
    header, which no cross-site form can send.
``GET /api/queues``
    Volcano queues: state, capability, allocated, PodGroups by phase.
``GET /api/timeline``
    Per queue, each job's queued/admitted/running/finished moments, for the jobs of the same
    page of ``/api/jobs`` (same filters and paging).

Failures answer ``{"error": {"kind", "message", "status"}}`` with status 400/403/404 (the
request), 502 (the cluster failed or is unreachable), 503 (CRDs or the connection missing) or
500 (a bug; details only in the API server log).

Each answer is declared in `schemas` (each route's ``response_model``, so the app's OpenAPI
document, ``/gang/api/openapi.json``), and the service's dicts are checked against it
(`schema_check`, cheaper than FastAPI's own check): an undeclared key, a missing one or a value
of another type is a 500 naming it, never a silent change of the page's API. A key a dict leaves
out stays out of the answer: a recorded job's row has no ``suspended``, as before.
"""

# No `from __future__ import annotations`: FastAPI must evaluate the route signatures, which
# name dependencies local to the factory functions.
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import Response

from airflow_gang.plugins.actions import CSRF_HEADER
from airflow_gang.plugins.errors import PageError, classify
from airflow_gang.plugins.job_filter import DEFAULT_PAGE_SIZE, JobFilter
from airflow_gang.plugins.schema_check import Checked
from airflow_gang.plugins.schemas import (
    ActionResult,
    JobDetail,
    JobList,
    QueueOverview,
    TimelinePage,
    error_responses,
)
from airflow_gang.plugins.service import GangPageService

JsonDict = dict[str, Any]


def _answer(service: GangPageService, produce: Callable[[], JsonDict], checked: Checked) -> Response:
    try:
        answer = produce()
    except Exception as error:  # every failure becomes a PageError the handler renders
        raise classify(error, service.conn_id) from error
    return checked.response(answer)


def _job_filter(
    *,
    namespace: str | None = None,
    queue: str | None = None,
    dag_id: str | None = None,
    state: str | None = None,
    include_all: Annotated[bool, Query(alias="all")] = False,
    since: str | None = None,
    until: str | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
    offset: int = 0,
    kind: str | None = None,
) -> JobFilter:
    """The query parameters the jobs list and the timeline share."""
    return JobFilter.parse(
        namespace,
        queue,
        dag_id,
        state,
        include_all,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
        kind=kind,
    )


def api_router(service_dependency: Callable[..., GangPageService]) -> APIRouter:
    """The JSON routes, each given a `GangPageService` by ``service_dependency``."""
    router = APIRouter()
    Service = Annotated[GangPageService, Depends(service_dependency)]

    Filter = Annotated[JobFilter, Depends(_job_filter)]
    # The routes return their checked answers as responses: FastAPI's ``response_model`` documents
    # them (OpenAPI) and, given a response, checks nothing twice.
    jobs, job, acted = Checked(JobList), Checked(JobDetail), Checked(ActionResult)
    queues, timelines = Checked(QueueOverview), Checked(TimelinePage)

    @router.get(
        "/jobs",
        response_model=JobList,
        responses=error_responses(400, 403, 404, 502, 503),
    )
    def list_jobs(service: Service, job_filter: Filter) -> Response:
        return _answer(service, lambda: service.jobs(job_filter), jobs)

    @router.get(
        "/jobs/{namespace}/{name}",
        response_model=JobDetail,
        responses=error_responses(400, 403, 404, 502, 503),
    )
    def get_job(service: Service, namespace: str, name: str, kind: str | None = None) -> Response:
        return _answer(service, lambda: service.job(namespace, name, kind), job)

    @router.post(
        "/jobs/{namespace}/{name}/{action}",
        response_model=ActionResult,
        responses=error_responses(400, 403, 404, 409, 502, 503),
    )
    def act(
        service: Service,
        namespace: str,
        name: str,
        action: str,
        *,
        requested_by: Annotated[str | None, Header(alias=CSRF_HEADER)] = None,
        kind: str | None = None,
    ) -> Response:
        if not requested_by:
            raise PageError(400, "bad_request", f"an action needs the {CSRF_HEADER} header (CSRF protection)")
        return _answer(service, lambda: service.act(namespace, name, action, kind), acted)

    @router.get(
        "/queues",
        response_model=QueueOverview,
        responses=error_responses(403, 502, 503),
    )
    def list_queues(service: Service) -> Response:
        return _answer(service, service.queues, queues)

    @router.get(
        "/timeline",
        response_model=TimelinePage,
        responses=error_responses(400, 403, 404, 502, 503),
    )
    def timeline(service: Service, job_filter: Filter) -> Response:
        return _answer(service, lambda: service.timeline(job_filter), timelines)

    return router


__all__ = ["PageError", "api_router"]
