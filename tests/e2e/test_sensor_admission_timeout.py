"""Sensors with ``admission_timeout``: a gang still queued then is deleted, the task fails clearly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.cluster import delete_job, jobs_of
from tests.support.dag_runs import task_states

pytestmark = pytest.mark.usefixtures("kube_connection")

SENSOR_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import GangAdmissionSensor, PyTorchJobSensor

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    submit = PyTorchJobOperator(
        task_id="submit", image="ghcr.io/acme/train:1", workers=__WORKERS__,
        resources={"nvidia.com/gpu": 1}, wait_for_completion=False, wait_for_admission=False,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "0.3"}}},
    )
    sensor = {"GangAdmissionSensor": GangAdmissionSensor, "PyTorchJobSensor": PyTorchJobSensor}[__SENSOR__]
    wait = sensor(
        task_id="wait", job_name="{{ ti.xcom_pull(task_ids='submit', key='job_name') }}",
        admission_timeout=__ADMISSION_TIMEOUT__, deferrable=__DEFERRABLE__, poke_interval=0.2,
        mode=__MODE__,
    )
    submit >> wait
"""


@pytest.mark.parametrize(
    ("sensor", "deferrable", "mode"),
    [
        ("GangAdmissionSensor", False, "poke"),
        ("PyTorchJobSensor", False, "reschedule"),
        ("PyTorchJobSensor", True, "poke"),
    ],
)
def test_a_gang_that_never_fits_is_deleted_at_the_deadline(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str], sensor: str, deferrable: bool, mode: str
) -> None:
    """Five 1-GPU replicas on a 4-GPU pool: never admitted. The autouse check sees it deleted."""
    dag = write_dag(
        SENSOR_DAG, sensor=sensor, workers=4, admission_timeout="3", deferrable=deferrable, mode=mode
    )
    dag_run = dag.test()
    assert task_states(dag_run) == {"submit": "success", "wait": "failed"}
    output = capfd.readouterr().out
    assert "GangAdmissionTimeout" in output
    assert "it was deleted (seen gone, with its PodGroup and pods), so it holds no resources" in output


def test_a_gang_admitted_in_time_is_left_alone(write_dag: Callable[..., Any], api: Any) -> None:
    dag = write_dag(
        SENSOR_DAG, sensor="PyTorchJobSensor", workers=1, admission_timeout=60, deferrable=True, mode="poke"
    )
    dag_run = dag.test()
    (job,) = jobs_of(api, dag.dag_id)  # succeeded, and still there: the sensor deletes only on timeout
    delete_job(api, job["metadata"]["name"])
    assert task_states(dag_run) == {"submit": "success", "wait": "success"}


def test_a_bad_admission_timeout_names_the_field(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str], api: Any
) -> None:
    dag = write_dag(
        SENSOR_DAG,
        sensor="GangAdmissionSensor",
        workers=1,
        admission_timeout="soon",
        deferrable=False,
        mode="poke",
    )
    dag_run = dag.test()
    for job in jobs_of(api, dag.dag_id):
        delete_job(api, job["metadata"]["name"])
    assert task_states(dag_run) == {"submit": "success", "wait": "failed"}
    assert "admission_timeout='soon' is invalid" in capfd.readouterr().out
