"""dags/train_model.py on the embedded cluster: the run succeeds with its gang, and rides out
an API server that fails about a third of its reads and cuts its watches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gang_sim import SimCluster

ONE_NODE_FOUR_GPUS = {"nodes": 1, "gpus_per_node": 4, "queues": {"research": None}, "schedule_period": 0.2}
FLAKY_API = {
    "seed": 7,
    "errors": [{"verbs": ["get", "list"], "rate": 0.3, "status": 503}],
    "watches": {"cut_after_events": 3},
}


def states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


@pytest.mark.gang_cluster(**ONE_NODE_FOUR_GPUS)
def test_the_training_runs_on_one_gang(kubernetes_default: str, load_dag: Callable[[str], Any]) -> None:
    dag_run = load_dag("train_model").test()
    assert states(dag_run) == {"train": "success", "report": "success"}


@pytest.mark.gang_cluster(**ONE_NODE_FOUR_GPUS, faults=FLAKY_API)
def test_the_training_rides_out_a_flaky_api_server(
    gang_cluster: SimCluster, kubernetes_default: str, load_dag: Callable[[str], Any]
) -> None:
    dag_run = load_dag("train_model").test()
    assert states(dag_run) == {"train": "success", "report": "success"}
    counts = gang_cluster.fault_counts()
    assert counts["error_503"] > 0  # the faults really happened
    assert counts["watch_cut"] > 0
