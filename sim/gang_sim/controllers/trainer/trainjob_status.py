"""A TrainJob's status from its JobSet, as Trainer v2's JobSet plugin and reconciler compute it.

- ``Suspended``: ``True``/``Suspended``/"TrainJob is suspended" while ``spec.suspend`` is set;
  once it is cleared, ``False``/``Resumed``/"TrainJob is resumed".
- ``Complete`` and ``Failed`` mirror the JobSet's ``Completed`` and ``Failed`` conditions when
  true: the JobSet's reason, message and transition time, under the TrainJob's type (so a
  failed run reads ``Failed``/``FailedJobs``/"jobset failed due to one or more job failures",
  a restart budget spent ``ReachedMaxRestarts``, a success ``Complete``/``AllJobsCompleted``).
- ``Failed``/``TrainingRuntimeNotSupported``/"unsupported runtime: <Kind>.<group>" when the
  runtime reference names no kind the trainer knows.
- ``jobsStatus``: one entry per replicated job (name, ready, succeeded, failed, active,
  suspended), copied from the JobSet's ``replicatedJobsStatus``.

A Failed condition that no longer holds (the JobSet is not failed) is removed, as the
reconciler clears it on every pass before recomputing. Pure: the caller passes ``now``.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from gang_sim.controllers import metav1_conditions as conditions

JsonDict = dict[str, Any]

SUSPENDED, COMPLETE, FAILED = "Suspended", "Complete", "Failed"
SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
DEADLINE_EXCEEDED = "DeadlineExceeded"
_JOB_COUNTS = ("ready", "succeeded", "failed", "active", "suspended")


def without_failed(trainjob: JsonDict) -> JsonDict:
    """``trainjob`` as Trainer decides on it: its ``Failed`` condition dropped unless the reason is
    ``DeadlineExceeded`` (trainer v2.3.0 ``trainjob_controller.go`` ``removeFailedCondition``,
    lines 98-100 and 246-252), so a failed TrainJob whose JobSet is gone is run again."""
    current = (trainjob.get("status") or {}).get("conditions") or []
    failed = conditions.find(current, FAILED)
    if failed is None or failed.get("reason") == DEADLINE_EXCEEDED:
        return trainjob
    status = {**(trainjob.get("status") or {}), "conditions": conditions.remove(current, FAILED)}
    return {**trainjob, "status": status}


def is_finished(trainjob: JsonDict) -> bool:
    current = (trainjob.get("status") or {}).get("conditions")
    return conditions.is_true(current, COMPLETE) or conditions.is_true(current, FAILED)


def next_status(
    trainjob: JsonDict, jobset: JsonDict | None, *, unsupported_runtime: str | None, now: dt.datetime
) -> JsonDict:
    """The status ``trainjob`` should have (a new dict).

    :param jobset: the TrainJob's own JobSet from the cache, if any.
    :param unsupported_runtime: the runtime's ``Kind.group`` when the trainer cannot run it.
    """
    status = copy.deepcopy(trainjob.get("status") or {})
    current: list[JsonDict] = list(status.get("conditions") or [])
    if (trainjob.get("spec") or {}).get("suspend"):
        current = conditions.set_condition(
            current, SUSPENDED, "True", "Suspended", SUSPENDED_MESSAGE, now=now
        )
    elif conditions.is_true(current, SUSPENDED):
        current = conditions.set_condition(current, SUSPENDED, "False", "Resumed", RESUMED_MESSAGE, now=now)
    jobset_conditions = ((jobset or {}).get("status") or {}).get("conditions") or []
    failed = conditions.find(jobset_conditions, "Failed")
    if unsupported_runtime is not None:
        message = f"unsupported runtime: {unsupported_runtime}"
        current = conditions.set_condition(current, FAILED, "True", RUNTIME_NOT_SUPPORTED, message, now=now)
    elif failed is not None and failed.get("status") == "True":
        current = _mirrored(current, FAILED, failed, now)
    elif jobset is not None:
        current = conditions.remove(current, FAILED)
    completed = conditions.find(jobset_conditions, "Completed")
    if completed is not None and completed.get("status") == "True":
        current = _mirrored(current, COMPLETE, completed, now)
    if current:
        status["conditions"] = current
    if jobset is not None:
        replicated = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        jobs = [
            {"name": entry.get("name"), **{count: int(entry.get(count) or 0) for count in _JOB_COUNTS}}
            for entry in replicated
        ]
        if jobs:
            status["jobsStatus"] = jobs
    return status


def _mirrored(current: list[JsonDict], ctype: str, source: JsonDict, now: dt.datetime) -> list[JsonDict]:
    return conditions.set_condition(
        current,
        ctype,
        "True",
        str(source.get("reason") or ""),
        str(source.get("message") or ""),
        now=now,
        transition_time=source.get("lastTransitionTime"),
    )
