"""The pure decisions of the Trainer v2 controllers, on hand-made objects (no cluster)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gang_sim.controllers.batch.job_plan import format_indexes, parse_indexes, plan_job
from gang_sim.controllers.kubelet import rendezvous
from gang_sim.controllers.trainer.jobset_plan import plan_jobset
from gang_sim.controllers.trainer.trainjob_build import build_jobset, build_podgroup
from gang_sim.trainer_runtimes import torch_runtime

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Json = dict[str, Any]


def test_completed_indexes_read_and_print_as_ranges() -> None:
    assert format_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert parse_indexes("0-2,4,6-7") == {0, 1, 2, 4, 6, 7}
    assert parse_indexes("") == set()


def node_env(trainer: Json) -> dict[str, str]:
    job = {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"trainer": trainer}}
    jobset = build_jobset(job, torch_runtime("r", gang=False))
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container["env"]}


@pytest.mark.parametrize(
    ("trainer", "expected"),
    [
        ({}, "auto"),
        ({"numProcPerNode": 3}, "3"),
        ({"resourcesPerNode": {"limits": {"cpu": "4"}}}, "4"),  # a CPU-only node: one per CPU
        ({"resourcesPerNode": {"limits": {"cpu": "4", "nvidia.com/gpu": 2}}}, "auto"),
    ],
)
def test_nproc_per_node_follows_the_trainer(trainer: Json, expected: str) -> None:
    assert node_env(trainer)["PET_NPROC_PER_NODE"] == expected


def test_the_runtime_node_count_applies_when_the_trainjob_names_none() -> None:
    assert node_env({})["PET_NNODES"] == "1"
    assert node_env({"numNodes": 5})["PET_NNODES"] == "5"


def test_the_podgroup_takes_the_runtime_queue_and_priority_and_counts_every_pod() -> None:
    runtime = torch_runtime("r", gang=True)
    runtime["spec"]["template"]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": "batch"}}
    rjob = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 2
    rjob["template"]["spec"]["template"]["spec"]["priorityClassName"] = "high"
    trainer = {"numNodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1, "memory": "2Gi"}}}
    job = {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"trainer": trainer}}
    spec = build_podgroup(job, runtime, build_jobset(job, runtime))["spec"]
    assert spec == {
        "minMember": 6,  # 2 Jobs (replicas) x 3 pods (numNodes)
        "minResources": {"memory": "12Gi", "nvidia.com/gpu": "6"},  # limits stand in for requests
        "queue": "batch",
        "priorityClassName": "high",
    }


def test_runtime_patches_reach_the_jobset_and_its_pod_templates() -> None:
    patch = {
        "manager": "acme.io/scheduler",
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {"team": "vision"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {"annotations": {"sim.airflow-gang.io/exit-code": "2"}},
                                        "spec": {"nodeSelector": {"pool": "a100"}},
                                    }
                                }
                            },
                        }
                    ]
                },
            }
        },
    }
    job = {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"runtimePatches": [patch]}}
    jobset = build_jobset(job, torch_runtime("r", gang=False))
    assert jobset["metadata"]["labels"]["team"] == "vision"
    pod_template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod_template["metadata"]["annotations"]["sim.airflow-gang.io/exit-code"] == "2"
    assert pod_template["spec"]["nodeSelector"] == {"pool": "a100"}


def node_pod(name: str, phase: str, nodes: str | None = "3") -> Json:
    env = [{"name": "PET_NNODES", "value": nodes}] if nodes is not None else []
    return {
        "metadata": {
            "name": name,
            "labels": {rendezvous.JOBSET_NAME_LABEL: "t", rendezvous.REPLICATED_JOB_LABEL: "node"},
        },
        "spec": {"containers": [{"name": "node", "env": env}]},
        "status": {"phase": phase},
    }


def test_a_trainjob_node_waits_for_pet_nnodes_peers() -> None:
    pods = [node_pod("a", "Running"), node_pod("b", "Running"), node_pod("c", "Pending")]
    assert rendezvous.group_of(pods[0]) == "jobset/t/node"
    assert rendezvous.progress(pods[0], None, pods) == (2, 3)
    pods[2]["status"]["phase"] = "Running"
    assert rendezvous.ready(pods[0], None, pods)
    assert rendezvous.progress(node_pod("x", "Running", nodes=None), None, []) == (1, 1)  # not torch


def indexed_job(restart_policy: str, backoff: int) -> Json:
    return {
        "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "backoffLimit": backoff,
            "template": {"spec": {"restartPolicy": restart_policy, "containers": [{"name": "c"}]}},
        },
    }


def job_pod(index: int, phase: str, restarts: int = 0) -> Json:
    return {
        "metadata": {
            "name": f"j-{index}-x",
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "c", "restartCount": restarts}]},
    }


@pytest.mark.parametrize(("restarts", "fails"), [(2, False), (3, True)])
def test_on_failure_container_restarts_count_against_the_backoff_limit(restarts: int, fails: bool) -> None:
    pods = [job_pod(0, "Running", restarts), job_pod(1, "Running")]
    plan = plan_job(indexed_job("OnFailure", backoff=3), pods, NOW)
    types = {c["type"] for c in plan.status.get("conditions") or []}
    assert ("FailureTarget" in types) is fails
    assert plan.delete_pods == (["j-0-x", "j-1-x"] if fails else [])


def test_an_indexed_job_replaces_a_failed_index_and_keeps_the_done_one() -> None:
    pods = [job_pod(0, "Succeeded"), job_pod(1, "Failed")]
    plan = plan_job(indexed_job("Never", backoff=6), pods, NOW)
    assert [pod["metadata"]["generateName"] for pod in plan.create_pods] == ["j-1-"]
    assert (plan.status["succeeded"], plan.status["failed"], plan.status["completedIndexes"]) == (1, 1, "0")


def jobset_with(success_operator: str) -> Json:
    rjob = {"name": "node", "replicas": 2, "template": {"spec": {"template": {"spec": {}}}}}
    return {
        "metadata": {"name": "js", "namespace": "ns", "uid": "js-uid"},
        "spec": {"replicatedJobs": [rjob], "successPolicy": {"operator": success_operator}},
    }


def child(index: int, outcome: str | None) -> Json:
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": "node", "jobset.sigs.k8s.io/restart-attempt": "0"}
    conditions = [{"type": outcome, "status": "True"}] if outcome else []
    return {
        "metadata": {"name": f"js-node-{index}", "labels": labels},
        "spec": {},
        "status": {"conditions": conditions},
    }


@pytest.mark.parametrize(("operator", "completed"), [("All", False), ("Any", True)])
def test_the_success_policy_decides_when_one_of_two_jobs_succeeded(operator: str, completed: bool) -> None:
    plan = plan_jobset(jobset_with(operator), [child(0, "Complete"), child(1, None)], True, NOW)
    assert (plan.status.get("terminalState") == "Completed") is completed
