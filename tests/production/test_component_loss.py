"""A scheduler or a Celery worker lost mid-run on the production shape (issue 24).

- **scheduler loss**: one of the two schedulers is SIGKILLed while the mapped gang sweep waits;
  the other finishes the run (it adopts the dead one's queued and running tasks once that one's
  heartbeat is ``scheduler_health_check_threshold`` old). Every task succeeds with one job, and
  no job is cut short: neither reaper deletes a job a live try waits for.
- **worker loss**: the Celery worker running a task that waits in its worker (``deferrable=False``)
  is SIGKILLed with everything it started, as losing its machine or pod would. No code of ours
  runs. After ``task_instance_heartbeat_timeout`` the scheduler fails the try: with
  ``retries=1`` the retry, on the other worker, reattaches to the live job (never a second
  submission); with ``retries=0`` the orphan reaper deletes the job.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
from kubernetes import client as k8s

from airflow_gang.model.gang_state import last_true_condition
from gang_stack import AirflowStack
from tests.production.conftest import HEARTBEAT_TIMEOUT, SWEEP
from tests.production.dags import WORKER_LOSS_NO_RETRY, WORKER_LOSS_RETRY
from tests.realstack.conftest import REAPER_INTERVAL
from tests.support.cluster import job_of, live_job
from tests.support.job_watches import created_jobs
from tests.support.realstack import (
    check_sweep_timelines,
    component_logs,
    pid_of_task,
    result_of,
    results,
    states,
    triggers_held,
)
from tests.waiting import eventually


def wait_until_training(stack: AirflowStack, api: k8s.ApiClient, dag_id: str) -> tuple[str, dict, str]:
    """Run ``dag_id``; once its job trains: (run id, the job, the celery worker running the task)."""
    client = stack.client
    run_id = client.trigger(dag_id)
    running = client.wait_for_task_state(dag_id, run_id, "train", {"running"}, timeout=90)
    job = live_job(api, dag_id, "train")
    eventually(
        lambda: (last_true_condition(job_of(api, dag_id, "train") or {}) or {}).get("type") == "Running",
        timeout=60,
        message="the job never started training",
    )
    pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
    assert pid is not None
    return run_id, job, worker_of(stack, pid)


def worker_of(stack: AirflowStack, pid: int) -> str:
    """The celery worker component whose session holds process ``pid`` (each runs in its own)."""
    session = os.getsid(pid)
    names = [name for name in stack.celery_workers if stack.components[name].pid == session]
    assert len(names) == 1, (
        pid,
        session,
        {name: stack.components[name].pid for name in stack.celery_workers},
    )
    return names[0]


def test_a_scheduler_killed_mid_sweep_leaves_the_other_to_finish_the_run(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    with created_jobs(api, SWEEP) as created:
        run_id = client.trigger(SWEEP)
        eventually(
            lambda: sum(triggers_held(stack).values()) >= 3, timeout=120, message="no triggers waiting"
        )
        killed = stack.kill("scheduler", signal.SIGKILL)
        killed_at = time.monotonic()
        try:
            state = client.wait_for_run(SWEEP, run_id, timeout=300)
            finished_after = time.monotonic() - killed_at
        finally:
            stack.start_component("scheduler")
    assert killed, "the scheduler had no process to kill"
    assert state == "success", component_logs(stack)
    assert states(stack, SWEEP, run_id) == ["success"] * 6
    assert created.errors == []
    # One job per task: nothing was submitted twice, and none was deleted and trained anew.
    assert len(created.seen) == 6, created.seen
    values = results(stack, SWEEP, run_id, 6)
    assert sorted(value["uid"] for value in values) == sorted(uid for _, _, uid in created.seen)
    check_sweep_timelines(values)
    print(f"scheduler SIGKILLed mid-sweep; scheduler-2 finished the run {finished_after:.0f} s later")


def test_a_lost_celery_worker_s_task_is_retried_on_the_same_job(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    with created_jobs(api, WORKER_LOSS_RETRY) as created:
        run_id, job, victim = wait_until_training(stack, api, WORKER_LOSS_RETRY)
        killed_at = dt.datetime.now(dt.UTC)
        stack.kill(victim, signal.SIGKILL)
        try:
            state = client.wait_for_run(WORKER_LOSS_RETRY, run_id, timeout=HEARTBEAT_TIMEOUT + 150)
        finally:
            stack.start_component(victim)
    assert state == "success", component_logs(stack)
    ti = client.task_instance(WORKER_LOSS_RETRY, run_id, "train")
    assert ti["try_number"] == 2
    assert created.errors == []
    # Exactly one job, created by try 1, ever existed for the task.
    assert created.seen == [("train", "1", job["metadata"]["uid"])]
    value = result_of(stack, WORKER_LOSS_RETRY, run_id, "train")
    assert (value["uid"], value["state"]) == (job["metadata"]["uid"], "succeeded"), value
    retry_log = client.task_log(WORKER_LOSS_RETRY, run_id, "train", 2)
    assert "reattaching to" in retry_log, retry_log[-3000:]
    assert "submitted PyTorchJob" not in retry_log
    retry_began = dt.datetime.fromisoformat(ti["start_date"])
    print(f"{victim} SIGKILLed; try 2 started {(retry_began - killed_at).total_seconds():.0f} s later")
    # Noticed by the heartbeat timeout, not earlier (nothing of the dead worker reported it).
    assert retry_began - killed_at >= dt.timedelta(seconds=HEARTBEAT_TIMEOUT - 5)


# Slow (CI's time budget): the Celery worker's loss is noticed as in the test above, and the
# reaper's deletion of a failed task's job runs in every CI run on the real stack
# (tests/realstack/test_deployment.py::test_jobs_of_tasks_failed_from_outside_are_reaped).
@pytest.mark.slow
def test_a_lost_celery_worker_s_task_without_retries_has_its_job_reaped(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    client = stack.client
    with created_jobs(api, WORKER_LOSS_NO_RETRY) as created:
        run_id, job, victim = wait_until_training(stack, api, WORKER_LOSS_NO_RETRY)
        killed_at = time.monotonic()
        stack.kill(victim, signal.SIGKILL)
        try:
            eventually(
                lambda: job_of(api, WORKER_LOSS_NO_RETRY, "train") is None,
                timeout=HEARTBEAT_TIMEOUT + 90,
                interval=0.5,
                message="the lost task's job was never deleted",
            )
            deleted_after = time.monotonic() - killed_at
            state = client.wait_for_run(WORKER_LOSS_NO_RETRY, run_id, timeout=60)
        finally:
            stack.start_component(victim)
    print(f"{victim} SIGKILLed; its task's job deleted {deleted_after:.0f} s later")
    assert state == "failed"
    ti = client.task_instance(WORKER_LOSS_NO_RETRY, run_id, "train")
    assert (ti["state"], ti["try_number"]) == ("failed", 1)
    assert created.seen == [("train", "1", job["metadata"]["uid"])]
    # Not before the scheduler declared the try lost: the job was deleted because the task
    # ended, never because a worker went quiet.
    assert deleted_after >= HEARTBEAT_TIMEOUT - 5, deleted_after
    assert deleted_after <= HEARTBEAT_TIMEOUT + 30 + 3 * REAPER_INTERVAL, deleted_after
    schedulers = stack.component_log("scheduler") + stack.component_log("scheduler-2")
    assert f"deleting orphaned PyTorchJob default/{job['metadata']['name']}" in schedulers
