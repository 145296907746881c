"""The typed answers of the page's JSON API (`api`), published in its OpenAPI document.

Every route declares its answer here (a job and its page are in `schemas_job`); the routes
check the service's plain dicts against them (`schema_check`), so the page, the OpenAPI document
(``/gang/api/openapi.json``, snapshot in ``docs/page-api/openapi.json``, written by
``scripts/page_openapi.py``) and the service cannot drift apart silently. Times are ISO 8601
strings in UTC; durations are seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from airflow_gang.kinds import ANY_JOB_KIND
from airflow_gang.plugins.schemas_job import (
    AirflowTask,
    Condition,
    DisruptionEpisode,
    EventRow,
    JobDetail,
    JobRow,
    LiveDisruption,
    PodGroupView,
    PodRow,
    Progress,
    Recorded,
    ReplicaRow,
    StrictModel,
    TaskInstanceState,
    TimelineEntry,
    Waiter,
    WaitingGang,
)


class ErrorDetail(StrictModel):
    """What went wrong, for the page's banner."""

    kind: str = Field(
        description="What went wrong, for programs: bad_request, not_found, namespace_not_shown, forbidden, "
        "not_airflows, not_permitted, conflict, unreachable, unauthorized, api_error, crd_missing, "
        "connection or internal."
    )
    message: str = Field(description="What went wrong and how to fix it, for people.")
    status: int = Field(description="The HTTP status of the answer.")


class ErrorBody(StrictModel):
    """Every failure of the API: ``{"error": {"kind", "message", "status"}}``."""

    error: ErrorDetail = Field(description="The failure.")


class JobList(StrictModel):
    """``GET /api/jobs``: one page of the jobs table, newest first, and the values its filters take."""

    jobs: list[JobRow] = Field(description="The page's jobs, live and recorded, newest submission first.")
    total: int = Field(description="Jobs matching the filters, on every page.")
    offset: int = Field(description="Matching jobs skipped before this page.")
    limit: int = Field(description="The page size asked for.")
    live: int = Field(description="Of the matching jobs, those whose objects still exist.")
    namespaces: list[str] = Field(description="The namespaces the page shows ([gang] ui_namespaces).")
    queues: list[str] = Field(description="Queues of the matching jobs, for the queue filter.")
    dag_ids: list[str] = Field(description="DAG ids of the matching jobs, for the DAG filter.")
    states: list[str] = Field(description="Every state the state filter accepts.")
    warnings: list[str] = Field(description="What could not be read, the rest shown anyway.")
    generated_at: str = Field(description="When the answer was made (ISO 8601 UTC).")


class ActionResult(StrictModel):
    """``POST /api/jobs/{namespace}/{name}/{action}``: what was done."""

    action: str = Field(description="The action carried out: delete, suspend or resume.")
    kind: str = Field(description=f"The job's kind: {ANY_JOB_KIND}.")
    name: str = Field(description="The job's name.")
    namespace: str = Field(description="The job's namespace.")
    message: str = Field(description="What was done, in a sentence (a deletion may still be under way).")


class ResourceUse(StrictModel):
    """One resource over the cluster's schedulable nodes, as Kubernetes quantities."""

    allocatable: str | None = Field(description="What the nodes offer; null when nodes cannot be read.")
    allocated: str = Field(description="What bound, unfinished pods request.")
    free: str | None = Field(description="Allocatable minus allocated; null when nodes cannot be read.")


class QueueRow(StrictModel):
    """A Volcano queue: its limits, what it holds, what its waiting gangs ask for, what is free to it."""

    name: str = Field(description="The queue's name.")
    state: str = Field(description="Its state: Open, Closed, Closing.")
    weight: int | None = Field(description="Its weight (share of the cluster among queues).")
    reclaimable: bool | None = Field(description="Whether other queues may reclaim what it holds.")
    capability: dict[str, Any] = Field(
        description="Its cap per resource as the Queue spells it (Kubernetes quantities); empty: unlimited."
    )
    allocated: dict[str, Any] = Field(
        description="What it holds per resource: the larger of its bound pods' requests and Volcano's "
        "status (Kubernetes quantities)."
    )
    volcano_allocated: dict[str, Any] = Field(description="What Volcano's status says it holds.")
    status_counts: dict[str, int] = Field(
        description="Volcano's PodGroup counts of the queue, cluster-wide: pending, inqueue, running..."
    )
    podgroups: dict[str, int] = Field(description="PodGroups of the namespaces shown, per phase.")
    deserved: dict[str, str] | None = Field(None, description="Its deserved share per resource; null: unset.")
    guarantee: dict[str, str] | None = Field(None, description="Its guarantee per resource; null: unset.")
    pending: dict[str, str] | None = Field(None, description="What its waiting gangs ask for, per resource.")
    free: dict[str, str] | None = Field(
        None, description="What it could still start: its capability left, capped by the cluster's free."
    )
    waiting_gangs: int | None = Field(None, description="Gangs waiting in it.")


class QueueOverview(StrictModel):
    """``GET /api/queues``: every Volcano queue, the cluster's totals and every waiting gang."""

    queues: list[QueueRow] = Field(description="Every queue, by name.")
    cluster: dict[str, ResourceUse] = Field(
        description="Per resource (nvidia.com/gpu, cpu, memory...), the cluster's totals."
    )
    waiting: list[WaitingGang] = Field(description="Gangs not yet admitted, each queue's in admission order.")
    namespaces: list[str] = Field(description="The namespaces the page shows.")
    warnings: list[str] = Field(description="What could not be read (a missing RBAC rule), the rest shown.")
    generated_at: str = Field(description="When the answer was made (ISO 8601 UTC).")


class TimelineRow(TimelineEntry):
    """A job on the timeline, with its table state and reason."""

    gang_state: str = Field(description="The job's state in the jobs table (see JobRow.state).")
    reason: str | None = Field(description="The job's reason in the jobs table.")


class QueueTimeline(StrictModel):
    """The timeline of one queue."""

    queue: str = Field(description='The queue\'s name; "(no queue)" for jobs without one.')
    jobs: list[TimelineRow] = Field(description="Its jobs of the page, by time queued.")


class TimelinePage(StrictModel):
    """``GET /api/timeline``: per queue, the moments of the jobs of the same page of ``/api/jobs``."""

    queues: list[QueueTimeline] = Field(description="One timeline per queue, by queue name.")
    now: str = Field(description="When the answer was made (ISO 8601 UTC): where open bars end.")
    warnings: list[str] = Field(description="What could not be read, the rest shown anyway.")


_FAILURES: dict[int, str] = {
    400: "The request is wrong (an unknown filter value, kind, or no X-Requested-By header).",
    403: "The cluster refused the page's service account (the message names the RBAC rule), or the "
    "user may not change the job.",
    404: "No such job, live or recorded; a namespace the page does not show; an unknown action.",
    409: "The job's state does not allow the action (resume a job that is not suspended...).",
    500: "A bug: details only in the API server log.",
    502: "The cluster failed or could not be reached.",
    503: "The CRDs or the Kubernetes connection are missing (the message says what to install or set).",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The routes' ``responses=``: each status answering an `ErrorBody`, described."""
    return {status: {"model": ErrorBody, "description": _FAILURES[status]} for status in (*statuses, 500)}


__all__ = [
    "ActionResult",
    "AirflowTask",
    "Condition",
    "DisruptionEpisode",
    "ErrorBody",
    "ErrorDetail",
    "EventRow",
    "JobDetail",
    "JobList",
    "JobRow",
    "LiveDisruption",
    "PodGroupView",
    "PodRow",
    "Progress",
    "QueueOverview",
    "QueueRow",
    "QueueTimeline",
    "Recorded",
    "ReplicaRow",
    "ResourceUse",
    "StrictModel",
    "TaskInstanceState",
    "TimelineEntry",
    "TimelinePage",
    "TimelineRow",
    "Waiter",
    "WaitingGang",
    "error_responses",
]
