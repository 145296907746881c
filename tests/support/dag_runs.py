"""DAGs run in this process with ``dag.test()`` (tests/e2e, tests/plugins): their DAG sources and
what a test reads off a run (task states, XComs, the report a run writes).

The ``write_dag`` and ``example_dag`` fixtures that write and load the DAG files are in
tests/e2e/conftest.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_gang.plugins.offline_chart import embedded_data
from tests.metadata import xcom_value

MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
RESULT_KEYS = {
    "name",
    "namespace",
    "uid",
    "queue",
    "podgroup",
    "state",
    "submitted_at",
    "admitted_at",
    "finished_at",
    "queued_seconds",
    "run_seconds",
    "replicas",
    "metrics",
}


def task_states(dag_run: Any) -> dict[str, str | None]:
    return {
        (ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): (
            str(ti.state) if ti.state else None
        )
        for ti in dag_run.get_task_instances()
    }


def xcom(dag_run: Any, task_id: str, map_index: int = -1) -> Any:
    """A task's return value."""
    return xcom_value(dag_run.dag_id, dag_run.run_id, task_id, map_index=map_index)


def run_report(tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The report task's timeline.json, and the data its timeline.html chart embeds."""
    (folder,) = (tmp_path / "airflow-gang").iterdir()
    chart = embedded_data((folder / "timeline.html").read_text(encoding="utf-8"))
    return json.loads((folder / "timeline.json").read_text()), chart


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


# The seed scenario with dynamic task mapping (tests/e2e/test_scenarios.py, test_gang_flag.py).
SEED_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator.partial(
        task_id="train", image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=3,
        resources={"nvidia.com/gpu": 1}, volcano_queue="default", gang_scheduling=__GANG__,
        deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=120,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "0.3"}}},
    ).expand(args=[["--seed", str(seed)] for seed in range(6)])

    @task
    def collect(results):
        with open(__OUT__, "w") as out:
            json.dump(list(results), out)

    collect(train.output)
"""


def run_seed_sweep(write_dag: Callable[..., Any], tmp_path: Path, *, gang: str, deferrable: bool) -> None:
    """Six mapped jobs of Master + 3 Workers (4 GPUs, the whole pool): all succeed, one at a time."""
    out = tmp_path / "results.json"
    dag = write_dag(SEED_DAG, gang=gang, deferrable=deferrable, out=str(out))
    dag_run = dag.test()
    states = task_states(dag_run)
    assert states == {**{f"train[{i}]": "success" for i in range(6)}, "collect": "success"}
    results = read_json(out)
    assert len(results) == 6
    assert len({result["name"] for result in results}) == 6
    assert len({result["uid"] for result in results}) == 6
    for result in results:
        assert set(result) == RESULT_KEYS
        assert result["state"] == "succeeded"
        assert result["queue"] == "default"
        assert result["replicas"] == {"Master": 1, "Worker": 3}


# A TrainJob and a task recording its result (tests/e2e/test_trainjob_operator.py,
# test_trainjob_deletion.py).
VCJOB_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.volcano_job import VolcanoJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = VolcanoJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=__WORKERS__,
        resources={"nvidia.com/gpu": 1}, deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=__ADMISSION__, queue=__QUEUE__, retries=0, delete_on_finish="always",
        min_available=__MIN_AVAILABLE__, max_retry=__MAX_RETRY__, policies=__POLICIES__,
        pod_template={"metadata": {"annotations": __ANNOTATIONS__}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump({"result": result, "job_name": ti.xcom_pull(task_ids="train", key="job_name")}, out)

    record(train.output)
"""
TRAINJOB_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.train_job import TrainJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = TrainJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", command=["torchrun", "train.py"], num_nodes=__NODES__,
        resources_per_node={"nvidia.com/gpu": 1}, deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=__ADMISSION__, runtime=__RUNTIME__, queue=__QUEUE__, retries=0,
        delete_on_finish="always",
        pod_template={"metadata": {"annotations": __ANNOTATIONS__}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump({"result": result, "job_name": ti.xcom_pull(task_ids="train", key="job_name")}, out)

    record(train.output)
"""
