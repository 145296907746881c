"""The seed scenario on the embedded cluster: six distributed jobs on a pool that fits one.

A pool of 4 GPUs (2 nodes x 2). Six PyTorchJobs of Master + 3 Workers, 1 GPU per replica,
created together, 0.5 s of work each. Without gang scheduling the default scheduler binds a few
replicas of several jobs and none can start (deadlock). With Volcano PodGroups — created by us
("provider" style) or by the training-operator's gang flag — all six run, one after another.
Each ``gang_scheduling`` mode runs on an operator with and without ``--gang-scheduler-name=volcano``.
Everything goes through the official client over HTTP, manifests built by `GangJobSpec` and
submitted as the provider submits them (`tests.sim.seed.submit`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.seed import DURATION, JOBS, job_state, jobs_holding_gpus, run_to_completion, seed_spec, submit
from tests.waiting import eventually


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    options: dict[str, Any] = getattr(request, "param", {})
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, **options) as running:
        yield running


NO_FLAG: dict[str, Any] = {}
GANG_FLAG = {"training_operator_gang": "volcano"}  # --gang-scheduler-name=volcano, the seed's setup


def assert_deadlocked(api: k8s.ApiClient, names: list[str]) -> None:
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    eventually(lambda: sum(jobs_holding_gpus(core).values()) == 4, timeout=15)
    time.sleep(6 * DURATION)  # six job durations: long enough for any job that could run to finish
    assert [job_state(custom, name) for name in names].count("Succeeded") == 0
    holding = jobs_holding_gpus(core)
    assert sum(holding.values()) == 4, holding
    assert len(holding) > 1, f"GPUs must be split across several jobs, got {holding}"
    assert all(count < 4 for count in holding.values())


@pytest.mark.parametrize(
    ("cluster", "mode"),
    [(NO_FLAG, "disabled"), (NO_FLAG, "training-operator")],
    indirect=["cluster"],
    ids=["disabled", "training-operator-mode-without-the-flag"],
)
def test_without_gang_scheduling_the_pool_deadlocks(cluster: SimCluster, mode: str) -> None:
    """``training-operator`` mode on an operator without the flag is no gang at all: nobody makes
    a PodGroup, the pods go to the default scheduler, and the pool deadlocks like ``disabled``."""
    with cluster.api_client() as api:
        names = submit(api, seed_spec(mode))
        assert_deadlocked(api, names)
        assert not k8s.CustomObjectsApi(api).list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
        )["items"]


@pytest.mark.parametrize(
    ("cluster", "mode"),
    [
        (NO_FLAG, "provider"),
        (GANG_FLAG, "provider"),
        # Each of these three has a twin in every `make test` run (tests/e2e/test_gang_flag.py
        # runs both modes on the flag cluster; bench_scheduler's smoke runs the controllers
        # isolated); they run with `make test-slow`.
        pytest.param(GANG_FLAG, "training-operator", marks=pytest.mark.slow),
        # With the flag the operator makes every job a gang, whatever the job asks for.
        pytest.param(GANG_FLAG, "disabled", marks=pytest.mark.slow),
        pytest.param({"isolate_controllers": True}, "provider", marks=pytest.mark.slow),
    ],
    indirect=["cluster"],
    ids=[
        "provider-podgroups",
        "provider-podgroups-with-the-gang-flag",
        "training-operator-gang-flag",
        "disabled-but-the-gang-flag-gangs-it",
        "controllers-in-their-own-process",
    ],
)
def test_with_gang_scheduling_all_six_finish_one_at_a_time(cluster: SimCluster, mode: str) -> None:
    with cluster.api_client() as api:
        states, most_running = run_to_completion(api, submit(api, seed_spec(mode)), timeout=60)
        assert states == ["Succeeded"] * JOBS
        assert most_running == 1
