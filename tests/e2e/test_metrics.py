"""The operator's metrics arrive at a StatsD server: a DAG run under ``dag.test()`` with Airflow's
metrics pointed at a listener as a task process sets them up (`tests.statsd_listener`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.statsd_listener import airflow_sending_to
from tests.support.dag_runs import task_states

pytestmark = pytest.mark.usefixtures("kube_connection")

DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

def sim(seconds):
    return {"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}}

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="fits", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        queue="research", poll_interval=0.2, pod_template=sim(1.5),
    ) >> PyTorchJobOperator(
        task_id="never_fits", image="ghcr.io/acme/train:1", workers=7, resources={"nvidia.com/gpu": 1},
        queue="research", poll_interval=0.2, admission_timeout=2, retries=1,
        retry_delay=dt.timedelta(seconds=0), deferrable=True, pod_template=sim(1),
    )
"""


def test_queue_wait_run_time_admission_timeouts_and_their_retry_are_sent(
    write_dag: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    dag = write_dag(DAG)
    with airflow_sending_to(monkeypatch) as statsd:
        dag_run = dag.test()
        assert task_states(dag_run) == {"fits": "success", "never_fits": "failed"}
        (queue_wait,) = statsd.wait_for("airflow.gang.queue_wait")
        (run_time,) = statsd.wait_for("airflow.gang.run_time")
        timeouts = statsd.wait_for("airflow.gang.admission_timeout", count=2)
        retries = statsd.wait_for("airflow.gang.admission_timeout_retry")
    assert queue_wait[2] == run_time[2] == "ms"
    assert 1000 <= run_time[1] < 30000
    assert len(timeouts) == 2  # both tries of never_fits
    assert len(retries) == 1  # the second try, after the first one's timeout
