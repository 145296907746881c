"""The sensors' ``timeout``: `AirflowSensorTimeout` in poke and deferrable mode alike, so that
``soft_fail=True`` skips the task instead of failing it.

A job that runs 60 s is submitted without waiting; `PyTorchJobSensor` gives up on it after 4 s.
The sensors never delete what they watch, so the test deletes the job afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.gang_state import last_true_condition
from tests.support.cluster import delete_job, jobs_of
from tests.support.dag_runs import task_states

pytestmark = pytest.mark.usefixtures("kube_connection")

SENSOR_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import PyTorchJobSensor

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    submit = PyTorchJobOperator(
        task_id="submit", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        wait_for_completion=False, wait_for_admission=False,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "60"}}},
    )
    wait = PyTorchJobSensor(
        task_id="wait", job_name="{{ ti.xcom_pull(task_ids='submit', key='job_name') }}",
        deferrable=__DEFERRABLE__, poke_interval=0.5, timeout=4, soft_fail=__SOFT_FAIL__,
    )
    submit >> wait
"""
TIMEOUT_SECONDS = 4
# Skipped for the timeout: poke mode says so; a deferred sensor's resume turns the provider's
# AirflowSensorTimeout into Airflow's generic soft_fail skip.
SKIPPED = {
    False: re.compile(r"Skipping task\..*reason='Sensor has timed out; run duration of [\d.]+ seconds"),
    True: re.compile(r"Skipping task\..*reason='Skipping due to soft_fail is set to True\.'"),
}
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
# What each mode says when the sensor's timeout passes (Airflow's poke loop; the provider's
# execute_complete on the trigger's execution_timeout event).
TIMED_OUT = {
    False: re.compile(
        r"Sensor has timed out; run duration of [\d.]+ seconds exceeds the specified timeout of 4"
    ),
    True: re.compile(
        r"AirflowSensorTimeout: sensor timeout of 4(\.0)?s reached: waiting for PyTorchJob default/"
    ),
}


def run_timing_out_sensor(
    write_dag: Callable[..., Any], api: k8s.ApiClient, *, deferrable: bool, soft_fail: bool
) -> tuple[dict[str, str | None], Any]:
    """Run the DAG; check the job outlived the sensor untouched, then delete it."""
    dag = write_dag(SENSOR_DAG, deferrable=deferrable, soft_fail=soft_fail)
    try:
        dag_run = dag.test()
        (job,) = jobs_of(api, dag.dag_id)
        # The sensor gave up at its timeout, long before the 60 s job ended, and deleted nothing.
        assert "deletionTimestamp" not in job["metadata"]
        assert (last_true_condition(job) or {}).get("type") != "Succeeded"
    finally:
        for job in jobs_of(api, dag.dag_id):
            delete_job(api, job["metadata"]["name"])
    wait = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "wait")
    assert wait.end_date is not None
    assert wait.start_date is not None
    # It waited its timeout, and not for the job (which runs 60 s).
    assert TIMEOUT_SECONDS - 0.5 <= (wait.end_date - wait.start_date).total_seconds() < 30
    return task_states(dag_run), dag_run


@MODES
def test_a_sensor_timeout_with_soft_fail_skips_the_task(
    write_dag: Callable[..., Any], api: k8s.ApiClient, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    states, _ = run_timing_out_sensor(write_dag, api, deferrable=deferrable, soft_fail=True)
    assert states == {"submit": "success", "wait": "skipped"}
    output = capfd.readouterr().out
    assert ("Pausing task as DEFERRED" in output) == deferrable
    assert SKIPPED[deferrable].search(output), output[-3000:]


@MODES
def test_a_sensor_timeout_without_soft_fail_fails_the_task(
    write_dag: Callable[..., Any], api: k8s.ApiClient, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    states, _ = run_timing_out_sensor(write_dag, api, deferrable=deferrable, soft_fail=False)
    assert states == {"submit": "success", "wait": "failed"}
    output = capfd.readouterr().out
    assert ("Pausing task as DEFERRED" in output) == deferrable
    assert TIMED_OUT[deferrable].search(output), output[-3000:]
