"""A job's controller restarting it is not a disruption (`airflow_gang.jobs.disruption`).

Volcano's ``RestartJob`` (a policy's action on ``PodFailed``, an exit code...) deletes every pod
of the job with no disruption mark, the failed one too, and makes them again. Pods deleted with
no mark after one of the gang's pods failed on its own, or while the job says ``Restarting``,
are that restart until the gang holds its pods again; a pod with a mark (the ``DisruptionTarget``
condition Kubernetes or Volcano's evictor writes) is still a disruption.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_gang.jobs.disruption import DisruptionStep, DisruptionTracker
from airflow_gang.jobs.pod_losses import DisruptionReason
from airflow_gang.kinds import VCJOB
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.model.gang_state import GangSnapshot

JsonDict = dict[str, Any]
T0 = dt.datetime(2026, 12, 5, 6, 0, tzinfo=dt.UTC)
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CRASHED = {
    "containerStatuses": [{"name": "pytorch", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
}


def vcjob(phase: str = "Running", *, retry_count: int = 0, min_available: int | None = None) -> JsonDict:
    job = VolcanoJobSpec(image="img:1", workers=3, min_available=min_available).build_vcjob("train", "ml")
    job["metadata"]["uid"] = UID
    job["status"] = {"state": {"phase": phase}, "retryCount": retry_count}
    return job


def podgroup(min_member: int = 4, phase: str = "Running") -> JsonDict:
    return {
        "metadata": {"name": f"train-{UID}", "namespace": "ml"},
        "spec": {"minMember": min_member, "queue": "research"},
        "status": {"phase": phase},
    }


def pod(
    index: int,
    *,
    uid: str | None = None,
    node: str | None = "node-1",
    phase: str = "Running",
    deleting: str | None = None,
    **status: Any,
) -> JsonDict:
    """Index 0 is the master task's pod, 1.. the workers'."""
    task, task_index = ("master", 0) if index == 0 else ("worker", index - 1)
    metadata: JsonDict = {
        "name": f"train-{task}-{task_index}",
        "uid": uid or f"uid-{index}",
        "labels": {
            "volcano.sh/job-name": "train",
            "volcano.sh/task-spec": task,
            "volcano.sh/task-index": str(task_index),
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = deleting
    return {
        "metadata": metadata,
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, **status},
    }


def preempted(index: int) -> JsonDict:
    """Volcano's evictor's marks, before it deletes the pod."""
    conditions = [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Evict",
            "message": "Pod is evicted, because of preempt",
        },
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "volcano: preempting to accommodate a higher priority pod",
            "lastTransitionTime": "2026-12-05T06:00:05Z",
        },
    ]
    return pod(index, deleting="2026-12-05T06:00:35Z", conditions=conditions)


def look(
    tracker: DisruptionTracker,
    pods: list[JsonDict],
    *,
    phase: str = "Running",
    retry_count: int = 0,
    min_available: int | None = None,
    seconds: int = 0,
) -> DisruptionStep:
    min_member = min_available or 4
    mode = "volcano" if min_member == 4 else "disabled"
    seen = GangSnapshot.of(
        vcjob(phase, retry_count=retry_count, min_available=min_available),
        podgroup(min_member),
        pods,
        mode,
        VCJOB,
    )
    assert not seen.status.finished
    return tracker.look(seen, admitted=True, now=T0 + dt.timedelta(seconds=seconds))


def gang(uid_prefix: str = "uid") -> list[JsonDict]:
    return [pod(i, uid=f"{uid_prefix}-{i}") for i in range(4)]


def restart_after_the_master_failed(tracker: DisruptionTracker, *, phase: str) -> list[DisruptionStep]:
    """Every look of a RestartJob after the master's container exited 1, the job reading ``phase``
    while its pods go (its status lags the deletions)."""
    steps = [look(tracker, gang())]
    failed = pod(0, uid="uid-0", phase="Failed", **CRASHED)
    workers = [pod(i, uid=f"uid-{i}") for i in range(1, 4)]
    steps.append(look(tracker, [failed, *workers], phase=phase, seconds=1))
    deleting = [pod(i, uid=f"uid-{i}", deleting="2026-12-05T06:00:02Z") for i in range(1, 4)]
    steps.append(look(tracker, [failed, *deleting], phase=phase, seconds=2))
    steps.append(look(tracker, deleting, phase=phase, seconds=3))  # the failed pod went first
    steps.append(look(tracker, [], phase=phase, seconds=4))  # all gone
    return steps


@pytest.mark.parametrize("phase", ["Running", "Restarting"])
def test_the_jobs_restart_after_a_pod_failed_on_its_own_is_no_disruption(phase: str) -> None:
    tracker = DisruptionTracker("retry", 3, readmission_timeout=60)
    steps = restart_after_the_master_failed(tracker, phase=phase)
    assert [step.started for step in steps] == [None] * len(steps)
    assert [step.give_up for step in steps] == [None] * len(steps)
    assert tracker.episodes == []
    assert tracker.current is None


def test_pods_deleted_with_no_mark_while_the_job_says_restarting_are_its_restart() -> None:
    """The wait need not see the failed pod: the job's own word is enough."""
    tracker = DisruptionTracker("retry", 3)
    assert look(tracker, gang()).started is None
    deleting = [pod(i, deleting="2026-12-05T06:00:02Z") for i in range(4)]
    assert look(tracker, deleting, phase="Restarting", retry_count=1, seconds=1).started is None
    assert look(tracker, deleting[2:], phase="Restarting", retry_count=1, seconds=2).started is None
    # Gone; the controller says Pending with a retry count (read as Restarting) and makes new pods.
    assert look(tracker, [], phase="Pending", retry_count=1, seconds=3).started is None
    fresh = [pod(i, uid=f"new-{i}", node=None, phase="Pending") for i in range(4)]
    assert look(tracker, fresh, phase="Pending", retry_count=1, seconds=4).started is None
    assert tracker.episodes == []


def test_the_same_restart_is_a_disruption_without_its_failure_or_its_word() -> None:
    """The rule is not a blanket pass: with no failed pod and the job still Running, pods deleted
    with no mark are lost (by a person or another controller)."""
    tracker = DisruptionTracker("retry", 3)
    look(tracker, gang())
    deleting = [pod(i, deleting="2026-12-05T06:00:02Z") for i in range(1, 4)]
    step = look(tracker, [pod(0), *deleting], seconds=1)
    assert step.started is not None
    assert step.started.reason is DisruptionReason.DELETED
    assert step.started.pods == ["train-worker-0", "train-worker-1", "train-worker-2"]
    assert step.give_up is not None


@pytest.mark.parametrize("phase", ["Running", "Restarting"])
def test_once_the_gang_holds_its_pods_again_an_unmarked_deletion_is_a_loss_again(phase: str) -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    restart_after_the_master_failed(tracker, phase=phase)
    fresh = gang("new")
    assert (
        look(
            tracker, [pod(i, uid=f"new-{i}", node=None, phase="Pending") for i in range(4)], seconds=5
        ).started
        is None
    )
    assert look(tracker, fresh, seconds=6).started is None  # bound again: the restart is over
    assert look(tracker, fresh, seconds=7).started is None
    step = look(tracker, [*fresh[:3], pod(3, uid="new-3", deleting="2026-12-05T06:00:08Z")], seconds=8)
    assert step.started is not None
    assert step.started.reason is DisruptionReason.DELETED
    assert step.started.pods == ["train-worker-2"]
    assert step.requeued is step.started  # 3 of minMember 4
    assert len(tracker.episodes) == 1


def test_a_preempted_pod_during_the_restart_still_counts() -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    look(tracker, gang())
    failed = pod(0, phase="Failed", **CRASHED)
    assert look(tracker, [failed, pod(1), pod(2), pod(3)], seconds=1).started is None
    # The restart deletes workers 0 and 1 with no mark; Volcano's evictor takes worker 2.
    going = [failed, pod(1, deleting="x"), pod(2, deleting="x"), preempted(3)]
    step = look(tracker, going, phase="Restarting", retry_count=1, seconds=2)
    assert step.started is not None
    assert step.started.reason is DisruptionReason.PREEMPTED
    assert step.started.pods == ["train-worker-2"]  # only the marked pod: the rest is the restart
    assert step.started.started_at == "2026-12-05T06:00:05+00:00"
    assert len(tracker.episodes) == 1


def test_a_marked_pod_that_goes_during_the_restart_counts_once_it_is_gone() -> None:
    tracker = DisruptionTracker("wait", 3, readmission_timeout=60)
    look(tracker, gang())
    failed = pod(0, phase="Failed", **CRASHED)
    look(tracker, [failed, pod(1), pod(2), preempted(3)], seconds=1)
    assert tracker.episodes[0].reason is DisruptionReason.PREEMPTED
    # The next looks (pods going, then gone) add nothing: the unmarked ones are the restart.
    look(tracker, [pod(1, deleting="x"), pod(2, deleting="x")], phase="Restarting", retry_count=1, seconds=2)
    look(tracker, [], phase="Restarting", retry_count=1, seconds=3)
    assert len(tracker.episodes) == 1
    assert tracker.episodes[0].pods == ["train-worker-2"]


def test_the_restart_of_a_job_whose_gang_is_smaller_than_its_replicas_is_no_disruption() -> None:
    tracker = DisruptionTracker("retry", 3)
    look(tracker, gang(), min_available=2)
    failed = pod(0, uid="uid-0", phase="Failed", **CRASHED)
    workers = [pod(i, uid=f"uid-{i}") for i in range(1, 4)]
    assert look(tracker, [failed, *workers], min_available=2, seconds=1).started is None
    # RestartJob deletes every pod; the failed one (nothing left to stop) goes at once.
    deleting = [pod(i, uid=f"uid-{i}", deleting="2026-12-05T06:00:02Z") for i in range(1, 4)]
    assert look(tracker, deleting, min_available=2, seconds=2).started is None
    assert tracker.episodes == []
