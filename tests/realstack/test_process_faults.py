"""Process faults in a real deployment (see conftest.py): Airflow processes die while gangs wait.

- the triggerer is SIGKILLed (with its trigger runner: a lost machine or pod) while three gangs
  wait deferred, and a new triggerer starts 10 s later (Airflow hands it the triggers once the
  dead one's heartbeat is 30 s old): the two gangs that fit, one finished during the outage and
  one still training, succeed on their first and only job, and the one that can never be
  admitted fails with `GangAdmissionTimeout` at the deadline set before the kill, not at one
  restarted by the new triggerer;
- a task waiting in its worker (``deferrable=False``) is SIGKILLed mid-wait: its retry reattaches
  to the job of the killed try, and no other job is ever created for the task;
- a deferred task is cleared while no triggerer runs (no code of ours sees the clear): the try
  after the clear deletes the cleared try's job and trains anew, it does not take that job over.

A watch on the cluster records every PyTorchJob the DAG creates, so "no second job" is seen,
not inferred from what is left at the end.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from kubernetes import client as k8s

from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.reports.timeline import parse_time
from gang_stack import AirflowStack
from tests.realstack.dags import SMALL_QUOTA_QUEUE
from tests.support.cluster import job_of, jobs_of, live_job
from tests.support.job_watches import created_jobs
from tests.support.realstack import (
    ADMISSION_TIMEOUT,
    DELETE_SLACK,
    DOWN_SECONDS,
    RESUME_SLACK,
    TAKEOVER,
    TRIGGER_STARTED,
    component_logs,
    pid_of_task,
    result_of,
    utc_now,
)
from tests.waiting import eventually

QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
TRIGGERER_DAG = "rs_triggerer_kill"
FITTING = ("fits_0", "fits_1")
NEVER_ADMITTED = "never_admitted"
SYNC_DAG = "rs_sync_task_kill"
CLEAR_DAG = "rs_clear_triggerer_down"


@contextmanager
def volcano_queue(api: k8s.ApiClient, name: str, capability: dict[str, str]) -> Iterator[None]:
    """A Volcano queue with this quota for the block (another team's small queue)."""
    custom = k8s.CustomObjectsApi(api)
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"capability": capability, "reclaimable": True, "weight": 1, "parent": "root"},
    }
    custom.create_cluster_custom_object(*QUEUES, body)
    try:
        yield
    finally:
        custom.delete_cluster_custom_object(*QUEUES, name)


def trigger_starts(stack: AirflowStack, run_id: str, task_id: str) -> list[str]:
    """The triggerer's "(ID n) starting" lines in the task's log: one per triggerer that ran it."""
    return TRIGGER_STARTED.findall(stack.client.task_log(TRIGGERER_DAG, run_id, task_id, 1))


def trigger_is_waiting(stack: AirflowStack, run_id: str, task_id: str, job_name: str) -> bool:
    """The first triggerer started the task's trigger and the trigger has reported on its job."""
    log = stack.client.task_log(TRIGGERER_DAG, run_id, task_id, 1)
    started = list(TRIGGER_STARTED.finditer(log))
    return len(started) == 1 and job_name in log[started[0].end() :]


def test_a_triggerer_killed_while_gangs_wait_deferred_is_replaced_and_every_wait_ends_right(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    began = time.monotonic()
    with (
        volcano_queue(api, SMALL_QUOTA_QUEUE, {"nvidia.com/gpu": "1"}),
        created_jobs(api, TRIGGERER_DAG) as created,
    ):
        run_id = client.trigger(TRIGGERER_DAG)
        for task_id in (*FITTING, NEVER_ADMITTED):
            client.wait_for_task_state(TRIGGERER_DAG, run_id, task_id, {"deferred"}, timeout=90)
        jobs = {task_id: live_job(api, TRIGGERER_DAG, task_id) for task_id in (*FITTING, NEVER_ADMITTED)}
        for task_id, job in jobs.items():
            # Deferred is not enough: the kill must hit triggers waiting in the triggerer.
            eventually(
                partial(trigger_is_waiting, stack, run_id, task_id, job["metadata"]["name"]),
                timeout=30,
                interval=0.5,
                message=f"the trigger of {task_id} never started",
            )
        created_at = parse_time(jobs[NEVER_ADMITTED]["metadata"]["creationTimestamp"])
        assert created_at is not None
        deadline = created_at + ADMISSION_TIMEOUT

        # Airflow hands a dead triggerer's triggers over once its heartbeat is 30 s old: that must
        # come before the deadline, or this test could not tell a kept deadline from a new one.
        killed_at = utc_now()
        assert killed_at + TAKEOVER < deadline, (killed_at, deadline)
        killed = stack.kill("triggerer", signal.SIGKILL)
        # The triggerer and its trigger runner at least (the log server too).
        assert len(killed) >= 2, killed
        assert "triggerer" not in stack.components
        time.sleep(DOWN_SECONDS)
        stack.start_component("triggerer")
        restarted_at = utc_now()

        eventually(
            lambda: job_of(api, TRIGGERER_DAG, NEVER_ADMITTED) is None,
            timeout=(deadline - utc_now()).total_seconds() + 60,
            interval=0.2,
            message="the never-admitted job was not deleted",
        )
        deleted_at = utc_now()
        state = client.wait_for_run(TRIGGERER_DAG, run_id, timeout=90)
    tis = {ti["task_id"]: ti for ti in client.task_instances(TRIGGERER_DAG, run_id)}
    print(
        f"killed {killed_at:%T} down {DOWN_SECONDS:.0f}s, new triggerer healthy {restarted_at:%T}; "
        f"deadline {deadline:%T}, job deleted {deleted_at:%T}, task ended {tis[NEVER_ADMITTED]['end_date']}; "
        f"test took {time.monotonic() - began:.0f}s"
    )

    summary = {task_id: (ti["state"], ti["try_number"]) for task_id, ti in tis.items()}
    assert summary == {
        "fits_0": ("success", 1),
        "fits_1": ("success", 1),
        NEVER_ADMITTED: ("failed", 1),
    }, component_logs(stack)
    assert state == "failed"
    assert created.errors == []
    for task_id in (*FITTING, NEVER_ADMITTED):
        # One job per task, created before the kill; the new triggerer waited on that very job.
        assert created.uids(task_id) == [jobs[task_id]["metadata"]["uid"]], created.seen
    finished = {}
    for task_id in FITTING:
        value = result_of(stack, TRIGGERER_DAG, run_id, task_id)
        assert (value["uid"], value["state"]) == (jobs[task_id]["metadata"]["uid"], "succeeded"), value
        finished[task_id] = value["finished_at"]
    print(f"jobs finished (from the cluster): {finished}")

    # The deadline set before the kill, neither earlier nor restarted by the new triggerer (that
    # would be 50 s after it took the trigger over, at least 80 s after the kill).
    assert deadline <= deleted_at <= deadline + DELETE_SLACK, (deadline, deleted_at)
    ended = parse_time(tis[NEVER_ADMITTED]["end_date"])
    assert ended is not None
    assert deadline <= ended <= deleted_at + RESUME_SLACK, (deadline, ended)
    log = client.task_log(TRIGGERER_DAG, run_id, NEVER_ADMITTED, 1)
    assert "GangAdmissionTimeout" in log, log[-3000:]
    for task_id in (*FITTING, NEVER_ADMITTED):
        # Each trigger ran twice: in the killed triggerer and in the new one (the same try).
        assert len(trigger_starts(stack, run_id, task_id)) == 2, task_id


def test_a_sync_task_killed_mid_wait_is_retried_on_the_same_job(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    """Stronger than test_deployment's adoption test: the watch proves no job but try 1's ever existed."""
    client = stack.client
    began = time.monotonic()
    with created_jobs(api, SYNC_DAG) as created:
        run_id = client.trigger(SYNC_DAG)
        running = client.wait_for_task_state(SYNC_DAG, run_id, "train", {"running"}, timeout=90)
        job = live_job(api, SYNC_DAG, "train")
        # Mid-wait: the gang is admitted and training when the task process dies.
        eventually(
            lambda: (
                (last_true_condition(job_of(api, SYNC_DAG, "train") or {}) or {}).get("type") == "Running"
            ),
            timeout=30,
            message="the job never started",
        )
        pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # an OOM kill: no on_kill, no code of ours runs
        state = client.wait_for_run(SYNC_DAG, run_id, timeout=120)
    print(f"test took {time.monotonic() - began:.0f}s")

    assert state == "success", component_logs(stack)
    ti = client.task_instance(SYNC_DAG, run_id, "train")
    assert ti["try_number"] == 2
    assert created.errors == []
    # Exactly one job, created by try 1, ever existed for the task.
    assert created.seen == [("train", "1", job["metadata"]["uid"])]
    value = result_of(stack, SYNC_DAG, run_id, "train")
    assert (value["uid"], value["name"]) == (job["metadata"]["uid"], job["metadata"]["name"])
    retry_log = client.task_log(SYNC_DAG, run_id, "train", 2)
    assert "reattaching to" in retry_log, retry_log[-3000:]
    assert "submitted PyTorchJob" not in retry_log


def test_a_task_cleared_while_the_triggerer_is_down_trains_anew(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    began = time.monotonic()
    with created_jobs(api, CLEAR_DAG) as created:
        run_id = client.trigger(CLEAR_DAG)
        client.wait_for_task_state(CLEAR_DAG, run_id, "train", {"deferred"}, timeout=90)
        cleared = live_job(api, CLEAR_DAG, "train")
        stack.kill("triggerer", signal.SIGKILL)
        try:
            client.clear_task(CLEAR_DAG, run_id, "train")
            # The next try runs while the triggerer is still down: it alone can see the old job.
            eventually(
                lambda: any(number == "2" for _, number, _ in created.seen),
                timeout=90,
                interval=0.5,
                message="the try after the clear submitted no job",
            )
        finally:
            stack.start_component("triggerer")
        state = client.wait_for_run(CLEAR_DAG, run_id, timeout=120)
    print(f"test took {time.monotonic() - began:.0f}s")

    assert state == "success", component_logs(stack)
    assert created.errors == []
    assert [(task, number) for task, number, _ in created.seen] == [("train", "1"), ("train", "2")]
    assert created.seen[0][2] == cleared["metadata"]["uid"]
    assert cleared["metadata"]["uid"] not in {job["metadata"]["uid"] for job in jobs_of(api, CLEAR_DAG)}
    value = result_of(stack, CLEAR_DAG, run_id, "train")
    assert (value["uid"], value["state"]) == (created.seen[1][2], "succeeded"), value
    log = client.task_log(CLEAR_DAG, run_id, "train", 2)
    assert "the task was cleared after that try: deleting it" in log, log[-3000:]
    assert "reattaching to" not in log
