"""What `TrainJobSpec` builds runs on the embedded cluster's Trainer v2, as the future
`TrainJobOperator` will submit it: accepted by the API server's schema and Trainer's webhook,
its queue on the Volcano PodGroup, the task's identity labels and the pod template's annotations
on every node pod, and the job completes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from airflow_gang.trainjob_spec import TrainJobSpec
from gang_sim.cluster import SimCluster
from tests.waiting import eventually

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
NAMESPACE = "default"
IDENTITY = {"airflow-gang.io/dag-id": "retrain", "airflow-gang.io/task-id": "train"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, queues={"research": None}) as running:
        yield running


@pytest.fixture
def api(cluster: SimCluster) -> Iterator[k8s.ApiClient]:
    with cluster.api_client() as client:
        yield client


def condition(job: dict, kind: str) -> str | None:
    found = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type") == kind]
    return found[0].get("status") if found else None


def finished(custom: k8s.CustomObjectsApi, name: str) -> dict | None:
    job: dict = custom.get_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", name)
    return job if "True" in (condition(job, "Complete"), condition(job, "Failed")) else None


def test_a_built_trainjob_runs_gang_scheduled_with_its_identity_on_every_pod(api: k8s.ApiClient) -> None:
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    spec = TrainJobSpec(
        image="ghcr.io/acme/train:1",
        command=["torchrun", "train.py"],
        num_nodes=2,
        resources_per_node={"nvidia.com/gpu": 1},
        queue="research",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "1"}}},
    )
    body = spec.build_trainjob("spec-built", NAMESPACE, extra_labels=IDENTITY)
    custom.create_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", body)
    try:
        podgroup = eventually(
            lambda: _get(custom, *VOLCANO, "podgroups", "spec-built"), timeout=30, message="no PodGroup"
        )
        assert podgroup["spec"]["queue"] == "research"
        assert podgroup["spec"]["minMember"] == 2
        done = eventually(
            lambda: finished(custom, "spec-built"), timeout=60, message="the TrainJob never finished"
        )
        assert condition(done, "Complete") == "True", done.get("status")
        selector = ",".join(f"{key}={value}" for key, value in IDENTITY.items())
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        assert len(pods) == 2
        for pod in pods:
            assert pod.metadata.annotations["sim.airflow-gang.io/duration"] == "1"
            assert pod.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "spec-built"
            assert pod.status.phase == "Succeeded"
    finally:
        custom.delete_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", "spec-built")


def test_the_api_server_and_trainer_accept_every_optional_field(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    spec = TrainJobSpec(
        image="ghcr.io/acme/train:1",
        args=["--epochs", "1"],
        env={"LR": "0.1", "POD": {"fieldRef": {"fieldPath": "metadata.name"}}},
        num_nodes=1,
        num_proc_per_node=2,
        resources_per_node={"cpu": "1", "memory": "1Gi"},
        node_selector={"kubernetes.io/os": "linux"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        runtime_patches=[{"manager": "team.example.com/tuning", "trainingRuntimeSpec": {}}],
        suspend=True,
    )
    created = custom.create_namespaced_custom_object(
        *TRAINER, NAMESPACE, "trainjobs", spec.build_trainjob("every-field", NAMESPACE)
    )
    try:
        assert created["spec"]["suspend"] is True
        assert [patch["manager"] for patch in created["spec"]["runtimePatches"]] == [
            "airflow-gang.io/operator",
            "team.example.com/tuning",
        ]
    finally:
        custom.delete_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", "every-field")


def _get(custom: k8s.CustomObjectsApi, group: str, version: str, plural: str, name: str) -> dict | None:
    try:
        found: dict = custom.get_namespaced_custom_object(group, version, NAMESPACE, plural, name)
        return found
    except k8s.ApiException as error:
        if error.status == 404:
            return None
        raise
