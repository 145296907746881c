"""Volcano's ``reclaim`` takes GPUs back from a queue that borrowed them, as a task sees it.

Two nodes of 2 GPUs, queues ``team-a`` and ``team-b`` (weight 1: each deserves 2 GPUs), Volcano
configured with ``reclaim`` and its default tiers (docs/disruptions.md, docs/volcano-preemption.md).
A task of team-b trains on all four GPUs, two of them borrowed from team-a; a 2-GPU gang of
team-a arrives; Volcano evicts two of team-b's pods (``Ready=False`` reason ``Evict`` "Pod is
evicted, because of reclaim", ``DisruptionTarget`` reason ``PreemptionByScheduler``;
volcano ``pkg/scheduler/cache/cache.go:270-313``, ``actions/reclaim/reclaim.go:180-261`` at
v1.16.0-alpha.1) and places team-a's gang there.

- ``min_available=2`` (an elastic job): the gang vote lets it lose the 2 pods above its
  ``minAvailable`` (``plugins/gang/gang.go:97-125``); its PodGroup stays ``Running``, it is not
  requeued, and it trains on and succeeds.
- ``min_available=4`` (a full gang): the gang vote yields no victim from it, tier 1's empty answer
  falls through to tier 2, and proportion takes its pods anyway
  (``framework/session_plugins.go:242-244, 265-267``): it drops below ``minMember``, is requeued,
  waits for team-a's gang to finish, is re-admitted and succeeds with ``on_disruption="wait"``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.naming import DAG_ID_LABEL, safe_label_value
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.support.cluster import PODGROUPS, PYTORCHJOBS, delete_job
from tests.support.dag_runs import task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")
RECLAIM_CONF = """\
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    # Volcano's enqueue overcommit of 1.2 keeps a new gang Pending on a full cluster, and a
    # Pending PodGroup never reclaims (reclaim.go:73): room for team-a's gang to be enqueued.
    with SimCluster(
        nodes=2,
        gpus_per_node=2,
        queues={"team-a": None, "team-b": None},
        overcommit_factor=2.0,
        schedule_period=0.2,
        scheduler_conf=RECLAIM_CONF,
    ) as running:
        yield running


DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        volcano_queue="team-b", min_available=__MIN_AVAILABLE__, deferrable=__DEFERRABLE__,
        poll_interval=0.5, admission_timeout=60, on_disruption="wait",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "8"}}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    record(train.output)
"""


def team_a_arrives(api: k8s.ApiClient, dag_id: str, done: threading.Event) -> None:
    """Once the team-b task's four replicas run, submit team-a's 2-GPU gang (4 s of work)."""
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"

    def all_running() -> bool:
        pods = core.list_namespaced_pod("default", label_selector=selector).items
        return len(pods) == 4 and all(p.status.phase == "Running" for p in pods)

    eventually(all_running, timeout=60, message="team-b's job never ran on all four GPUs")
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=1,
        resources={"nvidia.com/gpu": 1},
        queue="team-a",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "4"}}},
    )
    podgroup = spec.build_podgroup("team-a-gang", "default")
    assert podgroup is not None
    custom.create_namespaced_custom_object(*PODGROUPS, podgroup)
    custom.create_namespaced_custom_object(*PYTORCHJOBS, spec.build_pytorchjob("team-a-gang", "default"))
    done.set()


@pytest.mark.parametrize(
    ("min_available", "deferrable"), [(2, False), (4, True)], ids=["elastic-sync", "full-gang-deferrable"]
)
def test_team_b_is_reclaimed_logs_it_and_still_succeeds(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    min_available: int,
    deferrable: bool,
) -> None:
    out = tmp_path / "out.json"
    dag = write_dag(DAG, min_available=min_available, deferrable=deferrable, out=str(out))
    arrived = threading.Event()
    arrival = threading.Thread(target=team_a_arrives, args=(api, dag.dag_id, arrived), daemon=True)
    arrival.start()
    try:
        dag_run = dag.test()
    finally:
        arrival.join(timeout=60)
        delete_job(api, "team-a-gang")
    assert arrived.is_set()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    name = json.loads(out.read_text())["name"]
    output = capfd.readouterr().out
    told = "\n".join(line for line in output.splitlines() if "gang" in line)
    assert f"gang disrupted job=default/{name} (#1): reclaimed: " in output, told
    assert "Pod is evicted, because of reclaim" in output, told
    requeued = f"gang job default/{name} is below its minMember ({min_available}) and back in queue team-b"
    if min_available == 2:  # lost only what it held above minAvailable: never requeued
        assert requeued not in output, told
        assert f"gang job default/{name}: disruption #1 over, the gang holds its pods again" in output, told
    else:  # a full gang: below minMember, back in the queue, re-admitted once team-a's gang is done
        assert requeued in output, told
        assert f"gang re-admitted job=default/{name}" in output, told
