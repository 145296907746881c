"""The records a task instance keeps of its jobs (`airflow_gang.state.history`) and how the page
merges the records of one job kept by two tasks (`airflow_gang.plugins.history_record.merged`)."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_gang.plugins.history_record import HistoryRecord, merged
from airflow_gang.plugins.identity import TaskIdentity
from airflow_gang.state import history

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def job(uid: str = "u-1", name: str = "train-1", gpus: int = 1, workers: int = 3) -> dict[str, object]:
    def replica(count: int) -> dict[str, object]:
        limits = {"nvidia.com/gpu": gpus, "memory": "2Gi"}
        return {"replicas": count, "template": {"spec": {"containers": [{"resources": {"limits": limits}}]}}}

    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": uid,
            "creationTimestamp": "2026-12-01T11:50:00Z",
        },
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "research"}},
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)},
        },
    }


def started(uid: str = "u-1", try_number: int = 1, **kwargs: object) -> dict[str, object]:
    return history.started(job(uid), try_number=try_number, gang_scheduling="provider", now=NOW, **kwargs)


def test_a_started_record_says_what_the_gang_asks_for_and_when_it_was_submitted() -> None:
    record = started()
    assert record["resources"] == {"memory": 4 * 2 * 1024**3, "nvidia.com/gpu": 4.0}
    assert record["replicas"] == {"Master": 1, "Worker": 3}
    assert (record["queue"], record["state"], record["waits_for"]) == ("research", "submitted", "completion")
    assert record["submitted_at"] == "2026-12-01T11:50:00+00:00"


def test_an_ended_record_has_its_waits_and_gpu_seconds() -> None:
    record = history.ended(
        started(),
        "succeeded",
        now=NOW,
        admitted_at="2026-12-01T11:55:00+00:00",
        finished_at="2026-12-01T11:59:30Z",
    )
    assert (record["queued_seconds"], record["run_seconds"], record["gpu_seconds"]) == (300.0, 270.0, 1080.0)


def test_a_gang_never_admitted_waited_until_its_end_and_ran_nothing() -> None:
    record = history.ended(started(), "admission_timeout", now=NOW, reason="not admitted within 600s")
    assert (record["queued_seconds"], record["run_seconds"], record["gpu_seconds"]) == (600.0, None, None)
    assert record["reason"] == "not admitted within 600s"


def test_a_completion_time_before_admission_counts_as_no_run() -> None:
    record = history.ended(
        started(),
        "succeeded",
        now=NOW,
        admitted_at="2026-12-01T11:55:00.700+00:00",
        finished_at="2026-12-01T11:55:00Z",
    )
    assert record["run_seconds"] == 0.0


def test_an_unknown_end_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown end state 'done'"):
        history.ended(started(), "done", now=NOW)


def test_upsert_keeps_one_record_per_job_and_a_finished_job_keeps_its_end() -> None:
    first = started("u-1")
    records = history.upsert(None, first)
    records = history.upsert(records, started("u-2", try_number=2))
    assert [r["uid"] for r in records] == ["u-1", "u-2"]
    ended = history.ended(records[0], "admission_timeout", now=NOW)
    records = history.upsert(records, ended)
    assert [r["state"] for r in records] == ["admission_timeout", "submitted"]
    # A later try taking over the finished job (to deliver its result) does not reopen it.
    assert history.upsert(records, started("u-1", try_number=3))[0]["state"] == "admission_timeout"
    # A job taken over again keeps the try that submitted it.
    retaken = history.upsert(records, started("u-2", try_number=4))
    assert retaken[1]["try_number"] == 2


def test_upsert_keeps_the_newest_records() -> None:
    records: list[dict[str, object]] = []
    for index in range(history.MAX_RECORDS + 5):
        records = history.upsert(records, started(f"u-{index}"))
    assert len(records) == history.MAX_RECORDS
    assert records[-1]["uid"] == f"u-{history.MAX_RECORDS + 4}"


def test_log_tails_are_kept_for_the_newest_jobs_and_capped() -> None:
    tails: dict[str, str] = {}
    for index in range(history.MAX_LOG_TAILS + 2):
        tails = history.with_log_tail(
            tails, f"u-{index}", "x" * (history.MAX_LOG_TAIL_CHARS + 10) + f"{index}"
        )
    assert len(tails) == history.MAX_LOG_TAILS
    assert "u-0" not in tails
    assert all(len(tail) == history.MAX_LOG_TAIL_CHARS for tail in tails.values())
    assert tails[f"u-{history.MAX_LOG_TAILS + 1}"].endswith(str(history.MAX_LOG_TAILS + 1))


def test_the_failure_headline_leaves_out_the_log() -> None:
    message = (
        "PyTorchJob x is failed. Replica Worker 0 (pod x-worker-0) exited with code 3 (Error)."
        " Last 100 log lines:\nboom"
    )
    assert history.failure_headline(message) == (
        "PyTorchJob x is failed. Replica Worker 0 (pod x-worker-0) exited with code 3 (Error)."
    )


def identity(task_id: str) -> TaskIdentity:
    return TaskIdentity("dag", task_id, "run", -1, 1, resolved=True, dag_resolved=True)


def test_a_job_recorded_by_its_submitter_and_its_sensor_is_one_row_with_the_sensors_outcome() -> None:
    submitted = {**started(waits_for="submission"), "recorded_at": "2026-12-01T11:50:01+00:00"}
    seen = history.ended(
        {**started(), "recorded_at": "2026-12-01T11:50:05+00:00"},
        "failed",
        now=NOW,
        admitted_at="2026-12-01T11:51:00+00:00",
        reason="Replica Worker 0 exited with code 1",
    )
    other = {**started("u-9"), "recorded_at": "2026-12-01T11:52:00+00:00"}
    rows = merged(
        [
            HistoryRecord(seen, identity("wait"), "failed"),
            HistoryRecord(submitted, identity("submit"), "success"),
            HistoryRecord(other, identity("other"), "running", task_try=2),  # try 1's job
        ]
    )
    assert len(rows) == 2
    row = next(r for r in rows if r.uid == "u-1")
    assert row.identity.task_id == "submit"
    assert row.outcome() == ("failed", "Replica Worker 0 exited with code 1")
    assert row.record["waits_for"] == "submission"
    gone = next(r for r in rows if r.uid == "u-9")
    assert gone.outcome()[0] == "gone"
    assert "task instance state: running" in str(gone.outcome()[1])


@pytest.mark.parametrize("task_state", ["deferred", "scheduled", "queued", "running"])
def test_a_deleted_job_whose_try_is_still_active_is_ending_not_gone(task_state: str) -> None:
    # The trigger deleted the job for its admission timeout; the task resumes and records it
    # seconds later. Until then the row must not blame a kill for it.
    record = HistoryRecord(started(), identity("train"), task_state, task_try=1)
    state, reason = record.outcome()
    assert state == "ending"
    assert f"its task ({task_state}, try 1) is still active" in str(reason)
    assert record.last_seen_at() == record.record["recorded_at"]


def test_a_deleted_job_of_an_earlier_or_finished_try_is_gone_and_ends_when_its_task_did() -> None:
    earlier = HistoryRecord(started(), identity("train"), "deferred", task_try=2)
    assert earlier.outcome()[0] == "gone"
    killed = HistoryRecord(started(), identity("train"), "failed", 1, "2026-12-01T11:58:00+00:00")
    assert killed.outcome()[0] == "gone"
    assert killed.summary()["last_seen_at"] == "2026-12-01T11:58:00+00:00"
    drawn = killed.timeline()
    assert drawn is not None
    assert (drawn["live"], drawn["last_seen_at"]) == (False, "2026-12-01T11:58:00+00:00")
    ended = HistoryRecord(history.ended(started(), "succeeded", now=NOW), identity("train"), "success", 1)
    assert ended.summary()["last_seen_at"] is None  # it has an end


def test_a_job_whose_sensor_is_about_to_record_its_end_is_ending() -> None:
    submitted = HistoryRecord(started(waits_for="submission"), identity("submit"), "success", 1)
    waiting = HistoryRecord(started(), identity("wait"), "deferred", 1)
    (row,) = merged([submitted, waiting])
    assert row.identity.task_id == "submit"
    assert row.outcome()[0] == "ending"
    assert "the task waiting for it (wait: deferred) is still active" in str(row.outcome()[1])


def test_an_episode_kept_by_another_release_is_read_back_in_this_releases_shape() -> None:
    # The page's answer is typed (extra keys refused): a stored episode with a key of its own, or
    # without one, must not fail the whole table.
    stored = {"number": 1, "reason": "preempted", "started_at": "2026-12-01T11:55:00+00:00", "by": "x"}
    record = HistoryRecord({**started(), "disruptions": [stored]}, identity("train"), "success", 1)
    (episode,) = record.summary()["disruptions"]
    assert "by" not in episode
    assert (episode["reason"], episode["pods"], episode["ended_at"]) == ("preempted", [], None)
