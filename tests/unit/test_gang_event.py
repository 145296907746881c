"""The trigger's event read back in the task, and the failure it means (shared by operator and sensors)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_gang.exceptions import GangAdmissionTimeout, GangApiError, GangApiUnavailable, GangJobLost
from airflow_gang.triggers.events import EventStatus, GangEvent


def payload(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, "name": "train-1", "namespace": "ml", "uid": "u1", "message": "why", **extra}


@pytest.mark.parametrize("status", ["admitted", "succeeded", "failed"])
def test_events_the_task_goes_on_from_raise_nothing(status: str) -> None:
    assert GangEvent.of(payload(status)).to_exception() is None


def test_an_admission_timeout_says_the_job_was_deleted_and_keeps_queue_and_wait() -> None:
    event = {**payload("admission_timeout", queue="research"), "deleted": True}
    error = GangEvent.of(event).to_exception(waited_seconds=60.0)
    assert isinstance(error, GangAdmissionTimeout)
    assert (error.name, error.namespace, error.queue, error.waited_seconds, error.reason) == (
        "train-1",
        "ml",
        "research",
        60.0,
        "why",
    )
    assert "PyTorchJob ml/train-1 was not admitted in time by queue 'research' (why)" in str(error)
    assert "it was deleted (seen gone, with its PodGroup and pods)" in str(error)
    assert "so it holds no resources and a retry starts clean" in str(error)


@pytest.mark.parametrize(
    ("deleted", "said", "not_said"),
    [
        (
            False,
            "its deletion was not confirmed in time (the orphan reaper finishes it)",
            "retry starts clean",
        ),
        # An event from a trigger of an earlier release carries no word on it: only the job's absence.
        (None, "; it was deleted", "retry starts clean"),
    ],
    ids=["not-confirmed", "not-known"],
)
def test_an_admission_timeout_says_only_what_its_deletion_showed(
    deleted: bool | None, said: str, not_said: str
) -> None:
    event = {**payload("admission_timeout", queue="research"), "deleted": deleted}
    message = str(GangEvent.of(event).to_exception(waited_seconds=60.0))
    assert said in message
    assert not_said not in message


def test_an_admission_timeout_without_a_queue_says_there_was_no_gang() -> None:
    no_gang = {**payload("admission_timeout"), "queue": None, "kind": "TrainJob"}
    error = GangEvent.of(no_gang).to_exception(waited_seconds=60.0)
    assert (
        "TrainJob ml/train-1 was not admitted in time (no gang scheduling: not every replica was bound)"
        in str(error)
    )


def test_an_outage_past_its_limit_carries_its_length_and_last_error() -> None:
    event = GangEvent.of(payload("api_unavailable", unavailable_seconds=901.5, last_error="refused"))
    error = event.to_exception()
    assert isinstance(error, GangApiUnavailable)
    assert (error.unavailable_seconds, error.last_error) == (901.5, "refused")


def test_a_lost_job_and_an_error_name_the_job() -> None:
    lost = GangEvent.of(payload("lost")).to_exception()
    assert isinstance(lost, GangJobLost)
    assert lost.name == "train-1"
    failed_read = GangEvent.of(payload("error", reason="api_error")).to_exception()
    assert isinstance(failed_read, GangApiError)
    assert str(failed_read) == "waiting for PyTorchJob ml/train-1 failed: why"


def test_only_an_error_for_the_execution_deadline_is_the_tasks_own_timeout() -> None:
    assert GangEvent.of(payload("error", reason="execution_timeout")).is_execution_timeout
    assert not GangEvent.of(payload("error", reason="api_error")).is_execution_timeout
    assert not GangEvent.of(payload("lost", reason="execution_timeout")).is_execution_timeout


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError, match="progress"):
        GangEvent.of(payload("progress"))
    assert EventStatus("admitted") is EventStatus.ADMITTED


def test_the_moment_the_trigger_asked_for_the_deletion_is_the_records_end() -> None:
    event = {**payload("admission_timeout"), "timeline": {"deleted_at": "2026-12-05T08:00:02+00:00"}}
    assert GangEvent.of(event).deleted_at == "2026-12-05T08:00:02+00:00"
    assert GangEvent.of(payload("admission_timeout")).deleted_at is None  # an older trigger's event
