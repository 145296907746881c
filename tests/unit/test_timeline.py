"""Job timelines read off PyTorchJob and pod objects, and their table (the chart is the page's:
tests/unit/test_offline_chart.py, tests/plugins/test_offline_chart_browser.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_gang.reports.timeline import JobTimeline, format_table, job_timeline, timed_out

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def job(
    name: str = "j", *, workers: int = 1, conditions: list[tuple[str, str, float]] = (), **status: Any
) -> Any:
    return {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": at(0)},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "research"}},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}},
        },
        "status": {
            "conditions": [
                {"type": kind, "status": state, "lastTransitionTime": at(moment)}
                for kind, state, moment in conditions
            ],
            **status,
        },
    }


def pod(bound_at: float | None) -> dict[str, Any]:
    conditions = (
        []
        if bound_at is None
        else [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(bound_at)}]
    )
    return {"status": {"conditions": conditions}}


def test_admission_is_when_the_last_replica_was_bound() -> None:
    timeline = job_timeline(
        job(
            conditions=[("Created", "True", 0), ("Running", "False", 9), ("Succeeded", "True", 9)],
            completionTime=at(9),
        ),
        [pod(4), pod(5)],
    )
    assert (timeline.state, timeline.queue, timeline.namespace) == ("succeeded", "research", "ml")
    assert timeline.admitted_at == T0 + dt.timedelta(seconds=5)
    assert (timeline.queue_wait, timeline.run_seconds) == (5.0, 4.0)


def test_a_partly_bound_gang_is_not_admitted() -> None:
    timeline = job_timeline(job(workers=3), [pod(1), pod(1), pod(None), pod(None)])
    assert timeline.state == "queued"
    assert timeline.admitted_at is None
    assert timeline.queue_wait is None


def test_without_pods_the_running_condition_stands_for_admission() -> None:
    timeline = job_timeline(job(conditions=[("Running", "True", 3), ("Failed", "True", 7)]))
    assert timeline.state == "failed"
    assert timeline.admitted_at == T0 + dt.timedelta(seconds=3)
    assert timeline.finished_at == T0 + dt.timedelta(seconds=7)


def test_a_job_without_creation_time_is_rejected() -> None:
    broken = job()
    del broken["metadata"]["creationTimestamp"]
    with pytest.raises(ValueError, match="creationTimestamp"):
        job_timeline(broken)


def test_json_round_trip() -> None:
    timeline = job_timeline(job(conditions=[("Succeeded", "True", 6)]), [pod(2), pod(2)])
    assert JobTimeline.from_json(timeline.to_json()) == timeline


def test_table_lists_jobs_in_submission_order_with_waits() -> None:
    later = JobTimeline(
        "b",
        "ml",
        "q",
        "succeeded",
        T0 + dt.timedelta(seconds=1),
        T0 + dt.timedelta(seconds=8),
        None,
        T0 + dt.timedelta(seconds=10),
    )
    stuck = timed_out("c", "ml", "q", T0 + dt.timedelta(seconds=2))
    first = JobTimeline("a", "ml", "q", "running", T0, T0 + dt.timedelta(seconds=1))
    lines = format_table([later, stuck, first]).splitlines()
    assert lines[0].split() == [
        "job",
        "queue",
        "queued",
        "at",
        "admitted",
        "at",
        "finished",
        "at",
        "queue",
        "wait",
        "run",
        "outcome",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["a", "b", "c"]
    assert lines[3].split()[2:] == ["12:00:01.0", "12:00:08.0", "12:00:10.0", "7.0s", "2.0s", "succeeded"]
    assert lines[4].split()[-3:] == ["-", "timed", "out"]
