"""`JobKind`: the PyTorchJob facts the lifecycle reads, checked against the manifests the spec builds."""

from __future__ import annotations

from airflow_gang.hooks.kinds import PYTORCHJOBS
from airflow_gang.job_kinds import PYTORCHJOB
from airflow_gang.spec import CONTAINER_NAME, PYTORCHJOB_API_VERSION, GangJobSpec


def test_the_pytorchjob_kind_reads_the_replicas_the_spec_builds() -> None:
    job = GangJobSpec(image="train:1", workers=3).build_pytorchjob("sweep-1", "team-a")

    assert PYTORCHJOB.replica_counts(job) == {"Master": 1, "Worker": 3}
    assert set(PYTORCHJOB.replica_specs(job)) == {"Master", "Worker"}
    containers = PYTORCHJOB.replica_specs(job)["Master"]["template"]["spec"]["containers"]
    assert [container["name"] for container in containers] == [PYTORCHJOB.container] == [CONTAINER_NAME]
    assert job["apiVersion"] == f"{PYTORCHJOB.group}/{PYTORCHJOB.version}" == PYTORCHJOB_API_VERSION
    assert job["kind"] == PYTORCHJOB.kind == PYTORCHJOBS.kind


def test_a_replica_without_a_count_is_one_and_a_job_without_specs_has_none() -> None:
    job = {"spec": {"pytorchReplicaSpecs": {"Master": {"template": {}}, "Worker": None}}}

    assert PYTORCHJOB.replica_counts(job) == {"Master": 1, "Worker": 1}
    assert PYTORCHJOB.replica_counts({}) == {}


def test_the_leader_pod_is_the_masters_first_replica_as_the_training_operator_names_it() -> None:
    # training-operator v1: <job>-<replica type, lower case>-<index>
    assert PYTORCHJOB.leader_pod("sweep-1") == "sweep-1-master-0"
