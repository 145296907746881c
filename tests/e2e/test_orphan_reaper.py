"""The orphan reaper against the real metadata database and the embedded cluster.

A DAG submits a long job and hands it on (``wait_for_completion=False``), so the job stays live
after the task ends and the task state store names it, exactly as when a task is failed from
outside while its job runs. The test then sets the task instance to each state in the metadata
database, as Airflow's scheduler or a killed worker's supervisor would, and sweeps: only the
states in which no try will ever wait for the job reap it, and only a live job is deleted.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.state.reaper import OrphanReaper, find_candidates
from tests.statsd_listener import airflow_sending_to
from tests.support.cluster import delete_job, jobs_of
from tests.support.dag_runs import task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

HANDED_ON_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        wait_for_completion=False, wait_for_admission=False, poll_interval=0.2,
        delete_on_finish=__DELETE_ON_FINISH__, restart_policy="Never",
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": str(__DURATION__),
            "sim.airflow-gang.io/exit-code": str(__EXIT_CODE__),
        }}},
    )
"""


def set_ti_state(dag_run: Any, task_id: str, state: str) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id).one()
        ti.state = state
        ti.end_date = dt.datetime.now(dt.UTC)


def live_job(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    duration: float = 300,
    *,
    delete_on_finish: str = "on_success",
    exit_code: int = 0,
) -> tuple[Any, str]:
    dag = write_dag(HANDED_ON_DAG, duration=duration, delete_on_finish=delete_on_finish, exit_code=exit_code)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success"}
    (job,) = jobs_of(api, dag.dag_id)
    return dag_run, job["metadata"]["name"]


def assert_kept_then_delete(api: k8s.ApiClient, dag_run: Any, name: str) -> None:
    """The reaper left the job alone; delete it so the test ends with an empty cluster."""
    assert [job["metadata"]["name"] for job in jobs_of(api, dag_run.dag_id)] == [name]
    delete_job(api, name)


def sweep() -> list[str]:
    reaper = OrphanReaper(interval=3600)
    return [candidate.name for candidate in reaper.sweep()]


@pytest.mark.parametrize("state", ["failed", "upstream_failed", "skipped", "removed"])
def test_a_live_job_whose_task_instance_no_try_will_wait_for_is_deleted(
    write_dag: Callable[..., Any], api: k8s.ApiClient, caplog: pytest.LogCaptureFixture, state: str
) -> None:
    dag_run, name = live_job(write_dag, api)
    set_ti_state(dag_run, "train", state)
    with caplog.at_level(logging.WARNING, logger="airflow_gang.state.reaper"):
        assert name in sweep()
    assert not jobs_of(api, dag_run.dag_id)
    assert f"deleting orphaned PyTorchJob default/{name}" in caplog.text
    assert f"{dag_run.dag_id}.train run {dag_run.run_id} ({state})" in caplog.text


def test_a_reaper_deletion_is_counted_in_the_schedulers_metrics(
    write_dag: Callable[..., Any], api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag_run, name = live_job(write_dag, api)
    set_ti_state(dag_run, "train", "failed")
    with airflow_sending_to(monkeypatch, core=True) as statsd:
        assert name in sweep()
        assert statsd.wait_for("airflow.gang.reaper_deletion") == [("airflow.gang.reaper_deletion", 1.0, "c")]


@pytest.mark.parametrize("state", ["up_for_retry", "success", "running", "deferred", "queued", "scheduled"])
def test_a_job_that_a_try_may_still_wait_for_or_adopt_is_kept(
    write_dag: Callable[..., Any], api: k8s.ApiClient, state: str
) -> None:
    dag_run, name = live_job(write_dag, api)
    set_ti_state(dag_run, "train", state)
    assert name not in sweep()
    assert_kept_then_delete(api, dag_run, name)


@pytest.mark.parametrize(
    ("delete_on_finish", "exit_code", "deleted"),
    [("never", 0, False), ("on_success", 0, True), ("on_success", 1, False), ("always", 1, True)],
)
def test_a_finished_job_is_deleted_only_as_its_delete_on_finish_says(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    caplog: pytest.LogCaptureFixture,
    delete_on_finish: str,
    exit_code: int,
    deleted: bool,
) -> None:
    """The task ended from outside after its job finished: the reaper does what the operator's
    ``delete_on_finish`` would have done at the end, nothing more."""
    dag_run, name = live_job(write_dag, api, 0.2, delete_on_finish=delete_on_finish, exit_code=exit_code)
    outcome = "Failed" if exit_code else "Succeeded"

    def finished() -> bool:
        (job,) = jobs_of(api, dag_run.dag_id)
        return (last_true_condition(job) or {}).get("type") == outcome

    eventually(finished, timeout=30, message=f"the handed-on job did not end {outcome}")
    set_ti_state(dag_run, "train", "failed")
    with caplog.at_level(logging.WARNING, logger="airflow_gang.state.reaper"):
        reaped = sweep()
    if deleted:
        assert reaped == [name]
        assert not jobs_of(api, dag_run.dag_id)
        assert f"per delete_on_finish={delete_on_finish}" in caplog.text
    else:
        assert name not in reaped
        assert_kept_then_delete(api, dag_run, name)


def test_a_job_of_another_uid_under_the_same_name_is_not_ours(
    write_dag: Callable[..., Any], api: k8s.ApiClient
) -> None:
    dag_run, name = live_job(write_dag, api)
    set_ti_state(dag_run, "train", "failed")
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    (candidate,) = [c for c in find_candidates(since) if c.name == name]
    impostor = OrphanReaper(
        interval=3600, finder=lambda _: [type(candidate)(**{**candidate.__dict__, "uid": "not-the-uid"})]
    )
    assert impostor.sweep() == []
    assert_kept_then_delete(api, dag_run, name)


def test_an_unreadable_cluster_leaves_the_candidate_for_the_next_sweep(
    write_dag: Callable[..., Any], api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag_run, name = live_job(write_dag, api)
    set_ti_state(dag_run, "train", "failed")
    reaper = OrphanReaper(interval=3600)
    reachable = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        '{"conn_type": "kubernetes", "extra": {"kube_config_path": "/nonexistent/kubeconfig"}}',
    )
    assert reaper.sweep() == []
    assert [job["metadata"]["name"] for job in jobs_of(api, dag_run.dag_id)] == [name]
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", reachable)
    assert [candidate.name for candidate in reaper.sweep()] == [name]
    assert not jobs_of(api, dag_run.dag_id)
