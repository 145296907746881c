"""A try never takes over the job of a try before the last clear (`submission.first_try_since_clear`).

A person's clear means "run it again". The cleared try's ``on_kill`` normally deletes its job,
but a clear that lands while the try hands over to the triggerer, or while the triggerer is
down, runs none of our code: the next try finds the old job still live. These tests drive
`take_over_or_submit` against the embedded cluster with the provider's hook, as a try after a
clear (``first_try=2``) or after a crash (``first_try=1``) would.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import submission
from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.model.naming import identity_labels, job_name
from airflow_gang.spec import GangJobSpec
from tests.support.cluster import PYTORCHJOBS, delete_job, jobs_of
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")
TASK = "train"
RUN = "manual__cleared"


@pytest.fixture
def dag_id(api: k8s.ApiClient) -> Iterator[str]:
    name = f"cleared_{uuid.uuid4().hex[:8]}"
    yield name
    for job in jobs_of(api, name):
        delete_job(api, job["metadata"]["name"])


def spec(seconds: int) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}},
    )


def target(dag_id: str, try_number: int) -> submission.Target:
    return submission.Target(
        job_name(dag_id, TASK, RUN, -1, try_number),
        "default",
        identity_labels(dag_id, TASK, RUN, -1, try_number),
    )


def submit_try(hook: GangJobHook, dag_id: str, try_number: int, first_try: int) -> dict[str, Any]:
    job, _ = submission.take_over_or_submit(
        hook, spec(120), target(dag_id, try_number), stored=None, reuse_succeeded=True, first_try=first_try
    )
    return job


def running(api: k8s.ApiClient, name: str) -> bool:
    job = k8s.CustomObjectsApi(api).get_namespaced_custom_object(*PYTORCHJOBS, name)
    return (last_true_condition(job) or {}).get("type") == "Running"


def test_first_try_since_clear_counts_as_airflow_does() -> None:
    # A clear sets max_tries = try_number + retries (models/taskinstance.clear_task_instances).
    assert submission.first_try_since_clear(max_tries=2, retries=2) == 1  # never cleared
    assert submission.first_try_since_clear(max_tries=3, retries=2) == 2  # cleared at try 1
    assert submission.first_try_since_clear(max_tries=1, retries=0) == 2  # retries=0, cleared at try 1
    assert submission.first_try_since_clear(max_tries=0, retries=3) == 1  # no context from the server


def test_after_a_clear_the_live_job_of_the_cleared_try_is_deleted_and_a_new_one_submitted(
    api: k8s.ApiClient, dag_id: str
) -> None:
    hook = GangJobHook()
    first = submit_try(hook, dag_id, 1, first_try=1)
    eventually(lambda: running(api, first["metadata"]["name"]), timeout=30, message="try 1's job running")

    second = submit_try(hook, dag_id, 2, first_try=2)

    assert second["metadata"]["name"] == target(dag_id, 2).name
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    names = {job["metadata"]["name"] for job in jobs_of(api, dag_id)}
    assert names == {second["metadata"]["name"]}, "the cleared try's job is gone before the new one waits"


def test_after_a_crash_the_live_job_of_the_earlier_try_is_taken_over(api: k8s.ApiClient, dag_id: str) -> None:
    hook = GangJobHook()
    first = submit_try(hook, dag_id, 1, first_try=1)

    second = submit_try(hook, dag_id, 2, first_try=1)

    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert len(jobs_of(api, dag_id)) == 1


def test_a_succeeded_job_from_before_a_clear_is_not_adopted(api: k8s.ApiClient, dag_id: str) -> None:
    hook = GangJobHook()
    first, _ = submission.take_over_or_submit(
        hook, spec(1), target(dag_id, 1), stored=None, reuse_succeeded=True, first_try=1
    )

    def succeeded() -> bool:
        job = hook.get_pytorchjob(first["metadata"]["name"], "default") or {}
        return (last_true_condition(job) or {}).get("type") == "Succeeded"

    eventually(succeeded, timeout=30, message="try 1's job succeeded")

    second, attached = submission.take_over_or_submit(
        hook, spec(1), target(dag_id, 2), stored=None, reuse_succeeded=True, first_try=2
    )

    assert attached is None
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    # A finished job is not deleted: it is history (delete_on_finish decides about it).
    assert hook.get_pytorchjob(first["metadata"]["name"], "default") is not None
