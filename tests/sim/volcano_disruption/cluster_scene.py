"""A running cluster for the preempt/reclaim tests, seen through the official client over HTTP.

Jobs are PyTorchJobs built by `GangJobSpec` in "provider" mode (the PodGroup first, then the
job), as the provider submits them; the script runtime keeps each replica running for
``duration`` seconds. A test can *hold* pods with a finalizer of its own: an evicted pod then
stays terminating (``deletionTimestamp`` set, still holding its GPU) until the test releases it,
so what the scheduler does while victims terminate can be looked at without racing the kubelet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.waiting import eventually

NAMESPACE = "default"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
PYTORCH = ("kubeflow.org", "v1")
GPU = "nvidia.com/gpu"
JOB_LABEL = "training.kubeflow.org/job-name"
HOLD = "sim.airflow-gang.io/test-hold"
EVICTED_READY = "Pod is evicted, because of {}"
DISRUPTION = "volcano: preempting to accommodate a higher priority pod"
PIPELINED = (
    "Pod default/{} can possibly be assigned to {}, once resource is released and minAvailable is satisfied"
)

RECLAIM_CONF = """\
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


@dataclass
class Api:
    core: k8s.CoreV1Api
    custom: k8s.CustomObjectsApi
    scheduling: k8s.SchedulingV1Api


def connect(cluster: SimCluster, opened: list[k8s.ApiClient]) -> Api:
    client = cluster.api_client()
    opened.append(client)
    return Api(k8s.CoreV1Api(client), k8s.CustomObjectsApi(client), k8s.SchedulingV1Api(client))


def job(
    replicas: int,
    *,
    queue: str = "default",
    min_available: int | None = None,
    priority_class: str | None = None,
    duration: float = 120,
) -> GangJobSpec:
    """A Master + (replicas - 1) Workers job, 1 GPU per replica."""
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=replicas - 1,
        resources={GPU: 1},
        queue=queue,
        min_available=min_available,
        priority_class=priority_class,
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(duration)}}},
    )


def submit(api: Api, name: str, spec: GangJobSpec) -> None:
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    api.custom.create_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", podgroup)
    api.custom.create_namespaced_custom_object(
        *PYTORCH, NAMESPACE, "pytorchjobs", spec.build_pytorchjob(name, NAMESPACE)
    )


def pods_of(api: Api, name: str) -> list[Any]:
    return list(api.core.list_namespaced_pod(NAMESPACE, label_selector=f"{JOB_LABEL}={name}").items)


def running(api: Api, name: str, count: int) -> list[Any]:
    """The job's pods once ``count`` of them run, else an empty list."""
    found = [
        p for p in pods_of(api, name) if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    ]
    return found if len(found) == count else []


def terminating(api: Api, name: str) -> list[Any]:
    return [p for p in pods_of(api, name) if p.metadata.deletion_timestamp]


def victims(api: Api, name: str, count: int) -> list[Any]:
    """The job's pods once ``count`` of them are terminating (evicted and held)."""
    return eventually(lambda: len(found := terminating(api, name)) == count and found, timeout=10)


def hold(api: Api, pods: list[Any]) -> None:
    for pod in pods:
        api.core.patch_namespaced_pod(pod.metadata.name, NAMESPACE, {"metadata": {"finalizers": [HOLD]}})


def release(api: Api, name: str) -> None:
    for pod in pods_of(api, name):
        if HOLD in (pod.metadata.finalizers or []):
            api.core.patch_namespaced_pod(pod.metadata.name, NAMESPACE, {"metadata": {"finalizers": None}})


def podgroup(api: Api, name: str) -> dict[str, Any]:
    found: dict[str, Any] = api.custom.get_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", name)
    return found


def phase(api: Api, name: str) -> str | None:
    return (podgroup(api, name).get("status") or {}).get("phase")


def condition(api: Api, name: str, kind: str) -> dict[str, Any] | None:
    conditions = (podgroup(api, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def events(api: Api, name: str) -> set[tuple[str, str, str]]:
    listed = api.core.list_namespaced_event(NAMESPACE, field_selector=f"involvedObject.name={name}")
    return {(e.type, e.reason, e.message) for e in listed.items}


def wait_for_event(api: Api, name: str, event: tuple[str, str, str], timeout: float = 10.0) -> None:
    eventually(lambda: event in events(api, name), timeout=timeout, message=f"event {event} on {name}")


def pod_condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def assert_evicted(api: Api, pod: Any, reason: str) -> None:
    """The evictor's marks on a victim (cache/cache.go:270-313@v1.16.0-alpha.1)."""
    ready = pod_condition(pod, "Ready")
    assert (ready.status, ready.reason, ready.message) == ("False", "Evict", EVICTED_READY.format(reason))
    target = pod_condition(pod, "DisruptionTarget")
    assert (target.status, target.reason, target.message) == ("True", "PreemptionByScheduler", DISRUPTION)
    assert pod.metadata.deletion_timestamp is not None
    wait_for_event(api, pod.metadata.name, ("Warning", "Evict", EVICTED_READY.format(reason)))


def assert_pipelined(api: Api, name: str, node: str) -> list[Any]:
    """The preemptor's pods: unbound, nominated to ``node``, told so (api/job_info.go:906-911,
    cache/cache.go:1080-1125@v1.16.0-alpha.1). Returns them."""

    def probe() -> list[Any]:
        pods = pods_of(api, name)
        told = [
            p
            for p in pods
            if not p.spec.node_name
            and p.status.nominated_node_name == node
            and (c := pod_condition(p, "PodScheduled")) is not None
            and (c.status, c.reason) == ("False", "Unschedulable")
            and c.message == PIPELINED.format(p.metadata.name, node)
        ]
        return told if len(told) == len(pods) and pods else []

    return eventually(probe, timeout=10, message=f"{name} pipelined on {node}")
