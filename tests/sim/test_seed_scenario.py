"""The seed scenario on the embedded cluster: six distributed jobs on a pool that fits one.

A pool of 4 GPUs (2 nodes x 2). Six PyTorchJobs of Master + 3 Workers, 1 GPU per replica,
created together, 1 s of work each. Without gang scheduling the default scheduler binds a few
replicas of several jobs and none can start (deadlock). With Volcano PodGroups — created by us
("provider" style) or by the training-operator's gang flag — all six run, one after another.
Everything goes through the official client over HTTP, manifests built by `GangJobSpec`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.sim.cluster import SimCluster
from tests.sim.seed import DURATION, JOBS, job_state, jobs_holding_gpus, run_to_completion, seed_spec, submit
from tests.waiting import eventually


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    options: dict[str, Any] = getattr(request, "param", {})
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, **options) as running:
        yield running


def test_without_gang_scheduling_the_pool_deadlocks(cluster: SimCluster) -> None:
    with cluster.api_client() as api:
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        names = submit(api, seed_spec("disabled"))
        holding = eventually(
            lambda: (h := jobs_holding_gpus(core)) and sum(h.values()) == 4 and h, timeout=15
        )
        time.sleep(10 * DURATION)  # ten job durations: long enough for any job that could run to finish
        assert [job_state(custom, name) for name in names].count("Succeeded") == 0
        holding = jobs_holding_gpus(core)
        assert sum(holding.values()) == 4, holding
        assert len(holding) > 1, f"GPUs must be split across several jobs, got {holding}"
        assert all(count < 4 for count in holding.values())


@pytest.mark.parametrize(
    ("cluster", "mode"),
    [
        ({}, "provider"),
        ({"training_operator_gang": "volcano"}, "training-operator"),
        ({"isolate_controllers": True}, "provider"),
    ],
    indirect=["cluster"],
    ids=["provider-podgroups", "training-operator-gang-flag", "controllers-in-their-own-process"],
)
def test_with_gang_scheduling_all_six_finish_one_at_a_time(cluster: SimCluster, mode: str) -> None:
    with cluster.api_client() as api:
        states, most_running = run_to_completion(api, submit(api, seed_spec(mode)), timeout=60)
        assert states == ["Succeeded"] * JOBS
        assert most_running == 1
