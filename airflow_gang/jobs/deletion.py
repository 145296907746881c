"""Deleting a gang job on purpose: one plan, its rules, and the answers that mean "not ours".

The provider deletes a job only for a reason of its own: its admission timeout, a person's kill
or clear, the task's own give-up (``execution_timeout``), or ``delete_on_finish`` after the end.
Never because the API could not be read. The plan is the same from a worker, the scheduler's
reaper and the triggerer; `airflow_gang.jobs.cleanup` (sync) and
`airflow_gang.triggers.deletion` (async) only carry it out:

1. delete the job under its uid (a same-named job of another try or owner answers 409 and is
   left alone, `not_ours`), with its kind's propagation (`JobKind.deletion_propagation`):
   ``Foreground`` for a PyTorchJob, whose training-operator skips a job marked for deletion;
   ``Background`` for a TrainJob, which then goes at once: Kubeflow Trainer v2.3's reconciler
   never checks ``deletionTimestamp`` and re-applies the JobSet and PodGroup that the garbage
   collector removes while a TrainJob waits in the foreground, a loop that on a real cluster
   re-created dozens of JobSets and ran their pods on the GPUs the retry waited for, or never
   ended (docs/trainer-v2.md, "Deleting a TrainJob");
2. unless gang scheduling is disabled or the job's controller owns the PodGroup (Trainer's
   Volcano plugin re-creates one deleted behind its back), delete its PodGroup under the
   PodGroup's own uid, unless it is owned by another object (`podgroup_to_delete`). A PodGroup
   already gone is fine: a training-operator with ``--gang-scheduler-name=volcano`` deletes it
   when the job finishes or is suspended, and the garbage collector with the job;
3. confirm: the job of that uid gone, the PodGroup gone (not with gang scheduling disabled: a
   cluster without Volcano has no PodGroups to read), its pods gone; and for a kind whose
   controller makes children that can come back (a TrainJob's JobSet and batch Jobs), a look at
   all of them together until none is left. Only what was seen gone is "deleted".
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import owned_by

JsonDict = dict[str, Any]


class Step(StrEnum):
    DELETE_JOB = "delete the job"
    DELETE_PODGROUP = "delete the PodGroup"
    CONFIRM_JOB_GONE = "confirm the job is gone"
    CONFIRM_PODGROUP_GONE = "confirm the PodGroup is gone"
    CONFIRM_PODS_GONE = "confirm the pods are gone"
    CONFIRM_NOTHING_LEFT = "confirm nothing of the job is left"


def deletion_plan(gang_scheduling: str | None, job_kind: JobKind = DEFAULT_JOB_KIND) -> tuple[Step, ...]:
    """The steps, in order, for a job of this kind and ``gang_scheduling`` (None: provider)."""
    gang = gang_scheduling != "disabled"
    steps = [Step.DELETE_JOB]
    if gang and not job_kind.controller_owns_podgroup:
        steps.append(Step.DELETE_PODGROUP)
    steps.append(Step.CONFIRM_JOB_GONE)
    if gang:
        steps.append(Step.CONFIRM_PODGROUP_GONE)
    steps.append(Step.CONFIRM_PODS_GONE)
    if job_kind.children:
        steps.append(Step.CONFIRM_NOTHING_LEFT)
    return tuple(steps)


def leftovers(podgroup: JsonDict | None, children: list[str], pods: list[JsonDict]) -> list[str]:
    """What one look found of a job being deleted, in words (empty: nothing)."""
    found = []
    if podgroup is not None:
        meta = podgroup.get("metadata") or {}
        found.append(f"PodGroup {meta.get('namespace')}/{meta.get('name')}")
    found.extend(children)
    found.extend(
        f"pod {(pod.get('metadata') or {}).get('namespace')}/{(pod.get('metadata') or {}).get('name')}"
        for pod in pods
    )
    return found


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


def after_deletion(deleted: bool | None) -> str:
    """What a failure says of the job it deleted: only what was observed (None: not known here)."""
    if deleted is None:
        return "it was deleted"
    if deleted:
        return (
            "it was deleted (seen gone, with its PodGroup and pods), so it holds no resources and a "
            "retry starts clean"
        )
    return (
        "its deletion was not confirmed in time (the orphan reaper finishes it), so a retry may find "
        "part of the pool still held"
    )


def not_ours(error: BaseException) -> bool:
    """Whether a refused delete means the name now holds another object (uid precondition: 409)."""
    return isinstance(error, GangApiError) and error.status == 409


__all__ = ["Step", "after_deletion", "deletion_plan", "leftovers", "not_ours", "podgroup_to_delete"]
