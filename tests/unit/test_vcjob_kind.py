"""What the lifecycle reads off a Volcano Job (`VCJOB`): its PodGroup's name and owner, its
kind told from batch/v1's Job, its one phase read as the lifecycle's states, its rank-0 pod, its
tasks as replicas, where its gang stands, and its timeline."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from airflow_gang.kinds import PYTORCHJOB, VCJOB, job_kind_describing, job_kind_named, job_kind_of_object
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.model.gang_state import GangPhase, gang_status
from airflow_gang.reports.timeline import FAILED, SUCCEEDED, finished_at, job_timeline

JsonDict = dict[str, Any]
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
IMAGE = "ghcr.io/acme/train:1"


def at(seconds: int) -> str:
    moment = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def vcjob(
    phase: str | None = None,
    *,
    workers: int = 3,
    min_available: int | None = None,
    retry_count: int = 0,
    message: str | None = None,
    conditions: Sequence[tuple[str, int]] = (),
    task_status: JsonDict | None = None,
) -> JsonDict:
    spec = VolcanoJobSpec(
        image=IMAGE,
        workers=workers,
        min_available=min_available,
        resources={"nvidia.com/gpu": 1, "cpu": "2", "memory": "8Gi"},
        queue="research",
    )
    job = spec.build_vcjob("train", "ml")
    job["metadata"].update({"uid": UID, "creationTimestamp": at(0)})
    status: JsonDict = {}
    if phase is not None:
        status["state"] = {"phase": phase, **({"message": message} if message else {})}
    if retry_count:
        status["retryCount"] = retry_count
    if conditions:
        status["conditions"] = [{"status": name, "lastTransitionTime": at(s)} for name, s in conditions]
    if task_status is not None:
        status["taskStatusCount"] = task_status
    if status:
        job["status"] = status
    return job


def pod(
    task: str,
    index: int,
    *,
    job: str = "train",
    bound_at: int | None = 10,
    phase: str = "Running",
    rank: int | None = None,
) -> JsonDict:
    containers: list[JsonDict] = [{"name": "pytorch", "image": IMAGE}]
    if rank is not None:
        containers[0]["env"] = [{"name": "MASTER_ADDR", "value": "x"}, {"name": "RANK", "value": str(rank)}]
    conditions = []
    if bound_at is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(bound_at)})
    return {
        "metadata": {
            "name": f"{job}-{task}-{index}",
            "labels": {
                "volcano.sh/job-name": job,
                "volcano.sh/task-spec": task,
                "volcano.sh/task-index": str(index),
            },
        },
        "spec": {"containers": containers, **({"nodeName": "gpu-1"} if bound_at is not None else {})},
        "status": {"phase": phase, "conditions": conditions},
    }


def gang_pods(workers: int = 3, **kwargs: Any) -> list[JsonDict]:
    return [pod("master", 0, **kwargs)] + [pod("worker", i, **kwargs) for i in range(workers)]


def podgroup(phase: str, min_member: int = 4, owner: JsonDict | None = None) -> JsonDict:
    metadata: JsonDict = {"name": f"train-{UID}", "namespace": "ml"}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    return {
        "metadata": metadata,
        "spec": {"minMember": min_member, "queue": "research"},
        "status": {"phase": phase},
    }


VCJOB_OWNER = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": UID}
BATCH_JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}}


# --- names, owners and kinds --------------------------------------------------------------------


def test_the_podgroup_is_named_after_the_job_and_its_uid() -> None:
    assert VCJOB.podgroup_name("train", UID) == f"train-{UID}"
    assert VCJOB.podgroup_name("train") == "train"
    assert VCJOB.podgroup_name("train", None) == "train"
    assert PYTORCHJOB.podgroup_name("train", UID) == "train"  # the other kinds do not


def test_the_job_of_a_podgroup_is_its_volcano_job_owner_else_its_name_without_the_uid() -> None:
    assert VCJOB.job_of_podgroup(podgroup("Running", owner={**VCJOB_OWNER, "name": "owner"})) == "owner"
    assert VCJOB.job_of_podgroup(podgroup("Running")) == "train"
    legacy = {"metadata": {"name": "train"}}  # before Volcano v1.8: the job's name alone
    assert VCJOB.job_of_podgroup(legacy) == "train"
    # A batch/v1 Job is not a Volcano Job, though its kind is also 'Job'.
    batch_owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "cron-123"}
    assert VCJOB.job_of_podgroup(podgroup("Running", owner=batch_owner)) == "train"
    assert VCJOB.job_of_podgroup({"metadata": {}}) is None


def test_a_volcano_job_is_told_from_batch_v1s_job_by_its_group() -> None:
    assert VCJOB.describes(vcjob("Running"))
    assert VCJOB.describes(VCJOB_OWNER)
    assert not VCJOB.describes(BATCH_JOB)
    assert not VCJOB.describes({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Queue"})
    assert not PYTORCHJOB.describes(vcjob("Running"))
    assert VCJOB.wire_kind == "Job"
    assert VCJOB.kind == "VolcanoJob"
    assert VCJOB.api_version == "batch.volcano.sh/v1alpha1"


def test_the_kind_of_an_object_or_a_record() -> None:
    assert job_kind_of_object(vcjob("Running")) is VCJOB
    assert job_kind_of_object(VCJOB_OWNER) is VCJOB
    assert job_kind_of_object({"kind": "VolcanoJob", "name": "train"}) is VCJOB  # a record
    assert job_kind_of_object(BATCH_JOB) is not VCJOB
    assert job_kind_describing(BATCH_JOB) is None
    assert job_kind_named("VolcanoJob") is VCJOB
    assert VCJOB.pod_selector("train") == "volcano.sh/job-name=train"


# --- state ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "retries", "expected"),
    [
        (None, 0, (None, "")),
        ("Pending", 0, (None, "")),
        ("Pending", 1, ("Restarting", "restarted by its policy (1 of maxRetry 3)")),
        ("Running", 0, ("Running", "")),
        ("Completing", 0, ("Running", "")),
        ("Restarting", 2, ("Restarting", "restarted by its policy (2 of maxRetry 3)")),
        ("Completed", 0, ("Succeeded", "")),
        ("Failed", 0, ("Failed", "the Volcano Job is failed")),
        ("Failed", 3, ("Failed", "the Volcano Job is failed after 3 restart(s) (maxRetry 3)")),
        ("Terminating", 0, ("Failed", "the Volcano Job is terminating")),
        ("Terminated", 0, ("Failed", "the Volcano Job is terminated")),
        ("Aborting", 0, ("Failed", "the Volcano Job is aborting")),
        ("Aborted", 0, ("Failed", "the Volcano Job is aborted")),
    ],
)
def test_every_phase_reads_as_the_lifecycles_state(
    phase: str | None, retries: int, expected: tuple[str | None, str]
) -> None:
    assert VCJOB.state(vcjob(phase, retry_count=retries)) == expected


def test_the_jobs_own_message_wins() -> None:
    assert VCJOB.state(vcjob("Aborted", message="aborted by policy")) == ("Failed", "aborted by policy")
    assert VCJOB.state(vcjob("Restarting", retry_count=1, message="pod failed")) == (
        "Restarting",
        "pod failed",
    )
    reason_only = vcjob("Failed")
    reason_only["status"]["state"]["reason"] = "PodFailed"
    assert VCJOB.state(reason_only) == ("Failed", "PodFailed")


def test_state_time_reads_the_newest_condition_of_the_phase() -> None:
    restarted = vcjob(
        "Running",
        conditions=(("Pending", 1), ("Running", 20), ("Restarting", 60), ("Pending", 61), ("Running", 90)),
    )
    assert VCJOB.state_time(restarted, "Running") == at(90)  # the last run's
    assert VCJOB.state_time(restarted, "Restarting") == at(60)
    assert VCJOB.state_time(restarted, "Succeeded") is None
    assert VCJOB.state_time(restarted, "Failed") is None
    completed = vcjob("Completed", conditions=[("Running", 20), ("Completing", 299), ("Completed", 300)])
    assert VCJOB.state_time(completed, "Succeeded") == at(300)
    assert VCJOB.state_time(completed, "Failed") is None
    aborted = vcjob("Aborted", conditions=[("Running", 20), ("Aborting", 100), ("Aborted", 105)])
    assert VCJOB.state_time(aborted, "Failed") == at(105)
    assert VCJOB.state_time(aborted, "Succeeded") is None
    assert VCJOB.state_time(vcjob("Running"), "Running") is None


# --- pods, tasks, replicas ------------------------------------------------------------------------


def test_the_leader_is_the_pod_whose_rank_is_zero() -> None:
    # The pytorch plugin's RANK=0 wins, whatever its task is called.
    ranked = [pod("head", 0, rank=1), pod("worker", 0, rank=2), pod("chief", 3, rank=0)]
    assert VCJOB.leader_pod("train", ranked) == "train-chief-3"
    # Without RANK: the master task's first pod.
    assert (
        VCJOB.leader_pod("train", [pod("worker", 0), pod("master", 1), pod("master", 0)]) == "train-master-0"
    )
    # Without a master task: a task's first pod.
    assert VCJOB.leader_pod("train", [pod("b", 1), pod("b", 0), pod("a", 1)]) == "train-b-0"
    assert VCJOB.leader_pod("train", []) is None
    # Another job's pods are not ours, even its rank 0.
    theirs = [pod("master", 0, job="other", rank=0)]
    assert VCJOB.leader_pod("train", theirs) is None
    assert VCJOB.leader_pod("train", [*theirs, pod("worker", 1)]) == "train-worker-1"


def test_tasks_are_the_replicas_and_the_task_status_count_their_rows() -> None:
    job = vcjob(
        "Running",
        task_status={
            "master": {"phase": {"Running": 1}},
            "worker": {"phase": {"Pending": 1, "Running": 1, "Succeeded": 2, "Failed": 1}},
        },
        workers=5,
    )
    assert list(VCJOB.replica_specs(job)) == ["master", "worker"]
    assert VCJOB.replica_specs(job)["worker"]["replicas"] == 5
    assert VCJOB.replica_counts(job) == {"master": 1, "worker": 5}
    assert VCJOB.total_replicas(job) == 6
    assert VCJOB.replica_rows(job) == [
        {"type": "master", "desired": 1, "active": 1, "succeeded": 0, "failed": 0},
        {"type": "worker", "desired": 5, "active": 2, "succeeded": 2, "failed": 1},
    ]
    assert VCJOB.replica_rows(vcjob("Pending"))[1] == {
        "type": "worker",
        "desired": 3,
        "active": 0,
        "succeeded": 0,
        "failed": 0,
    }


def test_a_replica_is_a_task_and_an_index() -> None:
    assert VCJOB.replica_of(pod("master", 0)) == "master 0"
    assert VCJOB.replica_of(pod("worker", 2)) == "worker 2"
    assert VCJOB.replica_phrase("master 0") == "task master, index 0"
    assert VCJOB.replica_phrase(VCJOB.replica_of(pod("data-loader", 11))) == "task data-loader, index 11"


def test_the_gang_mode_a_job_shows_and_what_its_gang_asks_for() -> None:
    assert VCJOB.observed_gang_mode(vcjob(), None) == "volcano"
    assert VCJOB.observed_gang_mode(vcjob(min_available=4), podgroup("Running")) == "volcano"
    assert VCJOB.observed_gang_mode(vcjob(min_available=2), podgroup("Running", 2)) == "disabled"
    unset = vcjob()
    del unset["spec"]["minAvailable"]  # Volcano's webhook default: every replica
    assert VCJOB.observed_gang_mode(unset, None) == "volcano"
    assert VCJOB.gang_requests(vcjob(workers=3)) == {
        "nvidia.com/gpu": Decimal(4),
        "cpu": Decimal(8),
        "memory": Decimal(4 * 8 * 2**30),
    }
    mixed = VolcanoJobSpec(
        image=IMAGE,
        tasks=[
            {"name": "ps", "replicas": 2, "resources": {"cpu": "1"}},
            {"name": "trainer", "replicas": 3, "resources": {"cpu": "500m", "nvidia.com/gpu": 2}},
        ],
    ).build_vcjob("mixed", "ml")
    assert VCJOB.gang_requests(mixed) == {"cpu": Decimal("3.5"), "nvidia.com/gpu": Decimal(6)}
    assert VCJOB.queue(mixed) == "default"
    assert VCJOB.has_podgroup(mixed)
    assert not VCJOB.suspended(mixed)


# --- where the gang stands -------------------------------------------------------------------------


def status_of(job: JsonDict | None, pg: JsonDict | None, pods: list[JsonDict], mode: str = "volcano") -> Any:
    return gang_status(job, pg, pods, mode, job_kind=VCJOB)


def test_a_queued_job_waits_with_a_pending_podgroup() -> None:
    seen = status_of(vcjob("Pending"), podgroup("Pending"), [])
    assert seen.phase is GangPhase.QUEUED
    assert (seen.min_member, seen.replicas, seen.bound, seen.queue) == (4, 4, 0, "research")
    assert seen.job_condition is None
    before_podgroup = status_of(vcjob(), None, [])
    assert before_podgroup.phase is GangPhase.QUEUED
    assert before_podgroup.message == "waiting for the PodGroup to be created"


def test_an_inqueue_podgroup_with_every_pod_bound_is_admitted() -> None:
    pods = gang_pods(phase="Pending")
    seen = status_of(vcjob("Pending"), podgroup("Inqueue"), pods)
    assert seen.phase is GangPhase.ADMITTED
    assert seen.bound == 4
    partly = status_of(vcjob("Pending"), podgroup("Inqueue"), pods[:3])
    assert partly.phase is GangPhase.QUEUED


def test_a_running_job_runs() -> None:
    seen = status_of(vcjob("Running"), podgroup("Running"), gang_pods())
    assert seen.phase is GangPhase.RUNNING
    assert seen.job_condition == "Running"
    assert seen.running == 4
    assert not seen.finished


def test_a_restarting_job_is_running_not_failed_nor_queued() -> None:
    # Volcano's RestartJob deleted every pod: the job says Restarting, then Pending with retryCount.
    for job in (vcjob("Restarting", retry_count=1), vcjob("Pending", retry_count=1)):
        seen = status_of(job, podgroup("Inqueue"), [])
        assert seen.phase is GangPhase.RUNNING
        assert seen.job_condition == "Restarting"
        assert seen.message == "restarted by its policy (1 of maxRetry 3)"
        assert seen.admitted
        assert not seen.finished


def test_a_finished_job_succeeded_or_failed() -> None:
    done = status_of(vcjob("Completed"), podgroup("Completed"), gang_pods(phase="Succeeded"))
    assert done.phase is GangPhase.SUCCEEDED
    assert done.finished
    failed = status_of(vcjob("Failed", retry_count=3), podgroup("Running"), [])
    assert failed.phase is GangPhase.FAILED
    assert failed.message == "the Volcano Job is failed after 3 restart(s) (maxRetry 3)"
    aborted = status_of(vcjob("Aborted"), None, [])
    assert aborted.phase is GangPhase.FAILED
    assert status_of(None, None, []).phase is GangPhase.LOST


def test_no_gang_is_admitted_only_with_every_pod_bound_though_its_podgroup_runs() -> None:
    """min_available 1 of 4: Volcano's PodGroup (minMember 1) runs as soon as one pod is placed,
    and the job says Running; that is not the gang placed."""
    job = vcjob("Running", min_available=1)
    pg = podgroup("Running", min_member=1)
    one = [pod("master", 0)] + [pod("worker", i, bound_at=None, phase="Pending") for i in range(3)]
    seen = status_of(job, pg, one, "disabled")
    assert seen.phase is GangPhase.QUEUED
    assert seen.min_member == 1
    assert seen.queue is None
    three = [pod("master", 0), pod("worker", 0), pod("worker", 1), pod("worker", 2, bound_at=None)]
    assert status_of(job, pg, three, "disabled").phase is GangPhase.QUEUED
    assert status_of(job, pg, gang_pods(), "disabled").phase is GangPhase.RUNNING
    assert status_of(vcjob("Pending", min_available=1), pg, gang_pods(phase="Pending"), "disabled").phase is (
        GangPhase.ADMITTED
    )


# --- timeline -----------------------------------------------------------------------------------------


def test_the_timeline_of_a_completed_volcano_job_reads_its_conditions() -> None:
    job = vcjob(
        "Completed",
        conditions=[("Pending", 1), ("Running", 20), ("Completing", 299), ("Completed", 300)],
    )
    pods = [pod("master", 0, bound_at=11, phase="Succeeded")] + [
        pod("worker", i, bound_at=12 + i, phase="Succeeded") for i in range(3)
    ]
    timeline = job_timeline(job, pods, job_kind=VCJOB)
    assert timeline.state == SUCCEEDED
    assert timeline.queue == "research"
    assert timeline.queued_at == dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)
    assert timeline.admitted_at == dt.datetime(2026, 3, 1, 8, 0, 14, tzinfo=dt.UTC)  # the 4th pod bound
    assert timeline.running_at == dt.datetime(2026, 3, 1, 8, 0, 20, tzinfo=dt.UTC)
    assert timeline.finished_at == dt.datetime(2026, 3, 1, 8, 5, tzinfo=dt.UTC)
    assert timeline.queue_wait == 14.0
    assert finished_at(job) == dt.datetime(2026, 3, 1, 8, 5, tzinfo=dt.UTC)
    assert finished_at(job) == timeline.finished_at


def test_the_timeline_of_a_failed_volcano_job_after_a_restart() -> None:
    job = vcjob(
        "Failed",
        retry_count=1,
        conditions=[
            ("Pending", 1),
            ("Running", 20),
            ("Restarting", 60),
            ("Pending", 61),
            ("Running", 90),
            ("Failed", 200),
        ],
    )
    timeline = job_timeline(job, gang_pods(bound_at=80, phase="Failed"), job_kind=VCJOB)
    assert timeline.state == FAILED
    assert timeline.running_at == dt.datetime(2026, 3, 1, 8, 1, 30, tzinfo=dt.UTC)  # the last run
    assert timeline.finished_at == dt.datetime(2026, 3, 1, 8, 3, 20, tzinfo=dt.UTC)
    assert finished_at(job) == timeline.finished_at
    running = vcjob("Running", conditions=[("Pending", 1), ("Running", 20)])
    assert finished_at(running) is None
    assert job_timeline(running, gang_pods(), job_kind=VCJOB).state == "running"
