"""What the lifecycle decides about a TrainJob from the objects the cluster shows: its state from
metav1 conditions, its replicas, its rank-0 pod, where its gang stands, the failing node a wait
notes before the Job deletes its pods, and the gang mode its runtime implies."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.job_kinds import PYTORCHJOB, QUEUE_ANNOTATION, TRAINJOB, job_kind_named
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.result import job_result
from airflow_gang.model.gang_state import (
    TRAINER_NOT_GANG_SCHEDULED,
    GangPhase,
    GangSnapshot,
    gang_status,
    podgroup_queue,
    queue_mismatch,
)
from airflow_gang.operators.train_job import runtime_gang_mode
from airflow_gang.trainjob_spec import PATCH_MANAGER, runtime_queue

JsonDict = dict[str, Any]


def queue_patch(manager: str, queue: str) -> JsonDict:
    """A runtime patch naming the queue where Trainer v2.3 reads it (the JobSet template's
    annotations)."""
    annotations = {QUEUE_ANNOTATION: queue}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"annotations": annotations}}},
    }


def trainjob(*conditions: tuple[str, str], nodes: int = 4, queue: str | None = "research") -> JsonDict:
    patches = [queue_patch(PATCH_MANAGER, queue)] if queue else []
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ml",
            "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": nodes},
            "runtimePatches": patches,
        },
        "status": {
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "message": f"{kind} message",
                    "lastTransitionTime": "2026-01-01T00:01:00Z",
                }
                for kind, status in conditions
            ]
        },
    }


def pod(
    rank: int, *, bound: bool = True, phase: str = "Running", created: str = "2026-01-01T00:00:10Z"
) -> JsonDict:
    return {
        "metadata": {
            "name": f"tj-node-0-{rank}-abcde",
            "creationTimestamp": created,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "tj",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "batch.kubernetes.io/job-completion-index": str(rank),
            },
        },
        "spec": {"nodeName": "n1"} if bound else {},
        "status": {"phase": phase},
    }


def podgroup(phase: str, min_member: int = 4) -> JsonDict:
    return {
        "metadata": {"name": "tj"},
        "spec": {"minMember": min_member, "queue": "research"},
        "status": {"phase": phase},
    }


def test_a_trainjobs_conditions_read_in_the_training_operators_words() -> None:
    assert TRAINJOB.state(trainjob()) == (None, "")
    assert TRAINJOB.state(trainjob(("Complete", "True"))) == ("Succeeded", "Complete message")
    assert TRAINJOB.state(trainjob(("Failed", "True"))) == ("Failed", "Failed message")
    assert TRAINJOB.state(trainjob(("Suspended", "True"), ("Complete", "False"))) == (
        "Suspended",
        "Suspended message",
    )


def test_replicas_queue_and_kind_lookup() -> None:
    job = trainjob(nodes=3)
    assert TRAINJOB.replica_counts(job) == {"Node": 3}
    assert TRAINJOB.queue(job) == "research"
    assert TRAINJOB.pod_selector("tj") == "jobset.sigs.k8s.io/jobset-name=tj"
    assert job_kind_named("TrainJob") is TRAINJOB
    assert job_kind_named(None) is PYTORCHJOB
    with pytest.raises(ValueError, match="use one of PyTorchJob, TrainJob"):
        job_kind_named("MPIJob")


def test_the_queue_is_read_from_the_runtime_patches_as_trainer_reads_it_the_last_one_winning() -> None:
    """kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go 145-161: each patch's template
    annotations over the runtime's, in list order."""
    job = trainjob(queue="research")
    job["spec"]["runtimePatches"].append({"manager": "team.example.com/affinity"})  # names none
    assert TRAINJOB.queue(job) == "research"
    job["spec"]["runtimePatches"].append(queue_patch("team.example.com/queues", "batch"))
    assert TRAINJOB.queue(job) == "batch"
    # Trainer never reads the TrainJob's own annotation: a patch's queue wins over it.
    job["metadata"]["annotations"] = {QUEUE_ANNOTATION: "legacy"}
    assert TRAINJOB.queue(job) == "batch"


def test_a_trainjob_of_an_earlier_provider_version_still_names_the_queue_its_task_asked_for() -> None:
    job = trainjob(queue=None)
    assert TRAINJOB.queue(job) is None
    job["metadata"]["annotations"] = {QUEUE_ANNOTATION: "research"}
    assert TRAINJOB.queue(job) == "research"


def test_a_runtime_names_its_queue_on_its_jobset_template_not_on_itself() -> None:
    runtime: JsonDict = {"metadata": {"name": "rt", "annotations": {QUEUE_ANNOTATION: "ignored"}}, "spec": {}}
    assert runtime_queue(runtime) is None
    runtime["spec"]["template"] = {"metadata": {"annotations": {QUEUE_ANNOTATION: "research"}}}
    assert runtime_queue(runtime) == "research"


def test_a_podgroup_in_another_queue_than_asked_is_a_mismatch_until_the_job_finished() -> None:
    def seen(job: JsonDict, group: JsonDict | None) -> GangSnapshot:
        return GangSnapshot.of(job, group, [], "trainer", TRAINJOB)

    in_default = podgroup("Pending")
    in_default["spec"]["queue"] = "default"
    assert queue_mismatch("research", seen(trainjob(), in_default)) == "default"
    assert queue_mismatch("research", seen(trainjob(), podgroup("Pending"))) is None
    assert queue_mismatch(None, seen(trainjob(), in_default)) is None  # nothing asked: no check
    assert queue_mismatch("research", seen(trainjob(), None)) is None  # no PodGroup yet
    finished = trainjob(("Complete", "True"))
    assert queue_mismatch("research", seen(finished, in_default)) is None  # its result stands
    # A PodGroup without spec.queue is in the CRD's default queue.
    del in_default["spec"]["queue"]
    assert podgroup_queue(in_default) == "default"
    assert queue_mismatch("research", seen(trainjob(), in_default)) == "default"


def test_rank_0_is_found_among_the_pods_the_newest_when_its_job_replaced_one() -> None:
    old, new = pod(0, created="2026-01-01T00:00:10Z"), pod(0, created="2026-01-01T00:05:00Z")
    new["metadata"]["name"] = "tj-node-0-0-zzzzz"
    assert TRAINJOB.leader_pod("tj", [pod(1), old, new]) == "tj-node-0-0-zzzzz"
    assert TRAINJOB.leader_pod("tj", [pod(1)]) is None
    assert PYTORCHJOB.leader_pod("train") == "train-master-0"


def test_a_trainjob_queues_then_is_admitted_then_runs_then_succeeds() -> None:
    waiting = gang_status(trainjob(), None, [], "trainer", TRAINJOB)
    assert waiting.phase is GangPhase.QUEUED
    assert waiting.message == "waiting for the PodGroup to be created"
    pending = [pod(rank, bound=False, phase="Pending") for rank in range(4)]
    assert (
        gang_status(trainjob(), podgroup("Pending"), pending, "trainer", TRAINJOB).phase is GangPhase.QUEUED
    )
    bound = [pod(rank, phase="Pending") for rank in range(4)]
    admitted = gang_status(trainjob(), podgroup("Inqueue"), bound, "trainer", TRAINJOB)
    assert admitted.phase is GangPhase.ADMITTED
    assert (admitted.replicas, admitted.queue) == (4, "research")
    running = [pod(rank) for rank in range(4)]
    assert (
        gang_status(trainjob(), podgroup("Running"), running, "trainer", TRAINJOB).phase is GangPhase.RUNNING
    )
    done = gang_status(trainjob(("Complete", "True")), None, running, "trainer", TRAINJOB)
    assert done.phase is GangPhase.SUCCEEDED


def test_pods_without_a_podgroup_under_a_gang_runtime_are_flagged_as_no_gang() -> None:
    three_of_four = [pod(rank) for rank in range(3)] + [pod(3, bound=False, phase="Pending")]
    status = gang_status(trainjob(), None, three_of_four, "trainer", TRAINJOB)
    assert status.phase is GangPhase.QUEUED
    assert status.warning == TRAINER_NOT_GANG_SCHEDULED


def test_without_a_gang_a_trainjob_is_admitted_only_once_every_node_is_bound() -> None:
    three_of_four = [pod(rank) for rank in range(3)] + [pod(3, bound=False, phase="Pending")]
    assert (
        gang_status(trainjob(queue=None), None, three_of_four, "disabled", TRAINJOB).phase is GangPhase.QUEUED
    )
    all_four = [pod(rank) for rank in range(4)]
    assert gang_status(trainjob(queue=None), None, all_four, "disabled", TRAINJOB).admitted


def test_the_result_of_a_trainjob_names_its_nodes_queue_podgroup_and_end() -> None:
    result = job_result(
        trainjob(("Complete", "True")), "succeeded", "2026-01-01T00:00:30Z", None, job_kind=TRAINJOB
    )
    assert result["replicas"] == {"Node": 4}
    assert (result["queue"], result["podgroup"]) == ("research", "tj")
    assert result["finished_at"] == "2026-01-01T00:01:00+00:00"
    assert (result["queued_seconds"], result["run_seconds"]) == (30.0, 30.0)


def failed_pod(rank: int, exit_code: int) -> JsonDict:
    restarted = pod(rank)
    restarted["status"]["containerStatuses"] = [
        {
            "name": "node",
            "state": {"running": {}},
            "lastState": {
                "terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-01-01T00:02:00Z"}
            },
        }
    ]
    return restarted


def test_a_wait_notes_a_failing_node_once_and_carries_it_across_a_deferral() -> None:
    memory = FailureMemory(TRAINJOB)
    assert memory.noticed([pod(0), pod(1)]) is None
    first = memory.noticed([pod(0), failed_pod(1, 3)])
    assert first is not None
    assert (first.replica, first.exit_code) == ("Node 1", 3)
    assert memory.noticed([pod(0), failed_pod(1, 3)]) is not None  # its log not read yet: again
    memory.tail = "(log unavailable: 503)"
    assert memory.noticed([pod(0), failed_pod(1, 3)]) is not None  # could not be read: again
    memory.tail = "CUDA error"
    assert memory.noticed([pod(0), failed_pod(1, 3)]) is None  # read: no second log read
    carried = FailureMemory.from_json(TRAINJOB, memory.to_json())
    assert carried.failure == memory.failure
    assert carried.tail == "CUDA error"
    assert FailureMemory.from_json(TRAINJOB, None).failure is None


def test_a_pytorchjob_wait_reads_nothing_during_the_wait() -> None:
    assert FailureMemory(PYTORCHJOB).noticed([failed_pod(1, 3)]) is None


def test_the_runtime_decides_the_gang_mode() -> None:
    def runtime(policy: JsonDict | None) -> JsonDict:
        spec = {"podGroupPolicy": policy} if policy is not None else {}
        return {"metadata": {"name": "rt"}, "spec": spec}

    assert runtime_gang_mode(runtime({"volcano": {}})) == "trainer"
    assert runtime_gang_mode(runtime(None)) == "disabled"
    with pytest.raises(GangSpecError, match="coscheduling, not Volcano") as raised:
        runtime_gang_mode(runtime({"coscheduling": {"scheduleTimeoutSeconds": 60}}))
    assert raised.value.field == "runtime"
