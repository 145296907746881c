"""The embedded cluster's objects as tests read, make and remove them with the official client.

Where a test looks: the API groups (`PYTORCHJOBS`, `PODGROUPS`, `TRAINJOBS`), what is left in a
namespace (`leftovers`, `NOTHING`), a DAG's jobs and a job's pods; what it puts there beside the
provider: a running gang (`running_gang`), pods holding GPUs (`hold_one_gpu`, `cluster_blocker`),
a kubeconfig pointing elsewhere (`write_kubeconfig`).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from airflow_gang.model.naming import DAG_ID_LABEL, TASK_ID_LABEL
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.waiting import eventually

NAMESPACE = "default"
PYTORCHJOBS = ("kubeflow.org", "v1", NAMESPACE, "pytorchjobs")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups")
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs")
# The nodes of the 2 x 2-GPU clusters (tests/e2e, tests/realstack).
POOL_NODES = ("sim-node-1", "sim-node-2")


def leftovers(api: k8s.ApiClient, namespace: str = "default") -> dict[str, list[str]]:
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    jobs = custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")["items"]
    groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups")[
        "items"
    ]
    pods = core.list_namespaced_pod(namespace).items
    trainjobs = custom.list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs"
    )
    jobsets = custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets")
    batch_jobs = k8s.BatchV1Api(api).list_namespaced_job(namespace).items
    return {
        "pytorchjobs": [j["metadata"]["name"] for j in jobs],
        "trainjobs": [j["metadata"]["name"] for j in trainjobs["items"]],
        "jobsets": [j["metadata"]["name"] for j in jobsets["items"]],
        "jobs": [j.metadata.name for j in batch_jobs],
        "podgroups": [g["metadata"]["name"] for g in groups],
        "pods": [p.metadata.name for p in pods],
    }


NOTHING: dict[str, list[str]] = {
    "pytorchjobs": [],
    "trainjobs": [],
    "jobsets": [],
    "jobs": [],
    "podgroups": [],
    "pods": [],
}


def jobs_of(api: k8s.ApiClient, dag_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        *PYTORCHJOBS, label_selector=f"{DAG_ID_LABEL}={dag_id}"
    )["items"]
    return items


def trainjobs_of(api: k8s.ApiClient, dag_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        *TRAINJOBS, label_selector=f"{DAG_ID_LABEL}={dag_id}"
    )["items"]
    return items


def job_of(api: k8s.ApiClient, dag_id: str, task_id: str) -> dict[str, Any] | None:
    jobs = [job for job in jobs_of(api, dag_id) if job["metadata"]["labels"].get(TASK_ID_LABEL) == task_id]
    assert len(jobs) <= 1, [job["metadata"]["name"] for job in jobs]
    return jobs[0] if jobs else None


def live_job(api: k8s.ApiClient, dag_id: str, task_id: str) -> dict[str, Any]:
    job = eventually(lambda: job_of(api, dag_id, task_id), timeout=60, message=f"no job for {task_id}")
    assert job is not None
    return job


def pods_of(api: k8s.ApiClient, job: str) -> list[k8s.V1Pod]:
    pods: list[k8s.V1Pod] = (
        k8s.CoreV1Api(api)
        .list_namespaced_pod(NAMESPACE, label_selector=f"training.kubeflow.org/job-name={job}")
        .items
    )
    return pods


def all_running(api: k8s.ApiClient, job: str, replicas: int) -> bool:
    pods = pods_of(api, job)
    return len(pods) == replicas and all(pod.status.phase == "Running" for pod in pods)


def delete_job(api: k8s.ApiClient, name: str) -> None:
    """Delete a job and its PodGroup the way ``kubectl delete --cascade=foreground`` would; wait."""
    custom = k8s.CustomObjectsApi(api)
    for group in (PYTORCHJOBS, PODGROUPS):
        try:
            custom.delete_namespaced_custom_object(*group, name, body={"propagationPolicy": "Foreground"})
        except k8s.ApiException as error:
            if error.status != 404:
                raise
    eventually(
        lambda: name not in json.dumps(leftovers(api)),
        timeout=20,
        message=f"{name} not deleted: {leftovers(api)}",
    )


@contextlib.contextmanager
def running_gang(api: k8s.ApiClient, name: str, replicas: int, seconds: float) -> Iterator[str]:
    """A provider-style gang of ``replicas`` 1-GPU replicas running for ``seconds``, created
    directly through the official client; deleted (and waited for) on exit."""
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=replicas - 1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}},
    )
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    custom = k8s.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(*PODGROUPS, podgroup)
    custom.create_namespaced_custom_object(*PYTORCHJOBS, spec.build_pytorchjob(name, NAMESPACE))
    try:
        eventually(lambda: all_running(api, name, replicas), timeout=20, message=f"{name} not running")
        yield name
    finally:
        delete_job(api, name)


def hold_one_gpu(cluster: Any) -> Callable[[], None]:
    """A plain pod holding one GPU until the returned function deletes it."""
    with cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gpu-hog", "annotations": {"sim.airflow-gang.io/duration": "600"}},
            "spec": {
                "containers": [
                    {"name": "hog", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ]
            },
        }
        core.create_namespaced_pod("default", pod)

    def release() -> None:
        with cluster.api_client() as api:
            k8s.CoreV1Api(api).delete_namespaced_pod("gpu-hog", "default", grace_period_seconds=0)

    return release


def cluster_blocker(api: k8s.ApiClient, seconds: float) -> str:
    """A plain pod holding all four GPUs for ``seconds`` (as another team's job would)."""
    core = k8s.CoreV1Api(api)
    name = "blocker"
    for node in POOL_NODES:
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {
                    "name": f"{name}-{node}",
                    "annotations": {"sim.airflow-gang.io/duration": str(seconds)},
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "hold",
                            "image": "busybox",
                            "resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 2}},
                        }
                    ],
                },
            },
        )
    return name


def delete_blocker(api: k8s.ApiClient, name: str) -> None:
    core = k8s.CoreV1Api(api)
    for node in POOL_NODES:
        try:
            core.delete_namespaced_pod(f"{name}-{node}", "default", grace_period_seconds=0)
        except k8s.ApiException as error:
            if error.status != 404:
                raise


def write_kubeconfig(path: Path, cluster: SimCluster, server: str, ca_pem: bytes | None = None) -> None:
    """The cluster's kubeconfig with another server (and CA certificate, when given)."""
    config = yaml.safe_load(Path(cluster.kubeconfig_path).read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = server
        if ca_pem is not None:
            entry["cluster"].pop("certificate-authority", None)
            entry["cluster"]["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(yaml.safe_dump(config))
