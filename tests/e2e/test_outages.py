"""A Kubernetes API that cannot be reached never fails a healthy wait early and never deletes its job.

The simulator injects the faults (docs/fault-injection.md) at the moment the scenario needs them:
an observer thread, with a user agent of its own that the faults spare, watches the cluster and
turns them on (a 503 storm for the provider's clients only, or the listener closed for everyone)
once the job reaches the wanted state, then off again. Everything runs under ``dag.test()``,
sync and deferrable; the real-stack chaos run covers the same under a real scheduler and
triggerer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.naming import DAG_ID_LABEL
from airflow_gang.reports.timeline import parse_time
from gang_sim.cluster import SimCluster
from tests.support.cluster import PYTORCHJOBS
from tests.support.dag_runs import task_states
from tests.support.job_watches import JobEvents

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
# The provider's clients: the sync `kubernetes` client's default user agent and the async pool's.
PROVIDER_CLIENTS = ["OpenAPI-Generator", "airflow-gang/"]
STORM = {"seed": 3, "clients": PROVIDER_CLIENTS, "errors": [{"rate": 1.0, "status": 503}]}
LISTENER_CLOSED = {"seed": 3, "outages": [{"start": 0, "duration": 9}]}

OUTAGE_DAG = """
import datetime as dt
import json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=__DEFERRABLE__, poll_interval=0.5, api_unavailable_timeout=__UNAVAILABLE__,
        admission_timeout=__ADMISSION__, retries=__RETRIES__,
        retry_delay=dt.timedelta(seconds=__RETRY_DELAY__),
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": __DURATION__}}},
    )

    @task
    def record(result):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    record(train.output)
"""


class Observer:
    """Watches the DAG's jobs with a client the faults spare, and injects faults on a condition."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.api = cluster.api_client()
        self.api.user_agent = "e2e-observer"
        self.fired = threading.Event()
        self.cleared = threading.Event()
        self._threads: list[threading.Thread] = []

    def jobs(self, dag_id: str) -> list[dict[str, Any]]:
        try:
            items: list[dict[str, Any]] = k8s.CustomObjectsApi(self.api).list_namespaced_custom_object(
                *PYTORCHJOBS, label_selector=f"{DAG_ID_LABEL}={dag_id}", _request_timeout=5
            )["items"]
        except Exception:  # the listener may be closed: that is the point
            return []
        return items

    def when(self, ready: Callable[[], bool], faults: dict[str, Any], seconds: float) -> None:
        """Once ``ready()``, apply ``faults`` for ``seconds``, then clear them."""

        def run() -> None:
            deadline = time.monotonic() + 90
            while not ready():
                if time.monotonic() > deadline:
                    return
                time.sleep(0.1)
            self.cluster.set_faults(faults)
            self.fired.set()
            time.sleep(seconds)
            self.cluster.clear_faults()
            self.cleared.set()

        thread = threading.Thread(target=run, name="fault-timer", daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        for thread in self._threads:
            thread.join(120)
        self.cluster.clear_faults()
        self.api.close()


@pytest.fixture
def observer(cluster: SimCluster) -> Iterator[Observer]:
    watching = Observer(cluster)
    yield watching
    watching.close()


def running(observer: Observer, dag_id: str) -> Callable[[], bool]:
    def check() -> bool:
        return any(
            condition["type"] == "Running" and condition["status"] == "True"
            for job in observer.jobs(dag_id)
            for condition in (job.get("status") or {}).get("conditions") or []
        )

    return check


def dag_values(out: Path, deferrable: bool, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "deferrable": deferrable,
        "unavailable": 120,
        "admission": 60,
        "retries": 0,
        "retry_delay": 0,
        "duration": "10",
        "out": str(out),
    }
    values.update(overrides)
    return values


# Each kind of outage in one mode each, plus the closed listener in the worker (CI time): the
# worker and the triggerer share the outage handling (airflow_gang.model.outage), and
# test_trigger_watches.py covers the trigger under both. (faults, deferrable, job seconds, seconds
# until the faults are cleared, outage episodes the wait notices.)
OUTAGES = pytest.mark.parametrize(
    ("faults", "deferrable", "duration", "seconds", "episodes"),
    [
        # A storm of 503s on new requests goes unnoticed, in the worker as in the triggerer: the
        # wait's watches stay open and it needs no read. The job is followed through it.
        pytest.param(STORM, False, "10", 6, 0, id="503-storm-sync"),
        # A closed listener drops the watches too: the wait reads, and rides the outage out.
        pytest.param(
            {"seed": 3, "outages": [{"start": 0, "duration": 5}]},
            True,
            "10",
            6,
            1,
            id="listener-closed-deferrable",
        ),
        # In the worker, a closed listener cuts the watches and the master's log stream and
        # refuses the wait's reads; a job of 4 s ends during the 3 s outage or just after it.
        pytest.param(
            {"seed": 3, "outages": [{"start": 0, "duration": 3}]}, False, "4", 3, 1, id="listener-closed-sync"
        ),
    ],
)


@OUTAGES
def test_an_outage_mid_wait_neither_fails_the_task_nor_deletes_the_job(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    observer: Observer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
    faults: dict[str, Any],
    duration: str,
    seconds: float,
    episodes: int,
) -> None:
    out = tmp_path / "result.json"
    dag = write_dag(OUTAGE_DAG, **dag_values(out, deferrable, duration=duration))
    observer.when(running(observer, dag.dag_id), faults, seconds=seconds)
    with JobEvents(cluster) as events:
        dag_run = dag.test()
    assert observer.fired.is_set(), "the faults never started: the job was never seen Running"
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    added = events.added(dag.dag_id)
    assert len(added) == 1, f"one job, never resubmitted: {added}"
    result = json.loads(out.read_text())
    assert result["uid"] == added[0].uid
    assert result["state"] == "succeeded"
    log = capfd.readouterr().out
    # One WARNING for the episode (not a line per retry), and the all-clear.
    assert log.count("Kubernetes API unavailable while waiting for PyTorchJob") == episodes, log[-3000:]
    assert ("Kubernetes API reachable again" in log) == bool(episodes)


# The deferrable case waits 27 s like the sync one; it runs with `make test-slow` (the trigger's
# own api_unavailable is tested in tests/e2e/test_trigger_watches.py in every run).
@pytest.mark.parametrize(
    "deferrable", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["sync", "deferrable"]
)
def test_an_outage_past_api_unavailable_timeout_fails_the_try_and_the_retry_reattaches(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    observer: Observer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    out = tmp_path / "result.json"
    values = dag_values(out, deferrable, unavailable=3, retries=1, retry_delay=10, duration="25")
    dag = write_dag(OUTAGE_DAG, **values)
    # The waits' watches ride a 503 storm on new requests unharmed (no read needed): an API
    # server that goes away drops them too.
    observer.when(running(observer, dag.dag_id), LISTENER_CLOSED, seconds=9)
    with JobEvents(cluster) as events:
        dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    train = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "train")
    assert train.try_number == 2
    added = events.added(dag.dag_id)
    assert len(added) == 1, f"the retry must reattach, not resubmit: {added}"
    assert [event.type for event in events.of_dag(dag.dag_id)].count("DELETED") <= 1  # delete_on_finish
    assert json.loads(out.read_text())["uid"] == added[0].uid
    log = capfd.readouterr().out
    assert "more than api_unavailable_timeout=3s" in log
    assert "Nothing was deleted" in log
    assert f"reattaching to live PyTorchJob default/{added[0].name} from try 1" in log


# The worker's wait in every make test; the trigger's is slow (CI's time budget): its outage
# handling runs in test_an_outage_mid_wait_neither_fails_the_task_nor_deletes_the_job's deferrable cases.
@pytest.mark.parametrize(
    "deferrable", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["sync", "deferrable"]
)
def test_a_gang_admitted_during_an_outage_counts_as_admitted_after_the_deadline(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    observer: Observer,
    tmp_path: Path,
    deferrable: bool,
) -> None:
    """The provider's clients lose the API right after submitting; the queue admits the gang
    meanwhile (the controllers are spared); the admission deadline passes during the outage.
    When the API is back the objects say "admitted" (at the PodGroup's condition time, before the
    deadline): the wait goes on and the job succeeds instead of being deleted as timed out."""
    out = tmp_path / "result.json"
    dag = write_dag(OUTAGE_DAG, **dag_values(out, deferrable, admission=4, duration="3"))
    observer.when(lambda: bool(observer.jobs(dag.dag_id)), STORM, seconds=8)
    with JobEvents(cluster) as events:
        dag_run = dag.test()
    assert observer.fired.is_set()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    assert len(events.added(dag.dag_id)) == 1
    result = json.loads(out.read_text())
    submitted, admitted = parse_time(result["submitted_at"]), parse_time(result["admitted_at"])
    assert submitted is not None
    assert admitted is not None
    assert (admitted - submitted).total_seconds() < 4, result
