"""Extra links: stored before any wait, so they resolve for queued, running and failed jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.metadata import xcom_value
from tests.support.cluster import delete_job
from tests.support.dag_runs import task_states, xcom

pytestmark = pytest.mark.usefixtures("kube_connection")

LINK_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=__WORKERS__,
        resources={"nvidia.com/gpu": 1}, deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=__ADMISSION_TIMEOUT__, wait_for_completion=__WAIT_FOR_COMPLETION__,
        wait_for_admission=__WAIT_FOR_ADMISSION__, retries=0, restart_policy="Never",
        delete_on_finish="always",
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": "0.3", "sim.airflow-gang.io/exit-code": __EXIT_CODE__}}},
    )
"""


def links_of(dag_run: Any) -> tuple[str, str, str]:
    return (
        xcom_key(dag_run, "job_name"),
        xcom_key(dag_run, "_link_GangJobLink"),
        xcom_key(dag_run, "_link_KubernetesDashboardLink"),
    )


def xcom_key(dag_run: Any, key: str) -> Any:
    return xcom_value(dag_run.dag_id, dag_run.run_id, "train", key)


@pytest.fixture
def configured_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    monkeypatch.setenv(
        "AIRFLOW__GANG__DASHBOARD_URL_TEMPLATE",
        "https://dash.example.com/#/pod?namespace={namespace}&job={name}",
    )


def expected(name: str) -> tuple[str, str, str]:
    return (
        name,
        f"https://airflow.example.com/gang/jobs/default/{name}",
        f"https://dash.example.com/#/pod?namespace=default&job={name}",
    )


@pytest.mark.usefixtures("configured_links")
@pytest.mark.parametrize(
    ("workers", "deferrable", "wait_for_admission", "state"),
    [(4, False, False, "submitted"), (1, False, True, "admitted"), (1, True, True, "admitted")],
    ids=["queued", "running-sync", "running-deferrable"],
)
def test_links_of_a_job_that_is_still_queued_or_running(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    workers: int,
    deferrable: bool,
    wait_for_admission: bool,
    state: str,
) -> None:
    """The task ends early (``wait_for_completion=False``): once submitted, its 5-GPU gang still
    waiting in a 4-GPU pool, or once its gang is admitted and running."""
    dag = write_dag(
        LINK_DAG,
        workers=workers,
        deferrable=deferrable,
        admission_timeout=60,
        wait_for_completion=False,
        wait_for_admission=wait_for_admission,
        exit_code="0",
    )
    dag_run = dag.test()
    name = xcom_key(dag_run, "job_name")
    try:
        assert task_states(dag_run) == {"train": "success"}
        assert xcom(dag_run, "train")["state"] == state
        assert links_of(dag_run) == expected(name)
    finally:
        delete_job(api, name)


@pytest.mark.usefixtures("configured_links")
@pytest.mark.parametrize(
    ("workers", "exit_code", "admission_timeout"),
    [(1, "3", 60), (4, "0", 2)],
    ids=["replica-failed", "admission-timeout"],
)
def test_links_survive_a_failed_deferred_task(
    write_dag: Callable[..., Any], workers: int, exit_code: str, admission_timeout: int
) -> None:
    dag = write_dag(
        LINK_DAG,
        workers=workers,
        deferrable=True,
        admission_timeout=admission_timeout,
        wait_for_completion=True,
        wait_for_admission=True,
        exit_code=exit_code,
    )
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "failed"}
    assert links_of(dag_run) == expected(xcom_key(dag_run, "job_name"))


def test_without_configuration_the_gang_link_is_relative_and_the_dashboard_link_explains(
    write_dag: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    dag = write_dag(
        LINK_DAG,
        workers=1,
        deferrable=True,
        admission_timeout=60,
        wait_for_completion=True,
        wait_for_admission=True,
        exit_code="0",
    )
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success"}
    name, gang, dashboard = links_of(dag_run)
    assert gang == f"/gang/jobs/default/{name}"
    # Not a dead button: the job's page, which says which option points it at a dashboard.
    assert dashboard == f"/gang/jobs/default/{name}#kubernetes-dashboard-not-configured"


SENSOR_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import GangAdmissionSensor

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    submit = PyTorchJobOperator(
        task_id="submit", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        wait_for_completion=False, wait_for_admission=False, delete_on_finish="always",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "0.3"}}},
    )
    admitted = GangAdmissionSensor(
        task_id="train", job_name="{{ ti.xcom_pull(task_ids='submit', key='job_name') }}",
        deferrable=__DEFERRABLE__, poke_interval=0.2,
    )
    submit >> admitted
"""


@pytest.mark.usefixtures("configured_links")
@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_sensor_links_point_at_the_job_it_waits_for(
    write_dag: Callable[..., Any], api: k8s.ApiClient, deferrable: bool
) -> None:
    dag = write_dag(SENSOR_DAG, deferrable=deferrable)
    dag_run = dag.test()
    name = xcom_key(dag_run, "job_name")
    try:
        assert task_states(dag_run) == {"submit": "success", "train": "success"}
        assert links_of(dag_run) == expected(name)
    finally:
        delete_job(api, name)
