"""The training-operator's pure decisions: conditions, env, PodGroup sizing, one job's round."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gang_sim.controllers.creation_batch import interleave
from gang_sim.controllers.training_operator.pytorchjob_plan import PlanInputs, plan_job
from gang_sim.controllers.training_operator.pytorchjob_resources import (
    min_resources,
    pytorch_env,
    replica_specs,
)
from gang_sim.controllers.training_operator.pytorchjob_status import ConditionType, Reason, set_condition

JsonDict = dict[str, Any]
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(seconds=30)


def job(
    workers: int = 1, policy: str = "OnFailure", *, master: bool = True, run_policy: JsonDict | None = None
) -> JsonDict:
    def replica(count: int, gpus: int) -> JsonDict:
        container = {
            "name": "pytorch",
            "image": "x",
            "resources": {"requests": {"nvidia.com/gpu": str(gpus)}},
        }
        return {"replicas": count, "restartPolicy": policy, "template": {"spec": {"containers": [container]}}}

    specs = {"Worker": replica(workers, 1)}
    if master:
        specs = {"Master": replica(1, 1), **specs}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "ml", "uid": "u1"},
        "spec": {"pytorchReplicaSpecs": specs, "runPolicy": run_policy or {}},
    }


def pod(name: str, phase: str, exit_code: int | None = None, restarts: int = 0) -> JsonDict:
    rtype, index = name.split("-")[1:]
    state = {"terminated": {"exitCode": exit_code}} if exit_code is not None else {"running": {}}
    return {
        "metadata": {
            "name": name,
            "labels": {
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": index,
            },
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "pytorch", "restartCount": restarts, "state": state}],
        },
    }


def types(status: JsonDict) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in status.get("conditions", [])]


# --- setCondition -----------------------------------------------------------------------------


def test_running_and_restarting_replace_each_other_and_success_turns_running_false() -> None:
    status: JsonDict = {}
    set_condition(status, ConditionType.CREATED, True, Reason.CREATED, "c", now=NOW)
    set_condition(status, ConditionType.RUNNING, True, Reason.RUNNING, "r", now=NOW)
    set_condition(status, ConditionType.RESTARTING, True, Reason.RESTARTING, "x", now=NOW)
    assert types(status) == [("Created", "True"), ("Restarting", "True")]
    set_condition(status, ConditionType.RUNNING, True, Reason.RUNNING, "r", now=NOW)
    set_condition(status, ConditionType.SUCCEEDED, True, Reason.SUCCEEDED, "s", now=LATER)
    assert types(status) == [("Created", "True"), ("Running", "False"), ("Succeeded", "True")]


def test_a_failed_job_is_frozen() -> None:
    status: JsonDict = {}
    set_condition(status, ConditionType.FAILED, True, Reason.FAILED, "f", now=NOW)
    set_condition(status, ConditionType.RUNNING, True, Reason.RUNNING, "r", now=LATER)
    assert types(status) == [("Failed", "True")]


def test_same_status_and_reason_keep_the_first_message_and_a_reason_change_keeps_transition_time() -> None:
    status: JsonDict = {}
    set_condition(status, ConditionType.RESTARTING, True, Reason.RESTARTING, "first", now=NOW)
    set_condition(status, ConditionType.RESTARTING, True, Reason.RESTARTING, "second", now=LATER)
    assert status["conditions"][0]["message"] == "first"
    set_condition(status, ConditionType.RESTARTING, True, Reason.FAILED, "third", now=LATER)
    only = status["conditions"][0]
    assert (only["lastTransitionTime"], only["lastUpdateTime"]) == (
        "2026-01-01T12:00:00Z",
        "2026-01-01T12:00:30Z",
    )


# --- builders ---------------------------------------------------------------------------------


@given(st.lists(st.lists(st.integers(), max_size=5), max_size=5))
def test_interleave_keeps_every_item_and_each_queue_order(queues: list[list[int]]) -> None:
    tagged = [[(q, item) for item in queue] for q, queue in enumerate(queues)]
    merged = interleave(tagged)
    assert sorted(merged) == sorted(x for queue in tagged for x in queue)
    for q, queue in enumerate(tagged):
        assert [x for x in merged if x[0] == q] == queue
    # Round-robin: nobody's (n+1)-th item comes before everybody's n-th.
    rows = [next(i for i, row_item in enumerate(tagged[x[0]]) if row_item is x) for x in merged]
    assert rows == sorted(rows)


def test_without_a_master_only_the_torchrun_variables_are_set() -> None:
    env = {e["name"]: e["value"] for e in pytorch_env(job(workers=3, master=False), "Worker", 2)}
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NODE_RANK": "2",
        "PET_NNODES": "3",
    }


def test_min_resources_take_the_first_min_member_pods_by_priority_and_fall_back_to_limits() -> None:
    specs = replica_specs(job(workers=3))
    specs["Worker"]["template"]["spec"]["priorityClassName"] = "high"
    specs["Worker"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    assert min_resources(specs, 2, {"high": 1000}) == {"nvidia.com/gpu": "4"}  # two workers, not the master
    assert min_resources(specs, 4, {}) == {"nvidia.com/gpu": "7"}


# --- one round --------------------------------------------------------------------------------


def test_a_new_job_gets_all_its_pods_and_services_and_the_created_condition() -> None:
    plan = plan_job(job(workers=2), [], [], None, PlanInputs(NOW))
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert [s["metadata"]["name"] for s in plan.create_services] == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert plan.status is not None
    assert types(plan.status) == [("Created", "True")]
    assert plan.status["startTime"] == "2026-01-01T12:00:00Z"


@pytest.mark.parametrize("phase", [None, "Pending"], ids=["no-phase", "pending"])
def test_with_the_gang_flag_no_pod_exists_before_volcano_admits_the_group(phase: str | None) -> None:
    gang = PlanInputs(NOW, gang_scheduler="volcano")
    first = plan_job(job(), [], [], None, gang)
    assert first.create_podgroup is not None
    assert first.create_podgroup["spec"] == {
        "minMember": 2,
        "queue": "default",
        "minResources": {"nvidia.com/gpu": "2"},
    }
    assert first.status is not None
    assert first.status["lastReconcileTime"] == "2026-01-01T12:00:00Z"  # a delayed round says when
    group = {**first.create_podgroup, "status": {"phase": phase} if phase else {}}
    later = plan_job(job(), [], [], group, gang)
    assert (later.create_pods, later.create_podgroup) == ([], None)
    assert later.update_podgroup == group  # the same spec, written again: SyncPodGroup always updates
    assert later.status is not None
    assert "startTime" not in later.status
    assert later.status["lastReconcileTime"] == "2026-01-01T12:00:00Z"
    admitted = plan_job(job(), [], [], {**group, "status": {"phase": "Inqueue"}}, gang)
    assert len(admitted.create_pods) == 2
    # Should that write fail, the round turns into a delayed one: this status, and no pods.
    assert admitted.delayed_status is not None
    assert types(admitted.delayed_status) == [("Created", "True")]
    assert admitted.delayed_status["lastReconcileTime"] == "2026-01-01T12:00:00Z"


def test_a_drifted_podgroup_gets_the_computed_spec_whole_but_keeps_its_queue() -> None:
    group = {
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {
            "minMember": 9,
            "queue": "team-a",
            "minResources": {"nvidia.com/gpu": "2"},
            "minTaskMember": {"worker": 1},
        },
        "status": {"phase": "Inqueue"},
    }
    plan = plan_job(job(), [], [], group, PlanInputs(NOW, gang_scheduler="volcano"))
    assert plan.update_podgroup is not None
    # The real fill function assigns a new PodGroupSpec: what it does not compute is dropped.
    assert plan.update_podgroup["spec"] == {
        "minMember": 2,
        "queue": "team-a",
        "minResources": {"nvidia.com/gpu": "2"},
    }
    assert plan.update_podgroup["status"] == {"phase": "Inqueue"}


@pytest.mark.parametrize(
    ("code", "restarted", "failed"),
    [(1, [], True), (127, [], True), (128, ["j-worker-0"], False), (255, ["j-worker-0"], False)],
)
def test_exit_code_policy_retries_only_codes_from_128(code: int, restarted: list[str], failed: bool) -> None:
    pods = [pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit_code=code)]
    plan = plan_job(job(policy="ExitCode"), pods, [], None, PlanInputs(NOW))
    assert plan.restart_pods == restarted
    assert plan.status is not None
    assert (("Failed", "True") in types(plan.status)) is failed


def test_a_zero_backoff_limit_fails_on_the_first_failure_and_deletes_the_pods() -> None:
    pods = [pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit_code=1)]
    plan = plan_job(job(run_policy={"backoffLimit": 0}), pods, [], None, PlanInputs(NOW))
    assert plan.status is not None
    assert plan.status["conditions"][-1]["message"] == (
        "Job j has failed because it has reached the specified backoff limit"
    )
    assert sorted(plan.delete_pods) == ["j-master-0", "j-worker-0"]
    assert plan.restart_pods == []


def test_restarts_already_made_count_toward_the_backoff_limit() -> None:
    pods = [pod("j-master-0", "Running", restarts=1), pod("j-worker-0", "Running")]
    spec = job(run_policy={"backoffLimit": 3})
    assert plan_job(spec, pods, [], None, PlanInputs(NOW, restarts=1)).delete_pods == []
    assert sorted(plan_job(spec, pods, [], None, PlanInputs(NOW, restarts=2)).delete_pods) == [
        "j-master-0",
        "j-worker-0",
    ]


def test_a_running_deadline_asks_to_be_woken_and_fires_once_passed() -> None:
    spec = job(run_policy={"activeDeadlineSeconds": 10})
    spec["status"] = {"startTime": "2026-01-01T12:00:00Z"}
    pods = [pod("j-master-0", "Running"), pod("j-worker-0", "Running")]
    assert plan_job(spec, pods, [], None, PlanInputs(NOW)).wake_at == NOW + dt.timedelta(seconds=10)
    late = plan_job(spec, pods, [], None, PlanInputs(LATER))
    assert late.status is not None
    assert late.status["conditions"][-1]["reason"] == "PyTorchJobFailed"


def test_a_finished_job_is_deleted_once_its_ttl_passed() -> None:
    spec = job(run_policy={"ttlSecondsAfterFinished": 20})
    spec["status"] = {
        "completionTime": "2026-01-01T12:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}],
    }
    early = plan_job(spec, [], [], None, PlanInputs(NOW))
    assert (early.delete_job, early.wake_at) == (False, NOW + dt.timedelta(seconds=20))
    assert plan_job(spec, [], [], None, PlanInputs(LATER)).delete_job


def test_two_pods_in_one_slot_are_left_alone() -> None:
    twins = [
        pod("j-worker-0", "Running"),
        {
            **pod("j-worker-0", "Running"),
            "metadata": {
                "name": "stray",
                "labels": {
                    "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": "0",
                },
            },
        },
    ]
    plan = plan_job(job(), [pod("j-master-0", "Pending"), *twins], [], None, PlanInputs(NOW))
    assert [p["metadata"]["name"] for p in plan.create_pods] == []
    assert plan.delete_pods == []
