"""A Volcano Job's phases: the state machine of ``pkg/controllers/job/state/*.go``, as pure data.

At v1.16.0-alpha.1 (commit a4b775ad) each phase is a state whose ``Execute(action)`` calls one
of three operations with an ``updateStatus`` function that may move the phase:

- ``SyncJob`` (create missing pods, count them; `plan.plan_sync`),
- ``KillJob`` (delete every pod whose phase is not retained, bump ``status.version``, delete
  the PodGroup; `plan.plan_kill`),
- ``KillTarget`` (the same for one task or one pod, PodGroup kept).

`transition` returns the `Step` a phase takes for an action; the update functions read and
edit a status dict (the wire form, ``omitempty`` counts read as 0). Citations are to the
state files at the tag:

- ``pending.go`` 29-67: Restart* bump ``retryCount`` and go ``Restarting``; Abort/Complete/
  Terminate kill softly and go ``Aborting``/``Completing``/``Terminating``; anything else syncs
  and goes ``Running`` once ``minAvailable <= running + succeeded + failed``.
- ``running.go`` 33-114: the same kills; a sync goes ``Completed`` once ``minSuccess`` pods
  succeeded, and once every pod finished (``succeeded + failed == replicas``) ``Failed`` if a
  task with ``minAvailable`` has fewer successes (only when the job's ``minAvailable`` is at
  least the tasks' sum), ``Failed`` below ``minSuccess``, ``Completed`` when ``succeeded >=
  minAvailable``, else ``Failed``; back to ``Pending`` when more pods are pending than
  ``replicas - minAvailable``; with 0 replicas the phase stays.
- ``restarting.go`` 31-63: ``Failed`` once ``retryCount >= maxRetry``, ``Pending`` once
  ``replicas - terminating >= status.minAvailable``; a sync syncs, other actions kill again.
- ``aborting.go`` 29-47, ``completing.go`` 30-40, ``terminating.go`` 28-37: kill softly until
  nothing is pending, running or terminating, then ``Aborted``/``Completed``/``Terminated``;
  ``ResumeJob`` on Aborting or ``aborted.go`` 29-40 restarts (``retryCount`` + 1).
- ``finished.go`` 27-30 (Completed, Failed, Terminated): every action kills softly, phase kept.
- ``factory.go`` 87-108: an unknown or empty phase is Pending; ``PodRetainPhaseSoft``
  (46-49) retains Succeeded and Failed pods.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gang_sim.controllers.clock import rfc3339

JsonDict = dict[str, Any]
UpdateStatus = Callable[[JsonDict], bool]

PENDING, RUNNING, RESTARTING = "Pending", "Running", "Restarting"
COMPLETING, COMPLETED = "Completing", "Completed"
ABORTING, ABORTED = "Aborting", "Aborted"
TERMINATING, TERMINATED, FAILED = "Terminating", "Terminated", "Failed"
PHASES = (
    PENDING,
    ABORTING,
    ABORTED,
    RUNNING,
    RESTARTING,
    COMPLETING,
    COMPLETED,
    TERMINATING,
    TERMINATED,
    FAILED,
)
FINISHED = frozenset({COMPLETED, FAILED, TERMINATED})

RETAIN_NONE: frozenset[str] = frozenset()
RETAIN_SOFT = frozenset({"Succeeded", "Failed"})

# bus/v1alpha1/actions.go lines 26-70.
SYNC_JOB, RESTART_JOB, RESTART_TASK, RESTART_POD = "SyncJob", "RestartJob", "RestartTask", "RestartPod"
ABORT_JOB, COMPLETE_JOB, TERMINATE_JOB, RESUME_JOB = "AbortJob", "CompleteJob", "TerminateJob", "ResumeJob"
RESTARTS = (RESTART_TASK, RESTART_POD, "RestartPartition")
COUNTERS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")


@dataclass(frozen=True)
class Step:
    """What a state does for an action: which operation, and how it moves the status."""

    operation: Literal["sync", "kill", "kill_target"]
    update: UpdateStatus | None
    retain: frozenset[str] = RETAIN_SOFT


def count(status: JsonDict, key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


def phase_of(status: JsonDict | None) -> str:
    return str(((status or {}).get("state") or {}).get("phase") or "")


def set_phase(status: JsonDict, phase: str) -> None:
    status["state"] = {**(status.get("state") or {}), "phase": phase}


def _tasks(job: JsonDict) -> list[JsonDict]:
    return [t for t in (job.get("spec") or {}).get("tasks") or [] if isinstance(t, dict)]


def total_replicas(job: JsonDict) -> int:
    """``TotalTasks`` (state/util.go lines 24-33)."""
    return sum(int(t.get("replicas") or 0) for t in _tasks(job))


def total_task_min_available(job: JsonDict) -> int:
    """``TotalTaskMinAvailable`` (state/util.go lines 36-48)."""
    total = 0
    for task in _tasks(job):
        low = task.get("minAvailable")
        total += low if isinstance(low, int) else int(task.get("replicas") or 0)
    return total


def _spec_int(job: JsonDict, key: str) -> int:
    value = (job.get("spec") or {}).get(key)
    return value if isinstance(value, int) else 0


def _goes(phase: str, *, retry: bool = False) -> UpdateStatus:
    def update(status: JsonDict) -> bool:
        if retry:
            status["retryCount"] = count(status, "retryCount") + 1
        set_phase(status, phase)
        return True

    return update


def _until_quiet(phase: str) -> UpdateStatus:
    """Aborting/Completing/Terminating: the next phase once no pod is alive."""

    def update(status: JsonDict) -> bool:
        if count(status, "terminating") or count(status, "pending") or count(status, "running"):
            return False
        set_phase(status, phase)
        return True

    return update


def _pending_sync(job: JsonDict) -> UpdateStatus:
    def update(status: JsonDict) -> bool:
        started = count(status, "running") + count(status, "succeeded") + count(status, "failed")
        if _spec_int(job, "minAvailable") <= started:
            set_phase(status, RUNNING)
            return True
        return False

    return update


def _running_sync(job: JsonDict) -> UpdateStatus:
    def update(status: JsonDict) -> bool:
        replicas = total_replicas(job)
        if replicas == 0:
            return False
        min_success = (job.get("spec") or {}).get("minSuccess")
        succeeded, failed = count(status, "succeeded"), count(status, "failed")
        min_available = _spec_int(job, "minAvailable")
        if isinstance(min_success, int) and succeeded >= min_success:
            set_phase(status, COMPLETED)
            return True
        if succeeded + failed == replicas:
            if min_available >= total_task_min_available(job):
                for task in _tasks(job):
                    low = task.get("minAvailable")
                    if not isinstance(low, int):
                        continue
                    task_count = (status.get("taskStatusCount") or {}).get(task.get("name"))
                    if task_count is not None and count(task_count.get("phase") or {}, "Succeeded") < low:
                        set_phase(status, FAILED)
                        return True
            if isinstance(min_success, int) and succeeded < min_success:
                set_phase(status, FAILED)
            elif succeeded >= min_available:
                set_phase(status, COMPLETED)
            else:
                set_phase(status, FAILED)
            return True
        if count(status, "pending") > replicas - min_available:
            set_phase(status, PENDING)
            return True
        return False

    return update


def _restarting(job: JsonDict) -> UpdateStatus:
    def update(status: JsonDict) -> bool:
        if count(status, "retryCount") >= _spec_int(job, "maxRetry"):
            set_phase(status, FAILED)
            return True
        if total_replicas(job) - count(status, "terminating") >= count(status, "minAvailable"):
            set_phase(status, PENDING)
            return True
        return False

    return update


def transition(job: JsonDict, action: str) -> Step:
    """The `Step` the job's current phase takes for ``action`` (see the module docstring)."""
    phase = phase_of(job.get("status"))
    if phase in (PENDING, RUNNING) or phase not in PHASES:
        if action == RESTART_JOB:
            return Step("kill", _goes(RESTARTING, retry=True), RETAIN_NONE)
        if action in RESTARTS:
            return Step("kill_target", _goes(RESTARTING, retry=True))
        if action == ABORT_JOB:
            return Step("kill", _goes(ABORTING))
        if action == COMPLETE_JOB:
            return Step("kill", _goes(COMPLETING))
        if action == TERMINATE_JOB:
            return Step("kill", _goes(TERMINATING))
        return Step("sync", _running_sync(job) if phase == RUNNING else _pending_sync(job))
    if phase == RESTARTING:
        if action == SYNC_JOB:
            return Step("sync", _restarting(job))
        if action in RESTARTS:
            return Step("kill_target", _restarting(job))
        return Step("kill", _restarting(job), RETAIN_NONE)
    if phase in (ABORTING, ABORTED) and action == RESUME_JOB:
        return Step("kill", _goes(RESTARTING, retry=True))
    if phase == ABORTING:
        return Step("kill", _until_quiet(ABORTED))
    if phase == COMPLETING:
        return Step("kill", _until_quiet(COMPLETED))
    if phase == TERMINATING:
        return Step("kill", _until_quiet(TERMINATED))
    return Step("kill", None)  # Aborted, and finished.go for Completed/Failed/Terminated


def append_condition(status: JsonDict, now: dt.datetime) -> None:
    """A phase change as the controller records it (job_controller_actions.go lines 428-430,
    1067-1084): ``state.lastTransitionTime`` now, and a condition ``{status: <phase>,
    lastTransitionTime}`` appended after dropping any earlier one of the same phase."""
    stamp = rfc3339(now)
    status["state"] = {**(status.get("state") or {}), "lastTransitionTime": stamp}
    phase = phase_of(status)
    kept = [c for c in status.get("conditions") or [] if c.get("status") != phase]
    status["conditions"] = [*kept, {"status": phase, "lastTransitionTime": stamp}]


def wire(status: JsonDict) -> JsonDict:
    """Go's ``omitempty``: zero counters, empty maps and empty strings are not written."""
    out = copy.deepcopy(status)
    for key in (*COUNTERS, "version", "retryCount", "minAvailable"):
        if not out.get(key):
            out.pop(key, None)
    for key in ("taskStatusCount", "controlledResources", "conditions"):
        if not out.get(key):
            out.pop(key, None)
    return out
