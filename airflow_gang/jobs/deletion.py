"""Deleting a gang job on purpose: one plan, its rules, and the answers that mean "not ours".

The provider deletes a job only for a reason of its own: its admission timeout, a person's kill
or clear, the task's own give-up (``execution_timeout``), or ``delete_on_finish`` after the end.
Never because the API could not be read. The plan is the same from a worker, the scheduler's
reaper and the triggerer; `airflow_gang.jobs.cleanup` (sync) and
`airflow_gang.triggers.deletion` (async) only carry it out:

1. delete the job (PyTorchJob or TrainJob), Foreground, under its uid: a same-named job of
   another try or owner answers 409 and is left alone (`not_ours`);
2. unless gang scheduling is disabled, delete its PodGroup under the PodGroup's own uid, unless
   it is owned by another object (`podgroup_to_delete`). A PodGroup already gone is fine: a
   training-operator with ``--gang-scheduler-name=volcano`` (or Trainer's Volcano plugin) deletes
   it when the job finishes or is suspended, and the garbage collector with the job;
3. confirm: the job of that uid gone, the PodGroup gone (not with gang scheduling disabled: a
   cluster without Volcano has no PodGroups to read), then the job's pods gone.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.gang_state import owned_by

JsonDict = dict[str, Any]


class Step(StrEnum):
    DELETE_JOB = "delete the job"
    DELETE_PODGROUP = "delete the PodGroup"
    CONFIRM_JOB_GONE = "confirm the job is gone"
    CONFIRM_PODGROUP_GONE = "confirm the PodGroup is gone"
    CONFIRM_PODS_GONE = "confirm the pods are gone"


def deletion_plan(gang_scheduling: str | None) -> tuple[Step, ...]:
    """The steps, in order, for a job of this ``gang_scheduling`` (None: the default, provider)."""
    if gang_scheduling == "disabled":
        return (Step.DELETE_JOB, Step.CONFIRM_JOB_GONE, Step.CONFIRM_PODS_GONE)
    return (
        Step.DELETE_JOB,
        Step.DELETE_PODGROUP,
        Step.CONFIRM_JOB_GONE,
        Step.CONFIRM_PODGROUP_GONE,
        Step.CONFIRM_PODS_GONE,
    )


def podgroup_to_delete(podgroup: JsonDict | None, job_uid: str | None) -> str | None:
    """The uid to delete the job's PodGroup under, or None to leave it.

    None when it is gone already, or owned by something else than this job (a same-named job of
    someone else). A PodGroup without owners is this job's (a crash before the owner was set).
    """
    if podgroup is None:
        return None
    references = podgroup["metadata"].get("ownerReferences") or []
    if references and not owned_by(podgroup, job_uid):
        return None
    return str(podgroup["metadata"].get("uid") or "") or None


def not_ours(error: BaseException) -> bool:
    """Whether a refused delete means the name now holds another object (uid precondition: 409)."""
    return isinstance(error, GangApiError) and error.status == 409


__all__ = ["Step", "deletion_plan", "not_ours", "podgroup_to_delete"]
