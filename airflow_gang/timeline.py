"""Moved to `airflow_gang.reports.timeline`; this path keeps working (example DAGs import it)."""

from airflow_gang.reports.timeline import (
    FAILED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    TIMED_OUT,
    JobTimeline,
    finished_at,
    format_table,
    gang_admitted_at,
    job_timeline,
    parse_time,
    timed_out,
)

__all__ = [
    "FAILED",
    "QUEUED",
    "RUNNING",
    "SUCCEEDED",
    "TIMED_OUT",
    "JobTimeline",
    "finished_at",
    "format_table",
    "gang_admitted_at",
    "job_timeline",
    "parse_time",
    "timed_out",
]
