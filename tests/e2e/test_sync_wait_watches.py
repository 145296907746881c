"""A sync-mode task (``deferrable=False``) follows its job with watches, as the trigger does (issue 24).

With ``poll_interval`` at ten minutes, a task that polled would wait that long after its job
finished; one that watches ends with the job. When the watches fail, it polls (every
``poll_interval``), says so once per kind in the task log, and still ends right.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.apiserver.helpers import call
from tests.support.dag_runs import task_states

pytestmark = pytest.mark.usefixtures("kube_connection")

SYNC_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train",
        image="ghcr.io/acme/train:1",
        workers=1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "2"}}},
        deferrable=False,
        poll_interval=__POLL_INTERVAL__,
    )
"""
# The sync `kubernetes` client's requests (the hook's), as the API server counts them.
SYNC_AGENT = k8s.ApiClient().user_agent
WATCHES_FAIL = {"errors": [{"verbs": ["watch"], "rate": 1.0, "status": 503}]}


def sync_requests(api: k8s.ApiClient) -> Counter[str]:
    counts: Counter[str] = Counter()
    for entry in call(api, "GET", "/sim/v1/metrics")["requests"]:
        if entry["userAgent"] == SYNC_AGENT:
            counts[entry["verb"]] += entry["count"]
    return counts


def test_a_sync_task_ends_with_its_job_although_it_would_poll_only_every_ten_minutes(
    write_dag: Callable[..., Any], api: k8s.ApiClient, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = write_dag(SYNC_DAG, poll_interval=600)
    before = sync_requests(api)
    began = dt.datetime.now(dt.UTC)

    dag_run = dag.test()

    assert task_states(dag_run) == {"train": "success"}
    # Far below the ten minutes a poll would have waited (the job itself runs 2 s).
    assert (dt.datetime.now(dt.UTC) - began).total_seconds() < 120
    used = sync_requests(api) - before
    assert used["watch"] >= 3, used  # the job, its PodGroup and its pods
    output = capfd.readouterr().out
    assert "polling until it is back" not in output


def test_with_watches_failing_a_sync_task_polls_says_so_once_per_kind_and_ends_right(
    write_dag: Callable[..., Any], cluster: SimCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = write_dag(SYNC_DAG, poll_interval=1)
    cluster.set_faults(WATCHES_FAIL)
    try:
        dag_run = dag.test()
    finally:
        cluster.clear_faults()

    assert task_states(dag_run) == {"train": "success"}
    output = capfd.readouterr().out
    warned = Counter(re.findall(r"watch of (\w+) for default/\S+ failed", output))
    assert warned == {"pytorchjob": 1, "podgroup": 1, "pod": 1}, warned
