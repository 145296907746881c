"""The one deletion plan both drivers (sync cleanup, async trigger deletion) carry out."""

from __future__ import annotations

import pytest

from airflow_gang.exceptions import GangApiError
from airflow_gang.jobs.deletion import Step, deletion_plan, not_ours, podgroup_to_delete


@pytest.mark.parametrize("gang", [None, "provider", "training-operator", "trainer"])
def test_a_gang_job_is_deleted_job_first_then_its_podgroup_then_confirmed(gang: str | None) -> None:
    assert deletion_plan(gang) == (
        Step.DELETE_JOB,
        Step.DELETE_PODGROUP,
        Step.CONFIRM_JOB_GONE,
        Step.CONFIRM_PODGROUP_GONE,
        Step.CONFIRM_PODS_GONE,
    )


def test_without_gang_scheduling_no_podgroup_is_touched() -> None:
    plan = deletion_plan("disabled")
    assert Step.DELETE_PODGROUP not in plan
    assert Step.CONFIRM_PODGROUP_GONE not in plan
    assert plan == (Step.DELETE_JOB, Step.CONFIRM_JOB_GONE, Step.CONFIRM_PODS_GONE)


def podgroup(*owner_uids: str) -> dict[str, object]:
    references = [
        {"kind": "PyTorchJob", "name": "train", "uid": uid, "controller": True} for uid in owner_uids
    ]
    return {"metadata": {"name": "train", "uid": "pg-uid", "ownerReferences": references}}


def test_the_podgroup_is_deleted_under_its_own_uid_when_the_job_owns_it_or_nobody_does() -> None:
    assert podgroup_to_delete(podgroup("job-uid"), "job-uid") == "pg-uid"
    assert podgroup_to_delete(podgroup(), "job-uid") == "pg-uid"  # a crash before the owner was set


def test_a_podgroup_gone_or_owned_by_another_job_is_left_alone() -> None:
    assert podgroup_to_delete(None, "job-uid") is None
    assert podgroup_to_delete(podgroup("another-uid"), "job-uid") is None


def test_only_a_refused_uid_precondition_means_not_ours() -> None:
    assert not_ours(GangApiError("precondition failed", status=409))
    assert not not_ours(GangApiError("forbidden", status=403))
    assert not not_ours(RuntimeError("boom"))
