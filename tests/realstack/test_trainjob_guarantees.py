"""The PyTorchJob guarantee tests of this tier, for Kubeflow Trainer v2 TrainJobs (issue 32), under
a real scheduler, triggerer and api-server (the package's `stack`, see conftest.py):

- the API server goes away while a deferred and a sync TrainJob train: neither wait fails, none
  deletes its job, both tasks succeed on their first and only TrainJob (twin of the outage riding
  of tests/e2e/test_outages.py and the real-stack chaos run);
- a task waiting in its worker is SIGKILLed mid-wait: its retry reattaches to the TrainJob of the
  killed try, and no other TrainJob is ever created (twin of test_process_faults.py's);
- a deferred task failed in the database and a sync task's process SIGKILLed: the orphan reaper
  (or the cancelled trigger) deletes their TrainJobs (twin of test_deployment.py's);
- a sync TrainJob task marked failed: its TrainJob is deleted (test_trainjobs.py marks a
  deferred one);
- the triggerer is SIGKILLed while three TrainJob gangs wait deferred and a new one starts: the
  two that fit succeed on their only TrainJob, the one never admitted fails at the deadline set
  before the kill (twin of test_process_faults.py's, which every run takes: this one waits out a
  50 s admission timeout, so it is slow).

A watch on the cluster records every TrainJob the DAG creates or deletes, so "one job, never
deleted early" is seen, not inferred from what is left at the end. Each test ends with no
TrainJob, JobSet, PodGroup or pod left (conftest's `nothing_left_behind`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from airflow_gang.model.naming import DAG_ID_LABEL, TASK_ID_LABEL, TRY_NUMBER_LABEL, safe_label_value
from airflow_gang.reports.timeline import parse_time
from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from tests.realstack.conftest import REAPER_INTERVAL, TRAINJOBS
from tests.support.cluster import trainjobs_of
from tests.support.realstack import (
    ADMISSION_TIMEOUT,
    DELETE_SLACK,
    DOWN_SECONDS,
    RESUME_SLACK,
    TAKEOVER,
    TRIGGER_STARTED,
    component_logs,
    metadata_db,
    pid_of_task,
    result_of,
    utc_now,
)
from tests.waiting import eventually

OUTAGE_DAG = "rs_trainjob_outage"
SYNC_KILL_DAG = "rs_trainjob_sync_task_kill"
LONG_DAG = "rs_trainjob_long_both"
TRIGGERER_DAG = "rs_trainjob_triggerer_kill"
FITTING = ("fits_0", "fits_1")
NEVER_ADMITTED = "never_admitted"  # a 5-node gang on the 4-GPU pool
MODES = ("deferred", "in_worker")
NODES = 2  # num_nodes of the outage, sync-kill and long DAGs' TrainJobs
OUTAGE_SECONDS = 8.0
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every pod of a TrainJob's JobSet


@dataclass(frozen=True)
class TrainJobEvent:
    type: str  # ADDED or DELETED
    task_id: str
    try_number: str
    uid: str
    name: str
    finished: str | None  # the condition (Complete/Failed) true on the object at that event


@dataclass
class TrainJobEvents:
    """TrainJobs of one DAG seen ADDED or DELETED by a watch, in order."""

    seen: list[TrainJobEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def of(self, task_id: str, event_type: str) -> list[TrainJobEvent]:
        return [event for event in self.seen if event.task_id == task_id and event.type == event_type]


def finished_condition(job: dict[str, Any]) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


@contextmanager
def trainjob_events(api: k8s.ApiClient, dag_id: str) -> Iterator[TrainJobEvents]:
    """Watch every TrainJob of ``dag_id`` created or deleted while the block runs.

    A list gives the starting resourceVersion; a watch cut (by an outage too) resumes from the
    last version it saw, so nothing is missed however briefly it lived. A ``410 Gone`` would lose
    events: it is recorded as an error, which the tests assert there is none of.
    """
    custom = k8s.CustomObjectsApi(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"
    listed = custom.list_namespaced_custom_object(*TRAINJOBS, label_selector=selector)
    found = TrainJobEvents()
    for job in listed["items"]:
        found.errors.append(f"TrainJob {job['metadata']['name']} existed before the test")
    version = listed["metadata"]["resourceVersion"]
    stop = threading.Event()

    def follow() -> None:
        nonlocal version
        while not stop.is_set():
            try:
                for event in k8s_watch.Watch().stream(
                    custom.list_namespaced_custom_object,
                    *TRAINJOBS,
                    label_selector=selector,
                    resource_version=version,
                    timeout_seconds=2,
                    _request_timeout=5,
                ):
                    job = event["object"]
                    metadata = job["metadata"]
                    version = metadata.get("resourceVersion", version)
                    if event["type"] in ("ADDED", "DELETED"):
                        labels = metadata.get("labels") or {}
                        found.seen.append(
                            TrainJobEvent(
                                event["type"],
                                labels.get(TASK_ID_LABEL, "?"),
                                labels.get(TRY_NUMBER_LABEL, "?"),
                                metadata["uid"],
                                metadata["name"],
                                finished_condition(job),
                            )
                        )
            except k8s.ApiException as error:
                if error.status == 410:
                    found.errors.append(repr(error))
                    return
                stop.wait(0.5)
            except Exception:  # the listener is down (an outage): resume once it is back
                stop.wait(0.5)

    watcher = threading.Thread(target=follow, name=f"watch-{dag_id}", daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        stop.set()
        watcher.join(timeout=10)


def trainjob_of(api: k8s.ApiClient, dag_id: str, task_id: str) -> dict[str, Any] | None:
    jobs = [
        job for job in trainjobs_of(api, dag_id) if job["metadata"]["labels"].get(TASK_ID_LABEL) == task_id
    ]
    assert len(jobs) <= 1, [job["metadata"]["name"] for job in jobs]
    return jobs[0] if jobs else None


def live_trainjob(api: k8s.ApiClient, dag_id: str, task_id: str) -> dict[str, Any]:
    job = eventually(
        lambda: trainjob_of(api, dag_id, task_id), timeout=60, message=f"no TrainJob for {task_id}"
    )
    assert job is not None
    return job


def all_nodes_running(api: k8s.ApiClient, name: str) -> bool:
    """Every node's pod of the TrainJob is Running: the gang was admitted and trains (a real
    TrainJob carries no condition while it runs, so the pods say it)."""
    pods = (
        k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    )
    return len(pods) == NODES and all(pod.status.phase == "Running" for pod in pods)


def training(api: k8s.ApiClient, job: dict[str, Any]) -> None:
    name = job["metadata"]["name"]
    eventually(partial(all_nodes_running, api, name), timeout=60, message=f"TrainJob {name} never ran")


def trigger_waits(stack: AirflowStack, dag_id: str, run_id: str, task_id: str, name: str) -> bool:
    """The triggerer started the task's trigger, which has reported on its TrainJob."""
    log = stack.client.task_log(dag_id, run_id, task_id, 1)
    started = list(TRIGGER_STARTED.finditer(log))
    return len(started) == 1 and name in log[started[0].end() :]


def api_answers(api: k8s.ApiClient) -> bool:
    try:
        k8s.CoreV1Api(api).list_namespaced_pod("default", limit=1, _request_timeout=2)
    except Exception:  # the listener is still down
        return False
    return True


def trainjob_gone(api: k8s.ApiClient, dag_id: str, name: str, timeout: float) -> None:
    eventually(
        lambda: name not in [job["metadata"]["name"] for job in trainjobs_of(api, dag_id)],
        timeout=timeout,
        message=f"TrainJob {name} still there",
    )


def test_an_api_outage_is_ridden_out_by_deferred_and_sync_trainjob_waits(
    stack: AirflowStack, api: k8s.ApiClient, cluster: SimCluster
) -> None:
    client = stack.client
    began = time.monotonic()
    with trainjob_events(api, OUTAGE_DAG) as events:
        run_id = client.trigger(OUTAGE_DAG)
        client.wait_for_task_state(OUTAGE_DAG, run_id, "deferred", {"deferred"}, timeout=90)
        client.wait_for_task_state(OUTAGE_DAG, run_id, "in_worker", {"running"}, timeout=90)
        jobs = {task_id: live_trainjob(api, OUTAGE_DAG, task_id) for task_id in MODES}
        for job in jobs.values():
            training(api, job)
        # The outage must hit a trigger waiting in the triggerer, not one still starting.
        eventually(
            partial(
                trigger_waits, stack, OUTAGE_DAG, run_id, "deferred", jobs["deferred"]["metadata"]["name"]
            ),
            timeout=30,
            interval=0.5,
            message="the trigger of the deferred task never started",
        )
        # Both still train when the listener closes: the waits span the outage.
        for task_id in MODES:
            current = trainjob_of(api, OUTAGE_DAG, task_id)
            assert current is not None
            assert finished_condition(current) is None, f"{task_id} finished before the outage: {current}"
        outages = cluster.fault_counts().get("outage", 0)
        try:
            cluster.set_faults({"seed": 32, "outages": [{"start": 0, "duration": OUTAGE_SECONDS}]})
            eventually(
                lambda: cluster.fault_counts().get("outage", 0) > outages,
                timeout=10,
                interval=0.1,
                message="the outage never began",
            )
            outage_began = time.monotonic()
            time.sleep(1)  # the listener is down now; wait until it listens again
            eventually(partial(api_answers, api), timeout=60, interval=0.5, message="the API never came back")
            outage_lasted = time.monotonic() - outage_began
        finally:
            cluster.clear_faults()
        state = client.wait_for_run(OUTAGE_DAG, run_id, timeout=120)
    print(f"outage of {outage_lasted:.0f}s; test took {time.monotonic() - began:.0f}s")

    tis = {ti["task_id"]: ti for ti in client.task_instances(OUTAGE_DAG, run_id)}
    summary = {task_id: (ti["state"], ti["try_number"]) for task_id, ti in tis.items()}
    assert summary == {"deferred": ("success", 1), "in_worker": ("success", 1)}, component_logs(stack)
    assert state == "success"
    assert events.errors == []
    for task_id, job in jobs.items():
        uid = job["metadata"]["uid"]
        # One TrainJob per task, never resubmitted; deleted, if at all, only once it had
        # completed (delete_on_finish), never because the API could not be read.
        assert [(event.try_number, event.uid) for event in events.of(task_id, "ADDED")] == [("1", uid)], (
            events.seen
        )
        assert all(event.finished == "Complete" for event in events.of(task_id, "DELETED")), events.seen
        value = result_of(stack, OUTAGE_DAG, run_id, task_id)
        assert (value["uid"], value["state"]) == (uid, "succeeded"), value
        log = client.task_log(OUTAGE_DAG, run_id, task_id, 1)
        # The wait noticed the outage (its reads were refused) and went on once it was over.
        assert "Kubernetes API unavailable while waiting for" in log, log[-3000:]
        assert "Kubernetes API reachable again" in log, log[-3000:]
        assert "GangApiUnavailable" not in log


def test_a_sync_trainjob_task_killed_mid_wait_is_retried_on_the_same_trainjob(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    began = time.monotonic()
    with trainjob_events(api, SYNC_KILL_DAG) as events:
        run_id = client.trigger(SYNC_KILL_DAG)
        running = client.wait_for_task_state(SYNC_KILL_DAG, run_id, "train", {"running"}, timeout=90)
        job = live_trainjob(api, SYNC_KILL_DAG, "train")
        # Mid-wait: the gang is admitted and training when the task process dies.
        training(api, job)
        pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # an OOM kill: no on_kill, no code of ours runs
        state = client.wait_for_run(SYNC_KILL_DAG, run_id, timeout=120)
    print(f"test took {time.monotonic() - began:.0f}s")

    assert state == "success", component_logs(stack)
    ti = client.task_instance(SYNC_KILL_DAG, run_id, "train")
    assert ti["try_number"] == 2
    assert events.errors == []
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    # Exactly one TrainJob, created by try 1, ever existed for the task.
    assert [(e.task_id, e.try_number, e.uid) for e in events.of("train", "ADDED")] == [("train", "1", uid)]
    assert all(event.finished == "Complete" for event in events.of("train", "DELETED")), events.seen
    value = result_of(stack, SYNC_KILL_DAG, run_id, "train")
    assert (value["uid"], value["name"], value["state"]) == (uid, name, "succeeded"), value
    retry_log = client.task_log(SYNC_KILL_DAG, run_id, "train", 2)
    assert f"reattaching to live TrainJob default/{name} from try 1" in retry_log, retry_log[-3000:]
    assert "submitted TrainJob" not in retry_log


def test_the_trainjobs_of_tasks_failed_from_outside_are_reaped(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    run_id = client.trigger(LONG_DAG)
    client.wait_for_task_state(LONG_DAG, run_id, "deferred", {"deferred"}, timeout=90)
    running = client.wait_for_task_state(LONG_DAG, run_id, "in_worker", {"running"}, timeout=90)
    deferred_job, running_job = (
        live_trainjob(api, LONG_DAG, task_id)["metadata"]["name"] for task_id in MODES
    )

    # What a scheduler race or a lost heartbeat does: the state changes, no task code runs.
    metadata_db(
        stack,
        "UPDATE task_instance SET state='failed', end_date=CURRENT_TIMESTAMP "
        "WHERE dag_id=:dag_id AND run_id=:run_id AND task_id='deferred'",
        dag_id=LONG_DAG,
        run_id=run_id,
    )
    trainjob_gone(api, LONG_DAG, deferred_job, timeout=REAPER_INTERVAL * 10)

    pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # an OOM kill: no on_kill, the supervisor reports the try failed
    trainjob_gone(api, LONG_DAG, running_job, timeout=REAPER_INTERVAL * 10)
    assert client.wait_for_run(LONG_DAG, run_id, timeout=60) == "failed"
    scheduler = stack.component_log("scheduler")
    # The triggerer cancels the trigger of a task instance that left `deferred`: its on_kill and
    # the reaper race for the deferred TrainJob; either is right.
    trigger_logs = stack.component_log("triggerer") + client.task_log(LONG_DAG, run_id, "deferred", 1)
    deleted_by_trigger = f"task killed: deleting TrainJob default/{deferred_job}" in trigger_logs
    assert deleted_by_trigger or f"deleting orphaned TrainJob default/{deferred_job}" in scheduler
    # A killed task process runs no code of ours: only the reaper can delete its TrainJob.
    assert f"deleting orphaned TrainJob default/{running_job}" in scheduler


def test_marking_a_sync_trainjob_task_failed_deletes_its_trainjob(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    run_id = client.trigger(LONG_DAG)
    client.wait_for_task_state(LONG_DAG, run_id, "deferred", {"deferred"}, timeout=90)
    client.wait_for_task_state(LONG_DAG, run_id, "in_worker", {"running"}, timeout=90)
    deferred_job, running_job = (
        live_trainjob(api, LONG_DAG, task_id)["metadata"]["name"] for task_id in MODES
    )
    started = time.monotonic()
    client.set_task_state(LONG_DAG, run_id, "in_worker", "failed")
    trainjob_gone(api, LONG_DAG, running_job, timeout=60)
    print(f"sync TrainJob gone {time.monotonic() - started:.1f}s after the task was marked failed")
    # The deferred one was tested in test_trainjobs.py; it ends the run here.
    client.set_task_state(LONG_DAG, run_id, "deferred", "failed")
    trainjob_gone(api, LONG_DAG, deferred_job, timeout=30)
    assert client.wait_for_run(LONG_DAG, run_id, timeout=60) == "failed"
    # The task instance is failed before its process is: the task's on_kill and the orphan
    # reaper race for the TrainJob; either is right.
    log = client.task_log(LONG_DAG, run_id, "in_worker", 1)
    deleted_by_task = f"deleting TrainJob default/{running_job}" in log
    reaped = f"deleting orphaned TrainJob default/{running_job}" in stack.component_log("scheduler")
    assert deleted_by_task or reaped, log[-3000:]


@pytest.mark.slow
def test_a_triggerer_killed_while_trainjob_gangs_wait_deferred_is_replaced_and_every_wait_ends_right(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    """The never-admitted gang asks more nodes than the pool has (not a capped queue, as the
    PyTorchJob twin does): the guarantee is the triggerer handover, not where the queue comes from."""
    client = stack.client
    began = time.monotonic()
    tasks = (*FITTING, NEVER_ADMITTED)
    with trainjob_events(api, TRIGGERER_DAG) as events:
        run_id = client.trigger(TRIGGERER_DAG)
        for task_id in tasks:
            client.wait_for_task_state(TRIGGERER_DAG, run_id, task_id, {"deferred"}, timeout=90)
        jobs = {task_id: live_trainjob(api, TRIGGERER_DAG, task_id) for task_id in tasks}
        for task_id, job in jobs.items():
            # Deferred is not enough: the kill must hit triggers waiting in the triggerer.
            eventually(
                partial(trigger_waits, stack, TRIGGERER_DAG, run_id, task_id, job["metadata"]["name"]),
                timeout=30,
                interval=0.5,
                message=f"the trigger of {task_id} never started",
            )
        created_at = parse_time(jobs[NEVER_ADMITTED]["metadata"]["creationTimestamp"])
        assert created_at is not None
        deadline = created_at + ADMISSION_TIMEOUT

        # The dead triggerer's triggers are handed over once its heartbeat is 30 s old: before the
        # deadline, or this test could not tell a kept deadline from a new one.
        killed_at = utc_now()
        assert killed_at + TAKEOVER < deadline, (killed_at, deadline)
        killed = stack.kill("triggerer", signal.SIGKILL)
        assert len(killed) >= 2, killed  # the triggerer and its trigger runner at least
        time.sleep(DOWN_SECONDS)
        stack.start_component("triggerer")

        eventually(
            lambda: trainjob_of(api, TRIGGERER_DAG, NEVER_ADMITTED) is None,
            timeout=(deadline - utc_now()).total_seconds() + 60,
            interval=0.2,
            message="the never-admitted TrainJob was not deleted",
        )
        deleted_at = utc_now()
        state = client.wait_for_run(TRIGGERER_DAG, run_id, timeout=90)
    tis = {ti["task_id"]: ti for ti in client.task_instances(TRIGGERER_DAG, run_id)}
    print(
        f"killed {killed_at:%T}, deadline {deadline:%T}, TrainJob deleted {deleted_at:%T}, "
        f"task ended {tis[NEVER_ADMITTED]['end_date']}; test took {time.monotonic() - began:.0f}s"
    )

    summary = {task_id: (ti["state"], ti["try_number"]) for task_id, ti in tis.items()}
    assert summary == {
        "fits_0": ("success", 1),
        "fits_1": ("success", 1),
        NEVER_ADMITTED: ("failed", 1),
    }, component_logs(stack)
    assert state == "failed"
    assert events.errors == []
    for task_id in tasks:
        # One TrainJob per task, created before the kill; the new triggerer waited on that very one.
        added = [(event.try_number, event.uid) for event in events.of(task_id, "ADDED")]
        assert added == [("1", jobs[task_id]["metadata"]["uid"])], events.seen
        log = client.task_log(TRIGGERER_DAG, run_id, task_id, 1)
        # Each trigger ran twice: in the killed triggerer and in the new one (the same try).
        assert len(TRIGGER_STARTED.findall(log)) == 2, (task_id, log[-3000:])
    for task_id in FITTING:
        value = result_of(stack, TRIGGERER_DAG, run_id, task_id)
        assert (value["uid"], value["state"]) == (jobs[task_id]["metadata"]["uid"], "succeeded"), value

    # The deadline set before the kill, neither earlier nor restarted by the new triggerer.
    assert deadline <= deleted_at <= deadline + DELETE_SLACK, (deadline, deleted_at)
    ended = parse_time(tis[NEVER_ADMITTED]["end_date"])
    assert ended is not None
    assert deadline <= ended <= deleted_at + RESUME_SLACK, (deadline, ended)
    log = client.task_log(TRIGGERER_DAG, run_id, NEVER_ADMITTED, 1)
    assert "GangAdmissionTimeout" in log, log[-3000:]
