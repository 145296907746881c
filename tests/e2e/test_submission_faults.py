"""A failed PyTorchJob create never costs a job that may exist its PodGroup (`submission.submit`).

Submission creates the PodGroup, then the PyTorchJob. When the job create fails, the PodGroup is
deleted again only if the job was definitely not created: the API refused it (a 4xx), or one read
that works finds no job. When neither can be known (the create and the read-back both fail, as
when the API goes away with the create's reply), the PodGroup stays, and the next look settles
it: a job that was stored after all is reattached and given the PodGroup as its own, and without
a job the orphaned PodGroup is swept before a new submission.

The simulator injects the 503s (docs/fault-injection.md). Its faults refuse a request before it
is served, so "stored, but the reply lost" is played by creating the job with the same manifest
once the create has failed, as the lost attempt would have stored it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import WAIT_RETRY_POLICY
from airflow_gang.jobs import cleanup, submission
from airflow_gang.model.naming import identity_labels
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
JOBS = "pytorchjobs.kubeflow.org"
SPEC = GangJobSpec(
    image="ghcr.io/acme/train:1",
    workers=1,
    resources={"nvidia.com/gpu": 1},
    pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "30"}}},
)


def failing(*verbs: str) -> dict[str, Any]:
    return {"errors": [{"verbs": list(verbs), "resources": [JOBS], "rate": 1.0, "status": 503}]}


@pytest.fixture
def hook(cluster: SimCluster) -> Iterator[GangJobHook]:
    """The provider's hook with the waits' quick retries (as the operator submits); at the end,
    faults off and every job and PodGroup of the test deleted."""
    made = GangJobHook(conn_id="kubernetes_default")
    with made.retries(WAIT_RETRY_POLICY):
        yield made
    cluster.clear_faults()
    for job in made.list_pytorchjobs(NAMESPACE):
        metadata = job["metadata"]
        cleanup.delete_gang(made, metadata["name"], NAMESPACE, metadata["uid"], timeout=30, reason="test")
    for podgroup in made.list_podgroups(NAMESPACE):
        made.delete_podgroup(podgroup["metadata"]["name"], NAMESPACE)


def target(name: str) -> submission.Target:
    return submission.Target(name, NAMESPACE, identity_labels("submit_faults", name, "run-1", -1, 1))


def manifests(to: submission.Target) -> tuple[dict[str, Any], dict[str, Any]]:
    podgroup = SPEC.build_podgroup(to.name, NAMESPACE, labels=to.identity)
    assert podgroup is not None
    return SPEC.build_pytorchjob(to.name, NAMESPACE, labels=to.identity), podgroup


def test_a_refused_job_create_rolls_its_podgroup_back(hook: GangJobHook) -> None:
    to = target("refused")
    job, podgroup = manifests(to)
    job["metadata"]["labels"]["team"] = "not a valid label value!"  # 422 from the API server
    with pytest.raises(GangApiError) as raised:
        submission.submit(hook, job, podgroup, NAMESPACE, to.identity)
    assert raised.value.status == 422
    assert hook.get_podgroup(to.name, NAMESPACE) is None


def test_a_failed_job_create_read_back_absent_rolls_its_podgroup_back(
    hook: GangJobHook, cluster: SimCluster
) -> None:
    to = target("absent")
    job, podgroup = manifests(to)
    cluster.set_faults(failing("create"))
    with pytest.raises(GangApiError) as raised:
        submission.submit(hook, job, podgroup, NAMESPACE, to.identity)
    cluster.clear_faults()
    assert raised.value.status == 503
    assert hook.get_pytorchjob(to.name, NAMESPACE) is None
    assert hook.get_podgroup(to.name, NAMESPACE) is None, "no job was created: its PodGroup goes"


@pytest.mark.parametrize("stored", [True, False], ids=["job-stored", "job-not-stored"])
def test_an_unknown_create_outcome_leaves_the_podgroup_and_the_next_look_settles_it(
    hook: GangJobHook, cluster: SimCluster, stored: bool
) -> None:
    to = target(f"unknown-{'stored' if stored else 'lost'}")
    job, podgroup = manifests(to)
    cluster.set_faults(failing("create", "get"))
    with pytest.raises(GangApiError) as raised:
        submission.submit(hook, job, podgroup, NAMESPACE, to.identity)
    cluster.clear_faults()
    assert raised.value.status == 503
    left = hook.get_podgroup(to.name, NAMESPACE)
    assert left is not None, "the create's outcome was unknown: its PodGroup must stay"
    if stored:  # the lost attempt had stored the job
        created = hook.create_pytorchjob(job, NAMESPACE)

    # The next look, as the operator's next attempt (or next try) makes it.
    found, attached = submission.take_over_or_submit(hook, SPEC, to, stored=None, reuse_succeeded=True)

    podgroup_now = hook.get_podgroup(to.name, NAMESPACE)
    assert podgroup_now is not None
    owners = podgroup_now["metadata"].get("ownerReferences") or []
    assert [owner["uid"] for owner in owners] == [found["metadata"]["uid"]]
    jobs = hook.list_pytorchjobs(NAMESPACE)
    assert [job["metadata"]["uid"] for job in jobs] == [found["metadata"]["uid"]], "one job, never two"
    if stored:
        assert attached is not None, "the stored job is reattached, not submitted again"
        assert found["metadata"]["uid"] == created["metadata"]["uid"]
        assert podgroup_now["metadata"]["uid"] == left["metadata"]["uid"], "its PodGroup was kept"
    else:
        assert attached is None
        assert podgroup_now["metadata"]["uid"] != left["metadata"]["uid"], "the orphan was swept"
