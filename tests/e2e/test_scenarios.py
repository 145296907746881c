"""The mission scenarios end to end: DAG files run with ``dag.test()`` against the embedded cluster.

Seed sweep with ``.expand()``, queue timeout then retry then success, kill (sync ``on_kill`` and
the trigger's ``on_kill``), reattach after a crashed try, the sensors, and a closed queue. Each
runs waiting in the worker (``sync``) and in the triggerer (``deferrable``) where both exist.

The concurrent "gang scheduling disabled deadlocks the pool" scenario needs jobs submitted at the
same time, which ``dag.test()`` cannot do (it runs mapped task instances one after another): it
lives in ``test_dags_test_subprocess.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.exceptions import GangJobLost
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import TRY_NUMBER_LABEL
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.cluster import SimCluster
from tests.support.cluster import (
    NAMESPACE,
    NOTHING,
    all_running,
    delete_job,
    jobs_of,
    leftovers,
    running_gang,
)
from tests.support.dag_runs import MODES, read_json, run_seed_sweep, task_states
from tests.support.job_watches import JobEvent, JobEvents
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")


@pytest.fixture
def job_events(cluster: SimCluster) -> Iterator[JobEvents]:
    with JobEvents(cluster) as events:
        yield events


# --- 1. seed scenario with dynamic task mapping -----------------------------------------------


@MODES
def test_six_mapped_jobs_on_a_pool_that_fits_one_all_succeed_with_provider_gangs(
    write_dag: Callable[..., Any], api: k8s.ApiClient, tmp_path: Path, deferrable: bool
) -> None:
    run_seed_sweep(write_dag, tmp_path, gang="provider", deferrable=deferrable)


# --- 2. queue timeout, then retry, then success -----------------------------------------------

RETRY_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.retry import gang_retry_policy

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=2,
        retries=2, retry_delay=dt.timedelta(seconds=1),
        retry_policy=gang_retry_policy(admission_retry_delay=1) if __POLICY__ else None,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "0.3"}}},
    )
"""
BLOCKER_SECONDS = 6


@pytest.fixture
def busy_pool(api: k8s.ApiClient) -> Iterator[str]:
    """A gang job holding all 4 GPUs for 6 s."""
    with running_gang(api, "blocker", 4, BLOCKER_SECONDS) as name:
        yield name


# Each wait mode with each way to retry; CI runs one of each (plain retries in the worker, the
# retry policy deferred), the other two are slow (CI's time budget).
@pytest.mark.parametrize(
    ("deferrable", "policy"),
    [
        (False, False),
        pytest.param(True, False, marks=pytest.mark.slow),
        pytest.param(False, True, marks=pytest.mark.slow),
        (True, True),
    ],
    ids=["retries-sync", "retries-deferrable", "retry-policy-sync", "retry-policy-deferrable"],
)
def test_a_queue_timeout_deletes_the_job_and_a_later_try_succeeds(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    busy_pool: str,
    job_events: JobEvents,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
    policy: bool,
) -> None:
    """``dag.test()`` runs retries itself: a failed try with retries left becomes ``up_for_retry``
    and its loop schedules the next try once ``retry_delay`` has passed, in the same call."""
    dag = write_dag(RETRY_DAG, deferrable=deferrable, policy=policy)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success"}
    (ti,) = dag_run.get_task_instances()
    assert ti.try_number >= 2

    output = capfd.readouterr().out
    assert "GangAdmissionTimeout" in output
    assert "was not admitted" in output
    assert "a retry starts clean" in output

    events = job_events.of_dag(dag.dag_id)
    added = [event for event in events if event.type == "ADDED"]
    first = [event for event in added if event.labels[TRY_NUMBER_LABEL] == "1"]
    assert len(first) == 1, f"exactly one job of the first try, got {added}"
    # The first try's job was deleted before any later try submitted its own.
    first_deleted = events.index(JobEvent("DELETED", first[0].name, first[0].uid, first[0].labels))
    later = [i for i, event in enumerate(events) if event.type == "ADDED" and event.uid != first[0].uid]
    assert later, "no later try submitted a job"
    assert first_deleted < later[0]
    # One job per try, each deleted (timeouts by the operator, the success by delete_on_finish).
    assert [event.labels[TRY_NUMBER_LABEL] for event in added] == [
        str(n) for n in range(1, ti.try_number + 1)
    ]
    assert len({event.uid for event in added}) == len(added)


# --- 3. kill ----------------------------------------------------------------------------------


@dataclass
class FakeTaskInstance:
    """The parts of a runtime task instance that ``PyTorchJobOperator.execute`` uses."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    try_number: int = 1
    start_date: dt.datetime | None = None
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def test_on_kill_of_the_sync_operator_deletes_job_podgroup_and_pods(api: k8s.ApiClient) -> None:
    """Airflow calls ``on_kill`` on the instance that runs ``execute`` (in the task process, on
    SIGTERM). ``dag.test()`` runs a copy of the task in-process and offers no way to signal it,
    so this test runs ``execute`` of one operator in a thread, with a minimal context holding what
    the operator reads (``ti`` and ``run_id``; no task state store), and calls ``on_kill`` on that
    same instance while the job is running."""
    operator = PyTorchJobOperator(
        task_id="train",
        image="ghcr.io/acme/train:1",
        workers=1,
        resources={"nvidia.com/gpu": 1},
        poll_interval=0.2,
        admission_timeout=60,
        deferrable=False,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "120"}}},
    )
    ti = FakeTaskInstance(dag_id="e2e_kill", task_id="train", run_id="manual__kill-sync")
    context: Any = {"ti": ti, "run_id": ti.run_id}
    outcome: dict[str, BaseException | Any] = {}

    def run() -> None:
        try:
            outcome["result"] = operator.execute(context)
        except BaseException as error:
            outcome["error"] = error

    worker = threading.Thread(target=run, name="execute", daemon=True)
    worker.start()
    name = str(eventually(lambda: ti.xcoms.get("job_name"), timeout=20, message="job never submitted"))
    eventually(lambda: all_running(api, name, 2), timeout=20, message="job never ran")
    assert leftovers(api)["podgroups"] == [name]

    operator.on_kill()

    assert leftovers(api) == NOTHING
    worker.join(20)
    assert not worker.is_alive()
    # The waiting loop then sees its job gone (in Airflow the task process would exit first).
    assert isinstance(outcome.get("error"), GangJobLost)


SUBMIT_ONLY_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        wait_for_completion=False, wait_for_admission=False, poll_interval=0.2,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "120"}}},
    )
"""
USER_ACTION = "__airflow_user_action__"  # the message Airflow 3.3's triggerer cancels a trigger with


def test_on_kill_of_the_deferred_trigger_deletes_job_podgroup_and_pods(
    write_dag: Callable[..., Any], api: k8s.ApiClient
) -> None:
    """What Airflow 3.3's triggerer does when the user marks a deferred task failed or clears it:
    cancel the trigger's task with the user-action message, then ``await trigger.on_kill()``.
    ``dag.test()`` runs triggers inline and cannot be interrupted, so the test submits a job with a
    DAG (``wait_for_completion=False, wait_for_admission=False``), rebuilds the trigger from its
    serialized form as the triggerer does, runs it and kills it."""
    dag = write_dag(SUBMIT_ONLY_DAG)
    assert task_states(dag.test()) == {"train": "success"}
    (job,) = jobs_of(api, dag.dag_id)
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]

    built = GangJobTrigger(
        name=name,
        namespace=NAMESPACE,
        uid=uid,
        wait_for="both",
        gang_scheduling="provider",
        poll_interval=0.2,
        hook_kwargs=GangJobHook(conn_id="kubernetes_default").async_hook_kwargs(),
    )
    classpath, kwargs = built.serialize()
    assert classpath == "airflow_gang.triggers.gang.GangJobTrigger"
    trigger = GangJobTrigger(**kwargs)

    async def run_and_kill() -> list[Any]:
        events: list[Any] = []

        async def consume() -> None:
            async for event in trigger.run():
                events.append(event)

        running = asyncio.create_task(consume())
        await asyncio.to_thread(eventually, lambda: all_running(api, name, 2), 20, 0.05, "job never ran")
        assert not running.done()
        running.cancel(USER_ACTION)
        with pytest.raises(asyncio.CancelledError):
            await running
        await trigger.on_kill()
        return events

    assert asyncio.run(run_and_kill()) == []
    assert leftovers(api) == NOTHING


# --- 4. reattach after a crashed try ----------------------------------------------------------

REATTACH_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator


class CrashAfterSubmit(PyTorchJobOperator):
    # Try 1 submits (returning without waiting) and then dies as a killed worker would: no
    # cleanup, the job keeps running. Later tries are the unchanged operator.
    def execute(self, context):
        if context["ti"].try_number == 1:
            self.wait_for_completion = False
            self.wait_for_admission = False
            super().execute(context)
            raise RuntimeError("simulated worker crash right after submission")
        return super().execute(context)


with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = CrashAfterSubmit(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=60,
        retries=1, retry_delay=dt.timedelta(seconds=0),
        # Long enough to be still running when try 2 starts on a loaded machine ("live").
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "8"}}},
    )

    @task
    def record(result):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    record(train.output)
"""


@MODES
def test_a_retry_after_a_crashed_try_adopts_the_same_job(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    job_events: JobEvents,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    """The same task instance (same DAG run, task and map index) executes twice: try 1 submits and
    "crashes" (an exception right after submission, which runs no cleanup), then Airflow's retry
    runs try 2 in the same ``dag.test()`` call. Try 2 finds try 1's job through the task state
    store (Airflow 3.3 keeps its rows across tries) and adopts it: same uid, no second job."""
    out = tmp_path / "result.json"
    dag = write_dag(REATTACH_DAG, deferrable=deferrable, out=str(out))
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    train = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "train")
    assert train.try_number == 2

    added = job_events.added(dag.dag_id)
    assert len(added) == 1, f"expected one job, got {added}"
    result = read_json(out)
    assert result["uid"] == added[0].uid
    assert result["name"] == added[0].name
    assert result["state"] == "succeeded"
    assert added[0].labels[TRY_NUMBER_LABEL] == "1"

    output = capfd.readouterr().out
    assert "simulated worker crash right after submission" in output
    assert re.search(rf"reattaching to live PyTorchJob default/{added[0].name} from try 1", output)


# --- 5. sensors -------------------------------------------------------------------------------

SENSOR_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import GangAdmissionSensor, PyTorchJobSensor

JOB = "{{ ti.xcom_pull(task_ids='submit', key='job_name') }}"

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    submit = PyTorchJobOperator(
        task_id="submit", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        restart_policy="Never", wait_for_completion=False, wait_for_admission=__WAIT_FOR_ADMISSION__,
        deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=60,
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": "2", "sim.airflow-gang.io/exit-code": __EXIT_CODE__,
            "sim.airflow-gang.io/log": "SENSOR-LOG-MARKER",
        }}},
    )
    sensing = dict(poke_interval=0.2, timeout=60, mode=__MODE__, deferrable=__DEFERRABLE__)
    admitted = GangAdmissionSensor(task_id="admitted", job_name=JOB, **sensing)
    done = PyTorchJobSensor(task_id="done", job_name=JOB, **sensing)
    submit >> admitted >> done
"""
SENSOR_CASES = pytest.mark.parametrize(
    ("mode", "deferrable", "wait_for_admission"),
    [
        pytest.param("poke", False, True, id="poke-submit-admitted"),
        pytest.param("poke", False, False, id="poke-submit-only"),
        pytest.param("reschedule", False, True, id="reschedule-submit-admitted"),
        pytest.param("reschedule", False, False, id="reschedule-submit-only"),
        pytest.param("poke", True, True, id="deferrable-submit-admitted"),
        pytest.param("poke", True, False, id="deferrable-submit-only"),
    ],
)


def run_sensor_dag(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    *,
    mode: str,
    deferrable: bool,
    wait_for_admission: bool,
    exit_code: str,
) -> tuple[dict[str, str | None], Any]:
    dag = write_dag(
        SENSOR_DAG,
        mode=mode,
        deferrable=deferrable,
        wait_for_admission=wait_for_admission,
        exit_code=exit_code,
    )
    try:
        dag_run = dag.test()
    finally:
        # The sensors never delete the job: whoever submits with wait_for_completion=False
        # cleans up (here the test; in a DAG, a final task).
        for job in jobs_of(api, dag.dag_id):
            delete_job(api, job["metadata"]["name"])
    return task_states(dag_run), dag_run


@SENSOR_CASES
def test_sensors_finish_the_flow_of_a_job_submitted_without_waiting(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    capfd: pytest.CaptureFixture[str],
    mode: str,
    deferrable: bool,
    wait_for_admission: bool,
) -> None:
    """The job runs 2 s, so ``PyTorchJobSensor``'s first poke finds it running and the sensor
    really waits in its mode: rescheduled by ``dag.test()``'s loop, or deferred to its trigger."""
    states, dag_run = run_sensor_dag(
        write_dag, api, mode=mode, deferrable=deferrable, wait_for_admission=wait_for_admission, exit_code="0"
    )
    assert states == {"submit": "success", "admitted": "success", "done": "success"}
    submit = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "submit")
    assert submit.xcom_pull(task_ids="submit", key="return_value")["state"] == (
        "admitted" if wait_for_admission else "submitted"
    )
    output = capfd.readouterr().out
    assert ("marking task as UP_FOR_RESCHEDULE" in output) == (mode == "reschedule")
    assert ("Pausing task as DEFERRED" in output) == deferrable


@pytest.mark.parametrize(
    ("mode", "deferrable"),
    [("poke", False), ("poke", True)],
    ids=["sync", "deferrable"],
)
def test_the_job_sensor_fails_with_pytorchjobfailed_when_the_job_fails(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    capfd: pytest.CaptureFixture[str],
    mode: str,
    deferrable: bool,
) -> None:
    states, _ = run_sensor_dag(
        write_dag, api, mode=mode, deferrable=deferrable, wait_for_admission=True, exit_code="3"
    )
    assert states == {"submit": "success", "admitted": "success", "done": "failed"}
    output = capfd.readouterr().out
    assert "PyTorchJobFailed" in output
    assert "exited with code 3" in output
    assert "SENSOR-LOG-MARKER" in output


# --- 6. closed queue --------------------------------------------------------------------------

QUEUE_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        queue="research", deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=30,
    )
"""


def set_queue_state(api: k8s.ApiClient, queue: str, state: str) -> None:
    custom = k8s.CustomObjectsApi(api)
    current = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
    current["status"] = {**(current.get("status") or {}), "state": state}
    custom.replace_cluster_custom_object_status("scheduling.volcano.sh", "v1beta1", "queues", queue, current)


def queue_state(api: k8s.ApiClient, queue: str) -> str | None:
    found = k8s.CustomObjectsApi(api).get_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", queue
    )
    state: str | None = (found.get("status") or {}).get("state")
    return state


@pytest.fixture
def closed_research_queue(api: k8s.ApiClient) -> Iterator[str]:
    set_queue_state(api, "research", "Closed")
    try:
        assert queue_state(api, "research") == "Closed"
        yield "research"
    finally:
        set_queue_state(api, "research", "Open")
        eventually(lambda: queue_state(api, "research") == "Open", timeout=10, message="queue not reopened")


@MODES
def test_a_closed_queue_fails_the_task_with_a_clear_message(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    closed_research_queue: str,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    dag = write_dag(QUEUE_DAG, deferrable=deferrable)
    assert task_states(dag.test()) == {"train": "failed"}
    output = capfd.readouterr().out
    assert "GangSpecError" in output
    assert "queue='research' is Closed" in output
    assert "reopen it or pass another queue" in output
