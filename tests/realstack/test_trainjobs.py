"""The seed scenario and its failure paths with Kubeflow Trainer v2 TrainJobs, under a real
scheduler, triggerer and api-server (the package's `stack`, see conftest.py):

- `gang_vs_deadlock_trainjob` (the example DAG: six 4-node TrainJobs submitted suspended,
  released together, waited for by deferrable `TrainJobSensor`s) with the torch-distributed
  runtime: all six succeed, one gang at a time; with torch-distributed-no-gang (no
  podGroupPolicy) the pool deadlocks and admission timeouts end the stuck jobs;
- a person marks a deferred TrainJob task failed: its TrainJob is deleted;
- an admission timeout is retried by `gang_retry_policy()` and the retry gets the gang.

Each test ends with no TrainJob, JobSet, PodGroup or pod left (conftest's `nothing_left_behind`).
Kept short for CI: 1-second training, admission timeouts of a few seconds.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.reports.timeline import parse_time
from gang_stack import AirflowStack
from tests.realstack.conftest import EMPTY
from tests.support.cluster import cluster_blocker, delete_blocker, leftovers, trainjobs_of
from tests.support.realstack import component_logs
from tests.waiting import eventually

SEED_DAG = "gang_vs_deadlock_trainjob"


def task_states(stack: AirflowStack, dag_id: str, run_id: str) -> dict[str, str | None]:
    return {
        (ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]"): ti["state"]
        for ti in stack.client.task_instances(dag_id, run_id)
    }


def timeline(report_dir: Path) -> list[dict[str, Any]]:
    (folder,) = (report_dir / "airflow-gang").iterdir()
    jobs: list[dict[str, Any]] = json.loads((folder / "timeline.json").read_text())
    return jobs


def test_the_trainjob_seed_scenario_with_gangs_runs_six_of_six_one_gang_at_a_time(
    stack: AirflowStack, api: k8s.ApiClient, tmp_path: Path
) -> None:
    conf = {"gang_scheduling": "trainer", "train_seconds": 1, "report_dir": str(tmp_path)}
    run_id = stack.client.trigger(SEED_DAG, conf=conf)
    state = stack.client.wait_for_run(SEED_DAG, run_id, timeout=150)
    states = task_states(stack, SEED_DAG, run_id)
    assert state == "success", f"{states}\n{component_logs(stack)}"
    assert set(states.values()) == {"success"}, states
    assert len([task for task in states if task.startswith("train[")]) == 6
    jobs = timeline(tmp_path)
    assert [job["state"] for job in jobs] == ["succeeded"] * 6, jobs
    # Trainer's Volcano plugin admitted one whole gang at a time: no two jobs' runs overlapped.
    spans = sorted((parse_time(job["admitted_at"]), parse_time(job["finished_at"])) for job in jobs)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start is not None
        assert end is not None
        assert start >= end, f"two gangs overlapped: {spans}"


# CI's time budget: the deadlock under the real scheduler runs in every `make test` with
# PyTorchJobs and Volcano Jobs (test_deployment.py, test_vcjobs.py), and with TrainJobs on the
# embedded cluster (tests/sim/trainer_v2); this run and its dag.test() twin are `make test-slow`'s.
@pytest.mark.slow
def test_the_trainjob_seed_scenario_without_gangs_deadlocks_until_admission_timeouts_end_it(
    stack: AirflowStack, api: k8s.ApiClient, tmp_path: Path
) -> None:
    conf = {
        "gang_scheduling": "disabled",
        "train_seconds": 1,
        "admission_timeout": 10,
        "report_dir": str(tmp_path),
    }
    run_id = stack.client.trigger(SEED_DAG, conf=conf)
    assert stack.client.wait_for_run(SEED_DAG, run_id, timeout=150) == "failed"
    states = task_states(stack, SEED_DAG, run_id)
    trains = [states[f"train[{index}]"] for index in range(6)]
    assert set(trains) <= {"success", "failed"}, states
    failed = [index for index, state in enumerate(trains) if state == "failed"]
    # Six jobs bind their nodes one pod at a time on a 4-GPU pool: several each hold part of it.
    assert len(failed) >= 2, states
    logs = [stack.client.task_log(SEED_DAG, run_id, "train", 1, map_index=index) for index in failed]
    for log in logs:
        assert "GangAdmissionTimeout" in log, log[-3000:]
        # Deadlocked, not merely queued: some, never all, of its nodes' pods were bound, and no
        # PodGroup was there to hold them back.
        reason = re.search(r"was not admitted [^\n]*", log)
        assert reason is not None, log[-3000:]
        # Some of its nodes' pods bound, or none (the others' partial gangs took the pool).
        assert re.search(r"bound=[0-3]/4", reason.group()), reason.group()
        assert "podgroup=" not in reason.group(), reason.group()
        assert "(no gang scheduling: not every replica was bound)" in reason.group(), reason.group()
    # The submit tasks named the runtime without podGroupPolicy: no gang was used.
    submit_log = stack.client.task_log(SEED_DAG, run_id, "submit", 1, map_index=failed[0])
    assert "is NOT gang-scheduled" in submit_log, submit_log[-3000:]
    jobs = timeline(tmp_path)
    assert len([job for job in jobs if job["state"] == "timed out"]) == len(failed)
    assert states["report"] == "failed"
    assert states["cleanup"] == "success"
    # conftest's nothing_left_behind checks TrainJobs, JobSets, PodGroups and pods are all gone.
    eventually(lambda: leftovers(api) == EMPTY, timeout=30, message=f"left behind: {leftovers(api)}")


def test_marking_a_deferred_trainjob_task_failed_deletes_its_trainjob(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    dag_id = "rs_trainjob_long"
    run_id = stack.client.trigger(dag_id)
    stack.client.wait_for_task_state(dag_id, run_id, "deferred", {"deferred"}, timeout=90)
    (job,) = eventually(lambda: trainjobs_of(api, dag_id), timeout=60, message="no TrainJob")
    name = job["metadata"]["name"]
    started = time.monotonic()
    stack.client.set_task_state(dag_id, run_id, "deferred", "failed")
    eventually(
        lambda: name not in [j["metadata"]["name"] for j in trainjobs_of(api, dag_id)],
        timeout=30,
        message=f"TrainJob {name} still there",
    )
    print(f"deferred TrainJob gone {time.monotonic() - started:.1f}s after the task was marked failed")
    stack.client.wait_for_run(dag_id, run_id, timeout=60)


def test_a_trainjob_admission_timeout_is_retried_and_the_retry_gets_the_gang(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    dag_id = "rs_trainjob_retry_after_timeout"
    blocker = cluster_blocker(api, seconds=10)
    try:
        run_id = stack.client.trigger(dag_id)
        state = stack.client.wait_for_run(dag_id, run_id, timeout=120)
    finally:
        delete_blocker(api, blocker)
    assert state == "success", component_logs(stack)
    ti = stack.client.task_instance(dag_id, run_id, "train")
    assert ti["try_number"] >= 2
    first = stack.client.task_log(dag_id, run_id, "train", 1)
    assert "GangAdmissionTimeout" in first, first[-3000:]
    assert "TrainJob default/" in first
    last = stack.client.task_log(dag_id, run_id, "train", ti["try_number"])
    assert "succeeded" in last, last[-3000:]
    value = stack.client.call(
        "GET",
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train/xcomEntries/return_value?deserialize=true",
    )["value"]
    assert value["state"] == "succeeded"
    assert value["replicas"] == {"Node": 4}
    assert value["podgroup"] == value["name"]
    eventually(lambda: not trainjobs_of(api, dag_id), timeout=30, message="TrainJobs left")
