"""The task's return value for one gang job: small, JSON-serialisable, the same on every path."""

from __future__ import annotations

from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.reports.timeline import finished_at as finished_time
from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]


def job_result(
    job: JsonDict,
    state: str,
    admitted_at: str | None,
    finished_at: str | None,
    *,
    metrics: dict[str, float] | None = None,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> JsonDict:
    """The task's return value: small, JSON-serialisable, the same shape on every path (a
    TrainJob's ``replicas`` are ``{"Node": n}``)."""
    metadata = job.get("metadata") or {}
    status = job.get("status") or {}
    submitted = parse_time(metadata.get("creationTimestamp"))
    admitted = parse_time(admitted_at)
    finished = parse_time(status.get("completionTime")) or parse_time(finished_at) or finished_time(job)
    if finished and admitted and finished < admitted:
        finished = admitted  # completionTime has 1 s resolution; never report a negative run
    replicas = job_kind.replica_counts(job)
    queue = job_kind.queue(job)
    named = str(metadata.get("name"))
    podgroup = job_kind.podgroup_name(named, metadata.get("uid")) if job_kind.has_podgroup(job) else None
    return {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "queue": queue,
        "podgroup": podgroup,
        "state": state,
        "submitted_at": submitted.isoformat() if submitted else None,
        "admitted_at": admitted.isoformat() if admitted else None,
        "finished_at": finished.isoformat() if finished else None,
        "queued_seconds": round((admitted - submitted).total_seconds(), 3)
        if admitted and submitted
        else None,
        "run_seconds": round((finished - admitted).total_seconds(), 3) if finished and admitted else None,
        "replicas": replicas,
        "metrics": dict(metrics or {}),
    }
