"""The jobs table's filters and paging, parsed from the query string, and the row test (pure)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JOB_KINDS, JobKind, job_kind_named
from airflow_gang.plugins.errors import PageError
from airflow_gang.plugins.identity import label_of
from airflow_gang.plugins.summaries import STATES
from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]
NO_QUEUE = "(no queue)"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True)
class JobFilter:
    """The jobs table's filters; None or empty matches everything."""

    namespace: str | None = None
    queue: str | None = None
    dag_id: str | None = None
    states: tuple[str, ...] = ()
    include_unmanaged: bool = False
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = DEFAULT_PAGE_SIZE
    offset: int = 0
    kind: str | None = None

    @classmethod
    def parse(
        cls,
        namespace: str | None,
        queue: str | None,
        dag_id: str | None,
        state: str | None,
        include_unmanaged: bool,
        *,
        since: str | None = None,
        until: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        offset: int = 0,
        kind: str | None = None,
    ) -> JobFilter:
        states = tuple(s.strip().lower() for s in (state or "").split(",") if s.strip())
        unknown = [s for s in states if s not in STATES]
        if unknown:
            raise PageError(
                400, "bad_request", f"unknown state(s) {', '.join(unknown)}: choose from {', '.join(STATES)}"
            )
        if not 1 <= limit <= MAX_PAGE_SIZE or offset < 0:
            raise PageError(400, "bad_request", f"limit must be 1..{MAX_PAGE_SIZE} and offset >= 0")
        return cls(
            namespace or None,
            queue or None,
            dag_id or None,
            states,
            include_unmanaged,
            _moment("since", since),
            _moment("until", until),
            limit,
            offset,
            job_kind.kind if (job_kind := parse_kind(kind)) else None,
        )


def parse_kind(kind: str | None) -> JobKind | None:
    """The `JobKind` a ``kind`` query parameter names (case-insensitive), None for none; 400 for
    another word."""
    if not kind:
        return None
    by_lower = {name.lower(): name for name in JOB_KINDS}
    if kind.lower() not in by_lower:
        raise PageError(400, "bad_request", f"unknown kind {kind!r}: choose from {', '.join(JOB_KINDS)}")
    return job_kind_named(by_lower[kind.lower()])


def _moment(field_name: str, value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise PageError(
            400, "bad_request", f"{field_name} must be an ISO 8601 time such as 2026-12-01T00:00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def matches(row: JsonDict, job_filter: JobFilter) -> bool:
    if job_filter.kind is not None and row.get("kind", DEFAULT_JOB_KIND.kind) != job_filter.kind:
        return False
    if job_filter.queue is not None and (row["queue"] or NO_QUEUE) != job_filter.queue:
        return False
    if job_filter.since is not None or job_filter.until is not None:
        submitted = parse_time(row["created_at"])
        if submitted is None:
            return False
        if job_filter.since is not None and submitted < job_filter.since:
            return False
        if job_filter.until is not None and submitted > job_filter.until:
            return False
    if job_filter.states and row["state"] not in job_filter.states:
        return False
    if job_filter.dag_id is not None:
        airflow = row["airflow"]
        # An unresolved dag id is the label value, which may be the hash of the wanted id.
        return airflow is not None and airflow["dag_id"] in (job_filter.dag_id, label_of(job_filter.dag_id))
    return True
