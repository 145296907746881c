"""`GangJobTrigger` timing against the embedded cluster: the resume hold and cluster timelines.

- A trigger fires no event before ``not_before``, however early the job finishes: a task resumed
  seconds after it deferred is what Airflow 3.3.2 fails (apache/airflow#72716).
- The event's admission and finish times are the cluster's (pod bind times, conditions,
  ``completionTime``), also when the trigger first looks after the job has finished: a trigger
  that stamps "now" would report the gang admitted after it ended.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.reports.timeline import parse_time
from airflow_gang.triggers.gang import GangJobTrigger
from tests.support.cluster import NAMESPACE, delete_job, jobs_of, pods_of
from tests.support.dag_runs import task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

SHORT_JOB_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        wait_for_completion=False, wait_for_admission=False, delete_on_finish="never",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "1.5"}}},
    )
"""


def finished_job(write_dag: Callable[..., Any], api: k8s.ApiClient) -> dict[str, Any]:
    """A job submitted by a DAG and left alone until it succeeded."""
    dag = write_dag(SHORT_JOB_DAG)
    assert task_states(dag.test()) == {"train": "success"}

    def succeeded() -> dict[str, Any] | None:
        (job,) = jobs_of(api, dag.dag_id)
        return job if (last_true_condition(job) or {}).get("type") == "Succeeded" else None

    return eventually(succeeded, timeout=30, message="the job did not succeed")


def trigger_for(job: dict[str, Any], **kwargs: Any) -> GangJobTrigger:
    return GangJobTrigger(
        name=job["metadata"]["name"],
        namespace=NAMESPACE,
        uid=job["metadata"]["uid"],
        wait_for="both",
        gang_scheduling="provider",
        submitted_at=job["metadata"]["creationTimestamp"],
        poll_interval=300,
        hook_kwargs=GangJobHook(conn_id="kubernetes_default").async_hook_kwargs(),
        **kwargs,
    )


async def first_event(trigger: GangJobTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")


def test_no_event_fires_before_not_before(write_dag: Callable[..., Any], api: k8s.ApiClient) -> None:
    job = finished_job(write_dag, api)
    not_before = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    started = time.monotonic()
    event = asyncio.run(first_event(trigger_for(job, not_before=not_before.isoformat())))
    assert event["status"] == "succeeded"
    assert dt.datetime.now(dt.UTC) >= not_before
    assert time.monotonic() - started >= 2.5
    delete_job(api, job["metadata"]["name"])


def test_without_a_hold_a_finished_job_is_reported_at_once(
    write_dag: Callable[..., Any], api: k8s.ApiClient
) -> None:
    job = finished_job(write_dag, api)
    started = time.monotonic()
    event = asyncio.run(first_event(trigger_for(job)))
    assert event["status"] == "succeeded"
    assert time.monotonic() - started < 2.5
    delete_job(api, job["metadata"]["name"])


def test_a_trigger_that_first_looks_after_the_end_reports_the_clusters_timeline(
    write_dag: Callable[..., Any], api: k8s.ApiClient
) -> None:
    job = finished_job(write_dag, api)
    name = job["metadata"]["name"]
    time.sleep(1.5)  # the trigger looks well after the end
    event = asyncio.run(first_event(trigger_for(job)))
    timeline = event["timeline"]
    admitted = parse_time(timeline["admitted_at"])
    finished = parse_time(timeline["finished_at"])
    assert admitted is not None
    assert finished is not None
    bound = [
        condition.last_transition_time
        for pod in pods_of(api, name)
        for condition in pod.status.conditions or []
        if condition.type == "PodScheduled" and condition.status == "True"
    ]
    assert len(bound) == 2
    assert admitted == max(bound)
    assert finished == parse_time(job["status"]["completionTime"])
    assert parse_time(job["metadata"]["creationTimestamp"]) <= admitted <= finished
    assert (finished - admitted).total_seconds() >= 1.0  # the 1.5 s run, at one-second resolution
    assert event["progress"]["phase"] == "succeeded"
    delete_job(api, name)
