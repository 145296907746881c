"""The mission's scenarios under a real scheduler, triggerer and api-server (see conftest.py).

- a mapped sweep of six deferrable 4-GPU gangs on a 4-GPU pool: all succeed, one gang at a time,
  with timelines read off the cluster, and no task resumed seconds after it deferred;
- the same sweep without gang scheduling: the pool deadlocks and admission timeouts clear it;
- a person marks a deferred task failed: the trigger's ``on_kill`` deletes the job;
- a deferred and a running task fail from outside: a task instance failed in the database (the
  triggerer cancels its trigger, whose on_kill or the reaper deletes the job) and a task process
  SIGKILLed (no code of ours runs: the scheduler's orphan reaper deletes the job);
- an admission timeout, then a retry that gets the gang; a replica failure named in the task.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.client_pool import USER_AGENT
from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from tests.realstack.conftest import EMPTY, REAPER_INTERVAL
from tests.sim.apiserver.helpers import call
from tests.support.cluster import cluster_blocker, delete_blocker, delete_job, jobs_of, leftovers
from tests.support.realstack import (
    RACE_MESSAGE,
    SWEEP_TIMEOUT,
    check_sweep_timelines,
    metadata_db,
    pid_of_task,
    run_gang_sweep,
    states,
)
from tests.waiting import eventually

BLOCKED = re.compile(r"async thread was blocked for ([0-9.]+) seconds")


def provider_open_watches(api: k8s.ApiClient) -> int:
    """Watches the provider's async client (the triggerer's) holds open at the API server now."""
    metrics = call(api, "GET", "/sim/v1/metrics")
    return sum(entry["count"] for entry in metrics["openWatches"] if entry["userAgent"] == USER_AGENT)


@contextlib.contextmanager
def open_watches_sampled(api: k8s.ApiClient) -> Iterator[list[int]]:
    """Sample the provider's open watches at the API server every 0.5 s while the block runs."""
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            samples.append(provider_open_watches(api))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        stop.set()
        sampler.join(5)


def test_a_mapped_sweep_of_deferred_gangs_all_succeed_one_gang_at_a_time(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    # A cache of an earlier test (another connection) may still linger (30 s) when this starts.
    before = provider_open_watches(api)
    with open_watches_sampled(api) as watches:
        run_id, values = run_gang_sweep(stack)
    check_sweep_timelines(values)
    # Six deferred gangs in one triggerer share its three watches (jobs, PodGroups, pods); with
    # a trigger's own watches it would be up to eighteen.
    assert watches, "the sampler saw nothing"
    assert max(watches) <= before + 3, (before, watches)
    assert RACE_MESSAGE not in stack.component_log("scheduler")
    log = stack.client.task_log("rs_gang_sweep", run_id, "train", 1, map_index=5)
    # One deferral for the whole wait, its phase changes logged by the trigger into the task log.
    assert log.count("Pausing task as DEFERRED") == 1, log
    assert "gang job default/" in log
    assert "queued" in log
    assert "succeeded" in log
    # Six triggers never stall the triggerer's loop. Airflow warns from 0.2 s, a step this shared
    # 2-core machine's scheduling alone can take; the stalls this catches (an ORM mapper set-up
    # on the loop: 1.2 s; a module import: most of a second) are far longer.
    stalls = [float(seconds) for seconds in BLOCKED.findall(stack.component_log("triggerer"))]
    assert all(seconds < 0.5 for seconds in stalls), stalls


# Every run takes the default-mode sweep on this stack and the flag cluster's sweeps under
# dag.test() (tests/e2e/test_gang_flag.py); this one runs with `make test-slow`.
@pytest.mark.slow
def test_with_the_operators_gang_flag_the_default_mode_sweep_runs_one_gang_at_a_time(
    stack: AirflowStack, gang_flag_cluster: SimCluster
) -> None:
    """The seed's own setup (issue 23): a training-operator with ``--gang-scheduler-name=volcano``
    takes the provider's PodGroups as its own, so every gang starts once Volcano admits it —
    none waits out its admission timeout, none is submitted twice."""
    _, values = run_gang_sweep(stack, "rs_gang_flag_sweep")
    check_sweep_timelines(values)
    assert len({value["uid"] for value in values}) == 6
    # Nothing waited long: a gang that missed its admission would queue for the whole timeout.
    assert all(value["queued_seconds"] < 60 for value in values), values
    with gang_flag_cluster.api_client() as client:
        eventually(lambda: leftovers(client) == EMPTY, timeout=30, message=f"left: {leftovers(client)}")


@pytest.mark.slow
def test_consecutive_sweeps_all_succeed(stack: AirflowStack, api: k8s.ApiClient) -> None:
    """The scheduler race is timing: run the sweep again and again. ``make test-slow`` runs one
    more sweep (about half a minute, over CI's time budget); ``GANG_REALSTACK_SWEEPS=10`` is the
    release check."""
    runs = int(os.environ.get("GANG_REALSTACK_SWEEPS", "1"))
    for _ in range(runs):
        _, values = run_gang_sweep(stack)
        check_sweep_timelines(values)
        eventually(lambda: not jobs_of(api, "rs_gang_sweep"), timeout=30, message="sweep left jobs")
    assert RACE_MESSAGE not in stack.component_log("scheduler")


def test_without_gangs_the_pool_deadlocks_and_admission_timeouts_clear_it(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    run_id = stack.client.trigger("rs_no_gang_sweep")

    # While it deadlocks, the Gang jobs page shows partly placed jobs as stuck, holding GPUs,
    # and the cluster's GPUs as held although no PodGroup exists.
    def stuck_jobs() -> list[dict[str, Any]]:
        page = stack.client.call("GET", "/gang/api/jobs?dag_id=rs_no_gang_sweep&state=stuck")
        return list(page["jobs"])

    stuck = eventually(stuck_jobs, timeout=120, message="no job was shown stuck")
    assert all("(no gang)" in job["reason"] and job["replicas_bound"] > 0 for job in stuck), stuck
    held = stack.client.call("GET", "/gang/api/queues")["cluster"]["nvidia.com/gpu"]
    assert held["allocatable"] == "4"
    assert held["allocated"] != "0", held
    stack.client.wait_for_run("rs_no_gang_sweep", run_id, timeout=SWEEP_TIMEOUT)
    final = states(stack, "rs_no_gang_sweep", run_id)
    assert set(final) <= {"success", "failed"}, final
    failed = [index for index, state in enumerate(final) if state == "failed"]
    logs = [stack.client.task_log("rs_no_gang_sweep", run_id, "train", 1, map_index=i) for i in failed]
    for log in logs:
        assert "GangAdmissionTimeout" in log, log[-3000:]
    assert failed, "six partial placements on a 4-GPU pool never deadlocked"
    # The deadlock itself: jobs that timed out had some, never all, of their replicas bound.
    assert any(re.search(r"was not admitted .*bound=[123]/4", log) for log in logs), logs[0][-3000:]


def live_job(api: k8s.ApiClient, task_id: str) -> str:
    def found() -> str | None:
        jobs = [
            job
            for job in jobs_of(api, "rs_long_job")
            if job["metadata"]["labels"].get("airflow-gang.io/task-id") == task_id
        ]
        return jobs[0]["metadata"]["name"] if jobs else None

    return eventually(found, timeout=60, message=f"no job for {task_id}")


def job_gone(api: k8s.ApiClient, name: str, timeout: float) -> None:
    eventually(
        lambda: name not in [job["metadata"]["name"] for job in jobs_of(api, "rs_long_job")],
        timeout=timeout,
        message=f"job {name} still there",
    )


def test_marking_a_deferred_task_failed_deletes_its_job(stack: AirflowStack, api: k8s.ApiClient) -> None:
    run_id = stack.client.trigger("rs_long_job")
    stack.client.wait_for_task_state("rs_long_job", run_id, "deferred", {"deferred"}, timeout=90)
    stack.client.wait_for_task_state("rs_long_job", run_id, "in_worker", {"running"}, timeout=90)
    deferred_job, running_job = live_job(api, "deferred"), live_job(api, "in_worker")
    started = time.monotonic()
    stack.client.set_task_state("rs_long_job", run_id, "deferred", "failed")
    job_gone(api, deferred_job, timeout=30)
    deferred_seconds = time.monotonic() - started
    started = time.monotonic()
    stack.client.set_task_state("rs_long_job", run_id, "in_worker", "failed")
    job_gone(api, running_job, timeout=60)
    running_seconds = time.monotonic() - started
    stack.client.wait_for_run("rs_long_job", run_id, timeout=60)
    print(f"killed: deferred job gone in {deferred_seconds:.1f}s, running job in {running_seconds:.1f}s")


def fail_in_database(stack: AirflowStack, run_id: str, task_id: str) -> None:
    """What a scheduler race or a lost heartbeat does: the state changes, no task code runs."""
    metadata_db(
        stack,
        "UPDATE task_instance SET state='failed', end_date=CURRENT_TIMESTAMP "
        "WHERE dag_id='rs_long_job' AND run_id=:run_id AND task_id=:task_id",
        run_id=run_id,
        task_id=task_id,
    )


def test_jobs_of_tasks_failed_from_outside_are_reaped(stack: AirflowStack, api: k8s.ApiClient) -> None:
    run_id = stack.client.trigger("rs_long_job")
    stack.client.wait_for_task_state("rs_long_job", run_id, "deferred", {"deferred"}, timeout=90)
    running = stack.client.wait_for_task_state("rs_long_job", run_id, "in_worker", {"running"}, timeout=90)
    deferred_job, running_job = live_job(api, "deferred"), live_job(api, "in_worker")

    fail_in_database(stack, run_id, "deferred")
    job_gone(api, deferred_job, timeout=REAPER_INTERVAL * 10)

    pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
    os.kill(pid, signal.SIGKILL)  # an OOM kill: no on_kill, the supervisor reports the try failed
    job_gone(api, running_job, timeout=REAPER_INTERVAL * 10)
    stack.client.wait_for_run("rs_long_job", run_id, timeout=60)
    scheduler = stack.component_log("scheduler")
    # A task instance leaving `deferred` makes Airflow 3.3's triggerer cancel its trigger as a user
    # action, so the trigger's on_kill and the reaper race for the deferred job; either is right.
    trigger_logs = stack.component_log("triggerer")
    trigger_logs += stack.client.task_log("rs_long_job", run_id, "deferred", 1)
    deleted_by_trigger = f"task killed: deleting PyTorchJob default/{deferred_job}" in trigger_logs
    assert deleted_by_trigger or f"deleting orphaned PyTorchJob default/{deferred_job}" in scheduler
    # A killed task process runs no code of ours: only the reaper can delete its job.
    assert f"deleting orphaned PyTorchJob default/{running_job}" in scheduler


def test_the_retry_after_a_task_process_killed_after_the_training_returns_its_result(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    """No retraining after success: the worker dies after the job Succeeded but before it looked
    again; the retry adopts the finished job (same uid, its metrics and times), submits nothing.
    (test_process_faults.py kills a task process while its job still runs.)"""
    run_id = stack.client.trigger("rs_adopt_after_kill")
    running = stack.client.wait_for_task_state(
        "rs_adopt_after_kill", run_id, "train", {"running"}, timeout=90
    )
    (job,) = eventually(lambda: jobs_of(api, "rs_adopt_after_kill"), timeout=60, message="no job")
    eventually(
        lambda: last_true_condition(current(api, job)) == "Succeeded",
        timeout=60,
        message="the job never succeeded",
    )
    pid = eventually(lambda: pid_of_task(running["id"]), timeout=30, message="no task process")
    os.kill(pid, signal.SIGKILL)
    assert stack.client.wait_for_run("rs_adopt_after_kill", run_id, timeout=180) == "success"
    ti = stack.client.task_instance("rs_adopt_after_kill", run_id, "train")
    assert ti["try_number"] == 2
    value = stack.client.call(
        "GET",
        f"/api/v2/dags/rs_adopt_after_kill/dagRuns/{run_id}/taskInstances/train/xcomEntries/return_value"
        "?deserialize=true",
    )["value"]
    assert value["uid"] == job["metadata"]["uid"]
    assert value["state"] == "succeeded"
    assert value["metrics"] == {"accuracy": 0.9}, value
    log = stack.client.task_log("rs_adopt_after_kill", run_id, "train", 2)
    assert f"adopted finished job default/{job['metadata']['name']} from try 1" in log
    assert "submitted PyTorchJob" not in log


def current(api: k8s.ApiClient, job: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "pytorchjobs", job["metadata"]["name"]
    )
    return found


def last_true_condition(job: dict[str, Any]) -> str | None:
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
    return conditions[-1]["type"] if conditions else None


def test_an_admission_timeout_is_retried_and_the_retry_gets_the_gang(
    stack: AirflowStack, api: k8s.ApiClient, cluster: Any
) -> None:
    blocker = cluster_blocker(api, seconds=20)
    run_id = stack.client.trigger("rs_retry_after_timeout")
    with page_states(stack, "rs_retry_after_timeout", run_id) as seen:
        assert stack.client.wait_for_run("rs_retry_after_timeout", run_id, timeout=180) == "success"
    # Polled through the trigger's deletion and the task's resume: the first try's row went from
    # queued (live) through "ending" (deleted, its task about to record it) to admission_timeout,
    # and never read "gone" (which would say the task was killed or cleared).
    first = [state for try_number, state in seen if try_number == 1]
    print(f"try 1 on the page: {first}")
    assert "gone" not in first, first
    assert first[-1] == "admission_timeout", first
    assert "queued" in first, first
    ti = stack.client.task_instance("rs_retry_after_timeout", run_id, "train")
    assert ti["try_number"] >= 2
    first = stack.client.task_log("rs_retry_after_timeout", run_id, "train", 1)
    assert "GangAdmissionTimeout" in first, first[-3000:]
    delete_blocker(api, blocker)
    # The Gang jobs page, served by this stack's API server, still lists both jobs once both are
    # deleted (the admission timeout's by the trigger, the success's by delete_on_finish): one
    # row per try, each as its try recorded it, from the deferred waits' ends in the workers.
    eventually(lambda: not jobs_of(api, "rs_retry_after_timeout"), timeout=30, message="jobs left")
    page = stack.client.call("GET", "/gang/api/jobs?dag_id=rs_retry_after_timeout")
    tries = {job["airflow"]["try_number"]: job for job in page["jobs"] if job["airflow"]["run_id"] == run_id}
    assert set(tries) == set(range(1, ti["try_number"] + 1)), page["jobs"]
    assert tries[1]["state"] == "admission_timeout"
    # Its wait is the cluster's: from the job's creation to the trigger's deletion request (the
    # issue saw "1m 39s" for 90 s, taken when the resumed task wrote the record).
    print(f"try 1 recorded a wait of {tries[1]['queued_seconds']} s for admission_timeout=8")
    assert tries[1]["queued_seconds"] >= 8
    finished, recorded = (dt.datetime.fromisoformat(tries[1][key]) for key in ("finished_at", "recorded_at"))
    assert finished < recorded
    assert tries[ti["try_number"]]["state"] == "succeeded"
    assert all(not job["live"] for job in tries.values())
    recorded = stack.client.call("GET", f"/gang/api/jobs/default/{tries[1]['name']}")
    assert recorded["recorded"] is not None
    assert recorded["airflow"]["task_instance"]["state"] == "success"


@contextlib.contextmanager
def page_states(stack: AirflowStack, dag_id: str, run_id: str) -> Iterator[list[tuple[int, str]]]:
    """(try number, state) of the run's rows on the Gang jobs page, polled every 0.2 s by a
    thread while the block runs (each change once)."""
    seen: list[tuple[int, str]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a slow answer under load: poll again
                for job in stack.client.call("GET", f"/gang/api/jobs?dag_id={dag_id}")["jobs"]:
                    airflow = job["airflow"] or {}
                    entry = (int(airflow.get("try_number") or 0), str(job["state"]))
                    last = next((state for t, state in reversed(seen) if t == entry[0]), None)
                    if airflow.get("run_id") == run_id and entry[1] != last:
                        seen.append(entry)
            stop.wait(0.2)

    poller = threading.Thread(target=poll, name="page-poller", daemon=True)
    poller.start()
    try:
        yield seen
    finally:
        stop.set()
        poller.join(timeout=30)


# Slow (CI's time budget): tests/e2e/test_operator.py and test_scenarios.py name the failed replica
# in both wait modes in every make test.
@pytest.mark.slow
def test_a_failed_replica_is_named_in_the_task_failure(stack: AirflowStack, api: k8s.ApiClient) -> None:
    run_id = stack.client.trigger("rs_replica_failure")
    assert stack.client.wait_for_run("rs_replica_failure", run_id, timeout=120) == "failed"
    log = stack.client.task_log("rs_replica_failure", run_id, "train", 1)
    assert "PyTorchJobFailed" in log, log[-3000:]
    assert "exited with code 3" in log
    assert "CUDA error: out of memory" in log
    # delete_on_finish="on_success" (the default) keeps a failed job for debugging; its
    # terminated pods hold no GPUs. Clean it up as a person would once they have read it.
    for job in jobs_of(api, "rs_replica_failure"):
        delete_job(api, job["metadata"]["name"])
