"""``gang_scheduling="training-operator"`` on a training-operator started *without*
``--gang-scheduler-name=volcano`` (conftest's cluster): nobody makes a PodGroup, the pods go to the
default scheduler one by one, and the job is no gang at all.

The provider tells it from what it sees (pods, no PodGroup: an operator with the flag creates pods
only once its PodGroup is admitted), says so in the task log, and judges the job as a plain one:
a partly placed job is not admitted, so its admission timeout deletes it instead of the task
waiting for a training that cannot start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.gang_state import NOT_GANG_SCHEDULED
from tests.support.cluster import leftovers, running_gang
from tests.support.dag_runs import MODES, task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

JOB_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        gang_scheduling="training-operator", deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=__TIMEOUT__, retries=0,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "3"}}},
    )
"""


@pytest.fixture
def one_gpu_taken(api: k8s.ApiClient) -> Iterator[str]:
    """A one-replica gang job holding one of the pool's 4 GPUs for a minute."""
    with running_gang(api, "one-gpu", 1, 60) as name:
        yield name


@MODES
def test_on_a_free_pool_the_job_runs_and_the_log_says_it_is_no_gang(
    write_dag: Callable[..., Any], api: k8s.ApiClient, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    dag = write_dag(JOB_DAG, deferrable=deferrable, timeout=60)
    assert task_states(dag.test()) == {"train": "success"}
    assert NOT_GANG_SCHEDULED in capfd.readouterr().out


@MODES
def test_a_partly_placed_job_is_not_admitted_and_its_admission_timeout_deletes_it(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    one_gpu_taken: str,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    """3 GPUs free, 4 replicas: the default scheduler binds three and the fourth waits for ever —
    the deadlock this product exists to prevent, caught by the admission timeout."""
    dag = write_dag(JOB_DAG, deferrable=deferrable, timeout=6)
    assert task_states(dag.test()) == {"train": "failed"}
    output = capfd.readouterr().out
    assert "GangAdmissionTimeout" in output
    assert "bound=3/4" in output
    assert NOT_GANG_SCHEDULED in output
    # Deleted by its timeout: only the one-GPU job is left on the cluster.
    eventually(
        lambda: [name for name in leftovers(api)["pytorchjobs"] if name != one_gpu_taken] == [],
        timeout=20,
    )
