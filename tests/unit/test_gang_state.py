"""The one admission/completion decision shared by operator, trigger and sensors."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_gang.model.gang_state import NOT_GANG_SCHEDULED, GangPhase, failing_replica, gang_status

JsonDict = dict[str, Any]


def job(*conditions: tuple[str, str], workers: int = 3) -> JsonDict:
    return {
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}},
            "runPolicy": {"schedulingPolicy": {"queue": "research", "minAvailable": 1 + workers}},
        },
        "status": {
            "conditions": [{"type": t, "status": s, "message": f"{t} message"} for t, s in conditions]
        },
    }


def podgroup(phase: str | None, *, min_member: int = 4, unschedulable: str | None = None) -> JsonDict:
    status: JsonDict = {}
    if phase:
        status["phase"] = phase
    if unschedulable:
        status["conditions"] = [{"type": "Unschedulable", "status": "True", "message": unschedulable}]
    return {"spec": {"minMember": min_member, "queue": "research"}, "status": status}


def pods(bound: int, total: int = 4, phase: str = "Pending") -> list[JsonDict]:
    return [
        {
            "metadata": {"name": f"p{i}"},
            "spec": {"nodeName": "n1"} if i < bound else {},
            "status": {"phase": phase},
        }
        for i in range(total)
    ]


@pytest.mark.parametrize(
    ("pg_phase", "bound", "expected"),
    [
        (None, 0, GangPhase.QUEUED),
        ("Pending", 0, GangPhase.QUEUED),
        ("Inqueue", 3, GangPhase.QUEUED),
        ("Inqueue", 4, GangPhase.ADMITTED),
        ("Running", 4, GangPhase.ADMITTED),
        ("Unknown", 4, GangPhase.ADMITTED),
        ("Completed", 4, GangPhase.ADMITTED),
    ],
    ids=[
        "no-podgroup",
        "pending",
        "inqueue-partly-bound",
        "inqueue-bound",
        "running",
        "unknown-bound",
        "completed",
    ],
)
def test_admission_follows_the_podgroup_phase_and_bound_pods(
    pg_phase: str | None, bound: int, expected: GangPhase
) -> None:
    group = podgroup(pg_phase) if pg_phase else None
    assert gang_status(job(("Created", "True")), group, pods(bound), "provider").phase is expected


def test_a_queued_gang_reports_volcanos_reason_even_next_to_a_stale_condition() -> None:
    message = "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable"
    status = gang_status(
        job(("Created", "True")), podgroup("Pending", unschedulable=message), pods(0), "provider"
    )
    assert status.phase is GangPhase.QUEUED
    assert status.message == message
    assert status.describe() == f"queued podgroup=Pending queue=research bound=0/4 | {message}"
    stale = gang_status(
        job(("Created", "True")), podgroup("Running", unschedulable=message), pods(4), "provider"
    )
    assert stale.phase is GangPhase.ADMITTED, "decide by phase, never by a leftover condition"


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ((("Created", "True"), ("Running", "True")), GangPhase.RUNNING),
        ((("Created", "True"), ("Running", "False"), ("Succeeded", "True")), GangPhase.SUCCEEDED),
        ((("Created", "True"), ("Running", "False"), ("Failed", "True")), GangPhase.FAILED),
        ((("Created", "True"), ("Restarting", "True")), GangPhase.RUNNING),
    ],
    ids=["running", "succeeded", "failed", "restarting"],
)
def test_the_last_true_job_condition_decides_completion(
    conditions: tuple[tuple[str, str], ...], expected: GangPhase
) -> None:
    status = gang_status(job(*conditions), None, pods(4), "provider")
    assert status.phase is expected
    assert status.finished is (expected in (GangPhase.SUCCEEDED, GangPhase.FAILED))


def test_without_gang_scheduling_a_running_master_with_unbound_workers_is_not_admitted() -> None:
    deadlocked = gang_status(job(("Created", "True"), ("Running", "True")), None, pods(1), "disabled")
    assert deadlocked.phase is GangPhase.QUEUED
    assert not deadlocked.admitted
    assert (
        gang_status(job(("Created", "True"), ("Running", "True")), None, pods(4), "disabled").phase
        is GangPhase.RUNNING
    )


def test_training_operator_mode_pods_without_a_podgroup_are_no_gang_and_say_so() -> None:
    """Pods but no PodGroup: the training-operator runs without its gang flag, so the job is
    judged like a plain one (a Master running with unbound Workers is the deadlock) and warned."""
    running = job(("Created", "True"), ("Running", "True"))
    deadlocked = gang_status(running, None, pods(1), "training-operator")
    assert deadlocked.phase is GangPhase.QUEUED
    assert deadlocked.warning == NOT_GANG_SCHEDULED
    assert deadlocked.describe().endswith(f"| {NOT_GANG_SCHEDULED}")
    assert deadlocked.progress("t")["warning"] == NOT_GANG_SCHEDULED
    placed = gang_status(running, None, pods(4), "training-operator")
    assert (placed.phase, placed.warning) == (GangPhase.RUNNING, NOT_GANG_SCHEDULED)
    # Before the operator made anything, or with its PodGroup there, nothing is amiss.
    waiting = gang_status(job(("Created", "True")), None, [], "training-operator")
    assert (waiting.phase, waiting.warning) == (GangPhase.QUEUED, "")
    assert waiting.message == "waiting for the PodGroup to be created"
    # A gang-flag operator deletes a finished job's PodGroup; its pods may stay.
    done = job(("Created", "True"), ("Running", "False"), ("Succeeded", "True"))
    finished = gang_status(done, None, pods(4, phase="Succeeded"), "training-operator")
    assert (finished.phase, finished.warning) == (GangPhase.SUCCEEDED, "")
    ganged = gang_status(running, podgroup("Running"), pods(4), "training-operator")
    assert (ganged.phase, ganged.warning) == (GangPhase.RUNNING, "")
    assert "warning" not in ganged.progress("t")


def test_a_missing_job_is_lost() -> None:
    assert gang_status(None, None, [], "provider").phase is GangPhase.LOST


def test_the_first_failing_replica_is_named_with_exit_code_and_reason() -> None:
    def failed(name: str, kind: str, index: str, code: int, finished: str) -> JsonDict:
        terminated = {"exitCode": code, "reason": "Error", "finishedAt": finished}
        return {
            "metadata": {
                "name": name,
                "labels": {
                    "training.kubeflow.org/replica-type": kind,
                    "training.kubeflow.org/replica-index": index,
                },
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [{"name": "pytorch", "state": {"terminated": terminated}}],
            },
        }

    failure = failing_replica(
        [
            failed("train-master-0", "master", "0", 137, "2026-01-01T00:00:09Z"),
            failed("train-worker-2", "worker", "2", 3, "2026-01-01T00:00:05Z"),
        ]
    )
    assert failure is not None
    assert (failure.pod, failure.replica, failure.exit_code, failure.reason) == (
        "train-worker-2",
        "Worker 2",
        3,
        "Error",
    )
