"""Operational metrics reach a StatsD server through Airflow's own facade (`airflow_gang.reports.telemetry`),
from a task process (the Task SDK's facade) and from the scheduler or triggerer (core's)."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_gang.exceptions import GangApiError
from airflow_gang.model.outage import Outage
from airflow_gang.reports import telemetry
from airflow_gang.state import history
from tests.statsd_listener import airflow_sending_to

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
JOB = {
    "metadata": {
        "name": "train-1",
        "namespace": "ml",
        "uid": "u-1",
        "creationTimestamp": "2026-12-01T11:59:00Z",
    },
    "spec": {
        "runPolicy": {"schedulingPolicy": {"queue": "research"}},
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}},
            },
        },
    },
}
WHERE = {"dag_id": "retrain", "task_id": "train"}


def record(state: str, **moments: str | None) -> dict[str, object]:
    started = history.started(JOB, try_number=1, gang_scheduling="provider", now=NOW)
    return history.ended(started, state, now=NOW, **moments)


def test_a_succeeded_job_sends_its_queue_wait_and_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    with airflow_sending_to(monkeypatch) as statsd:
        telemetry.try_ended(
            record(
                "succeeded", admitted_at="2026-12-01T11:59:30+00:00", finished_at="2026-12-01T12:00:00+00:00"
            ),
            **WHERE,
        )
        (queue_wait,) = statsd.wait_for("airflow.gang.queue_wait")
        (run_time,) = statsd.wait_for("airflow.gang.run_time")
    assert queue_wait[1:] == (30000.0, "ms")
    assert run_time[1:] == (30000.0, "ms")
    assert "airflow.gang.admission_timeout" not in statsd.names()


def test_an_admission_timeout_and_the_retry_after_it_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    timed_out = record("admission_timeout")
    with airflow_sending_to(monkeypatch) as statsd:
        telemetry.try_ended(timed_out, **WHERE)
        telemetry.try_started(timed_out, **WHERE)
        telemetry.try_started(record("failed"), **WHERE)  # a retry after a failure is not one
        assert statsd.wait_for("airflow.gang.admission_timeout") == [
            ("airflow.gang.admission_timeout", 1.0, "c")
        ]
        statsd.wait_for("airflow.gang.admission_timeout_retry")
    assert statsd.names().count("airflow.gang.admission_timeout_retry") == 1
    assert "airflow.gang.queue_wait" not in statsd.names()  # it was never admitted


def test_the_reaper_counts_its_deletions_through_the_schedulers_facade(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with airflow_sending_to(monkeypatch, core=True) as statsd:
        telemetry.reaper_deletion(reason="orphaned", **WHERE)
        assert statsd.wait_for("airflow.gang.reaper_deletion") == [("airflow.gang.reaper_deletion", 1.0, "c")]


def test_an_outage_ridden_out_is_counted_once_with_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 100.0, 104.0, 107.5, 107.5, 107.5, 107.5]).__next__
    outage = Outage("PyTorchJob ml/train-1", clock=clock)
    with airflow_sending_to(monkeypatch) as statsd:
        outage.failed(GangApiError("refused", status=None))
        outage.failed(GangApiError("refused", status=None))
        assert outage.recovered() is not None
        assert outage.recovered() is None  # no episode: nothing more to count
        statsd.wait_for("airflow.gang.api_outage")
        (seconds,) = statsd.wait_for("airflow.gang.api_outage_seconds")
    assert statsd.names().count("airflow.gang.api_outage") == 1
    assert seconds[1:] == (7500.0, "ms")


def test_without_metrics_configured_nothing_is_sent_and_nothing_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk._shared.observability.metrics import stats as sdk_stats

    monkeypatch.setattr(sdk_stats, "_factory", None)
    monkeypatch.setattr(telemetry, "_facade", lambda: None)
    telemetry.try_ended(record("admission_timeout"), **WHERE)

    def broken() -> object:
        raise RuntimeError("a metrics backend that cannot be reached")

    monkeypatch.setattr(telemetry, "_facade", broken)
    telemetry.try_ended(record("admission_timeout"), **WHERE)
    telemetry.api_outage_ridden(3.0)
