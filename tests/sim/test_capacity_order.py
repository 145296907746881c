"""Acceptance test of the capacity view: the positions `read_capacity` predicts for waiting gangs
are the order in which the embedded cluster's Volcano admits them.

One gang holds the whole GPU pool; five more wait in one queue with mixed PriorityClasses and
creation times a second apart (Volcano's timestamp resolution). Everything is read through a
real `GangJobHook` on the cluster's kubeconfig; the admissions are observed independently,
from the pods' bindings read with the official client.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.capacity import ClusterCapacity
from airflow_gang.plugins.capacity_reader import read_capacity
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.waiting import eventually

NAMESPACE = "default"
GPU = "nvidia.com/gpu"
GANG_SIZE = 4  # the whole pool of 2 nodes x 2 GPUs: gangs can only run one after another
JOB_LABEL = "training.kubeflow.org/job-name"
PRIORITY_CLASSES = {"cap-high": 1000, "cap-low": 100, "cap-standard": 10}
GLOBAL_DEFAULT = "cap-standard"
# In creation order, each a later second than the one before.
GANGS = [
    ("gang-1", "cap-low"),
    ("gang-2", None),  # no class: the globalDefault one's value, 10
    ("gang-3", "cap-high"),
    ("gang-4", "cap-low"),
    ("gang-5", "cap-high"),
]
PREDICTED = ["gang-3", "gang-5", "gang-1", "gang-4", "gang-2"]


def gang(duration: float, priority_class: str | None = None) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=GANG_SIZE - 1,
        resources={GPU: 1},
        priority_class=priority_class,
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(duration)}}},
    )


def submit(hook: GangJobHook, name: str, spec: GangJobSpec) -> dict[str, Any]:
    """What the operator does: the PodGroup, the PyTorchJob, then the job made the group's owner."""
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    created = hook.create_podgroup(podgroup, NAMESPACE)
    job = hook.create_pytorchjob(spec.build_pytorchjob(name, NAMESPACE), NAMESPACE)
    hook.set_podgroup_owner(name, NAMESPACE, job)
    return created


def created_second(podgroup: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(podgroup["metadata"]["creationTimestamp"])


def next_second(after: dt.datetime) -> None:
    """Until the clock is in a later second than ``after`` (creationTimestamp has 1 s resolution)."""
    eventually(lambda: dt.datetime.now(dt.UTC).replace(microsecond=0) > after, timeout=3)


def bound_jobs(core: k8s.CoreV1Api) -> set[str]:
    """Jobs whose every replica has a node: admitted (Volcano binds a gang all at once)."""
    bound: dict[str, int] = {}
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector=JOB_LABEL).items:
        if pod.spec.node_name:
            job = pod.metadata.labels[JOB_LABEL]
            bound[job] = bound.get(job, 0) + 1
    return {job for job, count in bound.items() if count >= GANG_SIZE}


def waiting_in_default(capacity: ClusterCapacity) -> list[str]:
    return [g.name for g in capacity.waiting if g.queue == "default"]


@pytest.fixture
def cluster(gang_cluster_factory: Callable[..., SimCluster]) -> SimCluster:
    return gang_cluster_factory(nodes=2, gpus_per_node=2, schedule_period=0.2)


@pytest.fixture
def hook(cluster: SimCluster) -> GangJobHook:
    return GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=cluster.kubeconfig_path)


@pytest.fixture
def core(cluster: SimCluster) -> Iterator[k8s.CoreV1Api]:
    with cluster.api_client() as api:
        yield k8s.CoreV1Api(api)


def test_predicted_positions_are_the_order_volcano_admits_in(
    cluster: SimCluster, hook: GangJobHook, core: k8s.CoreV1Api
) -> None:
    with cluster.api_client() as api:
        for name, value in PRIORITY_CLASSES.items():
            k8s.SchedulingV1Api(api).create_priority_class(
                k8s.V1PriorityClass(
                    metadata=k8s.V1ObjectMeta(name=name), value=value, global_default=name == GLOBAL_DEFAULT
                )
            )
    submit(hook, "blocker", gang(duration=600))
    eventually(lambda: bound_jobs(core) == {"blocker"}, timeout=20, message="blocker holds the pool")

    previous: dt.datetime | None = None
    for name, priority_class in GANGS:
        if previous is not None:
            next_second(previous)
        previous = created_second(submit(hook, name, gang(duration=0.5, priority_class=priority_class)))

    capacity = read_capacity(hook, [NAMESPACE])
    assert capacity.warnings == []
    assert capacity.to_json()["resources"][GPU] == {"allocatable": "4", "allocated": "4", "free": "0"}
    (default,) = [q for q in capacity.queues if q.name == "default"]
    assert default.to_json() == {
        "name": "default",
        "state": "Open",
        "capability": None,
        "deserved": None,
        "guarantee": None,
        "allocated": {GPU: "4"},
        "pending": {GPU: "20"},
        "free": {GPU: "0", "cpu": "32", "memory": "128Gi"},  # no capability: the cluster's free
        "waiting_gangs": 5,
    }
    assert waiting_in_default(capacity) == PREDICTED
    assert [(g.gangs_ahead, g.priority) for g in capacity.waiting] == [
        (0, 1000),
        (1, 1000),
        (2, 100),
        (3, 100),
        (4, 10),
    ]
    assert [g.summary for g in capacity.waiting] == [
        "needs 4 GPUs; 0 free in queue default (capability unlimited); no gang ahead",
        "needs 4 GPUs; 0 free in queue default (capability unlimited); 1 gang ahead",
        "needs 4 GPUs; 0 free in queue default (capability unlimited); 2 gangs ahead",
        "needs 4 GPUs; 0 free in queue default (capability unlimited); 3 gangs ahead",
        "needs 4 GPUs; 0 free in queue default (capability unlimited); 4 gangs ahead",
    ]
    json.dumps(capacity.to_json())  # plain JSON for the page's API

    # Free the pool and watch Volcano admit the gangs one at a time.
    hook.delete_pytorchjob("blocker", NAMESPACE, propagation="Background")
    admitted: list[set[str]] = []
    predictions: list[list[str]] = []

    def all_admitted() -> bool:
        seen = bound_jobs(core) - {"blocker"} - {job for batch in admitted for job in batch}
        if seen:
            admitted.append(seen)
            predictions.append(waiting_in_default(read_capacity(hook, [NAMESPACE])))
        return sum(len(batch) for batch in admitted) == len(GANGS)

    eventually(all_admitted, timeout=90, message=f"(admitted so far: {admitted})")
    assert all(len(batch) == 1 for batch in admitted), admitted  # never two in one observation
    assert [job for batch in admitted for job in batch] == PREDICTED
    # After each admission the page's prediction is what is left, in the same order (a gang
    # admitted meanwhile may already be gone from it).
    for done, predicted in enumerate(predictions, start=1):
        assert predicted == PREDICTED[len(PREDICTED) - len(predicted) :]
        assert len(predicted) <= len(PREDICTED) - done


def rbac_denial(resource: str) -> Callable[..., Any]:
    def forbidden(*_args: Any, **_kwargs: Any) -> Any:
        error = ApiException(status=403, reason="Forbidden")
        error.body = json.dumps(
            {
                "kind": "Status",
                "status": "Failure",
                "reason": "Forbidden",
                "code": 403,
                "message": f'{resource} is forbidden: User "system:serviceaccount:airflow:airflow-web" '
                f'cannot list resource "{resource}" at the cluster scope',
            }
        )
        raise error

    return forbidden


def test_denied_cluster_reads_leave_a_warning_not_a_broken_page(
    cluster: SimCluster, hook: GangJobHook, core: k8s.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pod of no gang, placed by the default kube-scheduler, holds a GPU.
    core.create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": "plain", "annotations": {"sim.airflow-gang.io/duration": "600"}},
            "spec": {
                "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {GPU: "1"}}}]
            },
        },
    )
    eventually(lambda: core.read_namespaced_pod("plain", NAMESPACE).spec.node_name, timeout=20)
    podgroup = gang(duration=1).build_podgroup("lonely", NAMESPACE)
    assert podgroup is not None
    hook.create_podgroup(podgroup, NAMESPACE)

    monkeypatch.setattr(k8s.CoreV1Api, "list_node", rbac_denial("nodes"))
    monkeypatch.setattr(k8s.CoreV1Api, "list_pod_for_all_namespaces", rbac_denial("pods"))
    monkeypatch.setattr(k8s.SchedulingV1Api, "list_priority_class", rbac_denial("priorityclasses"))
    capacity = read_capacity(hook, [NAMESPACE])

    assert [warning.split(": ", 2)[:2] for warning in capacity.warnings] == [
        ["missing RBAC rule nodes", "list (ClusterRole)"],
        ["missing RBAC rule pods", "list (ClusterRole)"],
        ["missing RBAC rule priorityclasses.scheduling.k8s.io", "list (ClusterRole)"],
    ]
    assert f"only pods of {NAMESPACE} are counted" in capacity.warnings[1]
    # The namespace's own pods are still counted; the cluster's size is unknown.
    assert capacity.to_json()["resources"][GPU] == {"allocatable": None, "allocated": "1", "free": None}
    (lonely,) = capacity.waiting
    assert lonely.summary == "needs 4 GPUs; free GPUs unknown (nodes not readable); no gang ahead"
