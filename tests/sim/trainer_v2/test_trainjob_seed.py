"""The seed scenario with Kubeflow Trainer v2: six 4-GPU TrainJobs on a pool that fits one.

A pool of 4 GPUs (2 nodes x 2). Six TrainJobs of 4 nodes, 1 GPU per node
(``resourcesPerNode``), created together, a short run each. With the ``torch-distributed``
runtime (a Volcano PodGroup per TrainJob) all six complete, one at a time. With
``torch-distributed-no-gang`` the default scheduler binds a few nodes of several TrainJobs,
each of them waits in its rendezvous for nodes that never come, and none completes: the
partial-placement deadlock. Mirrors tests/sim/test_seed_scenario.py (PyTorchJobs).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.trainer_v2.manifests import (
    DURATION,
    TRAINJOB_LABEL,
    create_trainjob,
    finished,
    pod_log,
    trainjob,
)
from tests.waiting import eventually

JOBS = 6
RUN_SECONDS = 0.5
NAMESPACE = "default"


@pytest.fixture
def pool() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2) as running:
        yield running


def submit(api: k8s.ApiClient, runtime: str) -> list[str]:
    custom = k8s.CustomObjectsApi(api)
    names = [f"seed-{index + 1}" for index in range(JOBS)]
    for name in names:
        body = trainjob(name, nodes=4, runtime=runtime, annotations={DURATION: str(RUN_SECONDS)})
        create_trainjob(custom, NAMESPACE, body)
    return names


def trainjobs_holding_gpus(core: k8s.CoreV1Api) -> Counter[str]:
    """Bound, unfinished pods per TrainJob: what each holds of the pool."""
    return Counter(
        pod.metadata.labels[TRAINJOB_LABEL]
        for pod in core.list_namespaced_pod(NAMESPACE).items
        if pod.spec.node_name and pod.status.phase in ("Pending", "Running")
    )


def trainjobs_running(core: k8s.CoreV1Api) -> set[str]:
    return {
        pod.metadata.labels[TRAINJOB_LABEL]
        for pod in core.list_namespaced_pod(NAMESPACE).items
        if pod.status.phase == "Running"
    }


def test_with_the_volcano_runtime_all_six_complete_one_at_a_time(pool: SimCluster) -> None:
    with pool.api_client() as api:
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        names = submit(api, "torch-distributed")
        most_running = 0
        states: list[str | None] = [None] * JOBS
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and states.count("Complete") < JOBS:
            most_running = max(most_running, len(trainjobs_running(core)))
            states = [finished(custom, NAMESPACE, name) for name in names]
            time.sleep(0.05)
        assert states == ["Complete"] * JOBS
        assert most_running == 1


def test_without_a_podgroup_the_pool_deadlocks(pool: SimCluster) -> None:
    with pool.api_client() as api:
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        names = submit(api, "torch-distributed-no-gang")
        eventually(lambda: sum(trainjobs_holding_gpus(core).values()) == 4, timeout=15)
        time.sleep(6 * RUN_SECONDS + 2)  # long enough for any TrainJob that could run to finish
        assert [finished(custom, NAMESPACE, name) for name in names].count("Complete") == 0
        holding = trainjobs_holding_gpus(core)
        assert sum(holding.values()) == 4, holding
        assert len(holding) > 1, f"GPUs must be split across several TrainJobs, got {holding}"
        assert all(count < 4 for count in holding.values())
        assert not custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups"
        )["items"]
        # Each placed node says why it makes no progress.
        waiting = [pod for pod in core.list_namespaced_pod(NAMESPACE).items if pod.status.phase == "Running"]
        log = pod_log(core, waiting[0].metadata.name, NAMESPACE)
        assert "waiting for rendezvous" in log
