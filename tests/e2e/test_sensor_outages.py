"""The sensors ride out an unreachable API server as the operator does, and never delete for it.

A gang job runs (submitted with the provider's hook); the simulator closes its API listener for
a few seconds (docs/fault-injection.md), and the sensors look meanwhile:

- a look through an outage says so once (one WARNING for the episode, the hook's own retries
  at DEBUG) and succeeds once the API is back, in poke/reschedule mode (``poke``) and in the
  deferrable sensor's first look (``execute``); ``api_unavailable_timeout=None`` is accepted;
- an outage longer than ``api_unavailable_timeout`` fails the sensor task with
  `GangApiUnavailable` under ``dag.test()``, and the job is left running.

Airflow's structlog writes the task's and the hook's log lines to standard output, so they are
read with ``capfd``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import cleanup
from airflow_gang.sensors.gang import GangAdmissionSensor, PyTorchJobSensor
from gang_sim.cluster import SimCluster
from tests.support.dag_runs import task_states
from tests.support.submission import gang_spec, submit
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
PYTORCHJOBS = ("kubeflow.org", "v1", NAMESPACE, "pytorchjobs")
WARNING_LINE = re.compile(r"\[warning\s*\] (.*)")


def outage(seconds: float) -> dict[str, Any]:
    return {"outages": [{"start": 0, "duration": seconds}]}


def close_listener(cluster: SimCluster, seconds: float) -> None:
    """Close the API server's listener for ``seconds``; return once connections are refused (the
    server closes it on its own loop, a moment after the spec is applied)."""
    cluster.set_faults(outage(seconds))
    address = urlsplit(cluster.url)
    host, port = address.hostname or "127.0.0.1", address.port or 443

    def refused() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
        except ConnectionRefusedError:
            return True
        return False

    eventually(refused, 2, 0.01, "the API server's listener never closed")


def warnings(output: str) -> list[str]:
    """The WARNING lines about the Kubernetes API: the outage's (``Kubernetes API unavailable``)
    and the hook's retries (``kubernetes API get ... failed ...; retrying``). Other components
    warn about other things (Airflow about ``execute`` called outside its task runner)."""
    found = (match.group(1) for line in output.splitlines() if (match := WARNING_LINE.search(line)))
    return [line for line in found if "kubernetes api" in line.lower()]


@pytest.fixture
def running_job(cluster: SimCluster, api: k8s.ApiClient) -> Iterator[dict[str, Any]]:
    """A gang job whose replicas run for a minute; at the end, faults off and the job deleted."""
    hook = GangJobHook(conn_id="kubernetes_default")
    name = "sensed"
    job = submit(name, gang_spec(), namespace=NAMESPACE)
    eventually(lambda: GangAdmissionSensor(task_id="ready", job_name=name).poke({}), 20, 0.1)  # type: ignore[arg-type]
    yield job
    cluster.clear_faults()
    cleanup.delete_gang(hook, name, NAMESPACE, job["metadata"]["uid"], timeout=30, reason="test cleanup")


def untouched(api: k8s.ApiClient, job: dict[str, Any]) -> bool:
    found = k8s.CustomObjectsApi(api).get_namespaced_custom_object(*PYTORCHJOBS, job["metadata"]["name"])
    return found["metadata"]["uid"] == job["metadata"]["uid"] and "deletionTimestamp" not in found["metadata"]


def test_a_poke_through_an_outage_warns_once_and_succeeds(
    running_job: dict[str, Any], cluster: SimCluster, api: k8s.ApiClient, capfd: pytest.CaptureFixture[str]
) -> None:
    sensor = GangAdmissionSensor(
        task_id="wait", job_name=running_job["metadata"]["name"], api_unavailable_timeout=None
    )
    capfd.readouterr()
    close_listener(cluster, 2.5)

    assert sensor.poke({}) is True  # type: ignore[arg-type]

    assert cluster.fault_counts()["outage"] >= 1
    lines = warnings(capfd.readouterr().out)
    assert len(lines) == 1, f"one WARNING for the outage, not one per retry: {lines}"
    assert lines[0].startswith("Kubernetes API unavailable while waiting for PyTorchJob sensed since")
    assert "the wait goes on forever" in lines[0]
    assert untouched(api, running_job)


def test_a_deferrable_sensors_first_look_through_an_outage_warns_once(
    running_job: dict[str, Any], cluster: SimCluster, api: k8s.ApiClient, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    class TaskInstance:  # the one thing the sensor asks of its context: XCom for the links
        def xcom_push(self, key: str, value: Any) -> None:
            pass

    sensor = PyTorchJobSensor(
        task_id="wait", job_name=running_job["metadata"]["name"], deferrable=True, api_unavailable_timeout=30
    )
    capfd.readouterr()
    close_listener(cluster, 2.5)

    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({"ti": TaskInstance()})  # type: ignore[typeddict-item]

    assert deferred.value.trigger.uid == running_job["metadata"]["uid"]  # type: ignore[attr-defined]
    lines = warnings(capfd.readouterr().out)
    assert len(lines) == 1, f"one WARNING for the outage, not one per retry: {lines}"
    assert lines[0].startswith("Kubernetes API unavailable while waiting for PyTorchJob sensed since")
    assert untouched(api, running_job)


SENSOR_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.sensors.gang import PyTorchJobSensor

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobSensor(
        task_id="wait", job_name=__JOB__, poke_interval=0.5, timeout=60, api_unavailable_timeout=2,
    )
"""


def test_an_outage_past_api_unavailable_timeout_fails_the_sensor_and_deletes_nothing(
    running_job: dict[str, Any],
    cluster: SimCluster,
    api: k8s.ApiClient,
    write_dag: Callable[..., Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    dag = write_dag(SENSOR_DAG, job=running_job["metadata"]["name"])
    cluster.set_faults(outage(30))
    try:
        dag_run = dag.test()
    finally:
        cluster.clear_faults()

    assert task_states(dag_run) == {"wait": "failed"}
    output = capfd.readouterr().out
    assert "GangApiUnavailable" in output
    assert "more than api_unavailable_timeout=2s" in output
    assert "Nothing was deleted" in output
    assert eventually(lambda: untouched(api, running_job), 10, 0.1)
