"""The seed scenario's jobs: six PyTorchJobs of Master + 3 Workers, 1 GPU per replica.

Shared by the embedded-cluster tests and the attach-mode test; manifests come from `GangJobSpec`.
"""

from __future__ import annotations

import time

from kubernetes import client as k8s

from airflow_gang.hooks.kinds import owner_reference_patch
from airflow_gang.spec import GangJobSpec

JOBS = 6
DURATION = 0.5  # seconds of work per job: one at a time, six take 3 s plus the admissions
GROUP = ("kubeflow.org", "v1")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


def seed_spec(gang_scheduling: str) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=3,
        resources={"nvidia.com/gpu": 1},
        gang_scheduling=gang_scheduling,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(DURATION)}}},
    )


def submit(api: k8s.ApiClient, spec: GangJobSpec, namespace: str = "default") -> list[str]:
    """Create the six jobs the way the provider does: PodGroup, PyTorchJob, then the job made
    the PodGroup's owner with the provider's own patch (`owner_reference_patch`)."""
    custom = k8s.CustomObjectsApi(api)
    names = [f"seed-{index + 1}" for index in range(JOBS)]
    for name in names:
        podgroup = spec.build_podgroup(name, namespace)
        if podgroup is not None:
            custom.create_namespaced_custom_object(*VOLCANO, namespace, "podgroups", podgroup)
        job = custom.create_namespaced_custom_object(
            *GROUP, namespace, "pytorchjobs", spec.build_pytorchjob(name, namespace)
        )
        if podgroup is not None:
            custom.patch_namespaced_custom_object(
                *VOLCANO, namespace, "podgroups", name, owner_reference_patch(job)
            )
    return names


def job_state(custom: k8s.CustomObjectsApi, name: str, namespace: str = "default") -> str | None:
    job = custom.get_namespaced_custom_object(*GROUP, namespace, "pytorchjobs", name)
    true = [c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
    return true[-1] if true else None


def jobs_holding_gpus(core: k8s.CoreV1Api) -> dict[str, int]:
    holding: dict[str, int] = {}
    for pod in core.list_namespaced_pod("default").items:
        if pod.spec.node_name and pod.status.phase in ("Pending", "Running"):
            job = pod.metadata.labels["training.kubeflow.org/job-name"]
            holding[job] = holding.get(job, 0) + 1
    return holding


def jobs_running(core: k8s.CoreV1Api) -> set[str]:
    return {
        pod.metadata.labels["training.kubeflow.org/job-name"]
        for pod in core.list_namespaced_pod("default").items
        if pod.status.phase == "Running"
    }


def run_to_completion(api: k8s.ApiClient, names: list[str], timeout: float) -> tuple[list[str | None], int]:
    """Sample the jobs every 50 ms until all succeed (or ``timeout``).

    Returns their final states and the most jobs ever seen with a Running pod at once.
    """
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    most_running = 0
    states: list[str | None] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        most_running = max(most_running, len(jobs_running(core)))
        states = [job_state(custom, name) for name in names]
        if states.count("Succeeded") == len(names):
            break
        time.sleep(0.05)
    return states, most_running
