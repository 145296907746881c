"""PyTorchJob status vocabulary as pure functions: conditions, replica statuses, timestamps.

These mirror the training-operator v1.9 helpers (``pkg/util/status.go``, ``pkg/core/status.go``)
that every decision of `pytorchjob_plan` goes through, so the conditions a client reads carry the
real types, reasons and messages (``docs/architecture.md#pytorchjob``). Nothing here does I/O or
reads a clock: the caller passes ``now``.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from gang_sim.controllers.clock import rfc3339

JsonDict = dict[str, Any]

KIND = "PyTorchJob"
MASTER = "Master"
WORKER = "Worker"
REPLICA_TYPES = (MASTER, WORKER)  # the order the operator's decisions visit them in


class ConditionType(enum.StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"


class Reason(enum.StrEnum):
    """``NewReason(kind, suffix)``: the kind name glued to the event suffix."""

    CREATED = f"{KIND}Created"
    RUNNING = f"{KIND}Running"
    RESTARTING = f"{KIND}Restarting"
    SUCCEEDED = f"{KIND}Succeeded"
    SUSPENDED = f"{KIND}Suspended"
    RESUMED = f"{KIND}Resumed"
    FAILED = f"{KIND}Failed"


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- messages (pytorchjob_controller.go, common/job.go) -------------------------------------------


def created_message(name: str) -> str:
    return f"{KIND} {name} is created."


def running_message(name: str, namespace: str, has_master: bool) -> str:
    # Without a Master the operator's worker branch names the job namespace/name.
    return f"{KIND} {name} is running." if has_master else f"{KIND} {namespace}/{name} is running."


def succeeded_message(name: str, namespace: str, has_master: bool) -> str:
    if has_master:
        return f"{KIND} {name} is successfully completed."
    return f"{KIND} {namespace}/{name} successfully completed."


def restarting_message(name: str, failed: int, rtype: str) -> str:
    return f"{KIND} {name} is restarting because {failed} {rtype} replica(s) failed."


def failed_message(name: str, failed: int, rtype: str) -> str:
    return f"{KIND} {name} is failed because {failed} {rtype} replica(s) failed."


def backoff_message(name: str) -> str:
    return f"Job {name} has failed because it has reached the specified backoff limit"


def deadline_message(name: str) -> str:
    return f"Job {name} has failed because it was active longer than specified deadline"


def suspended_message(name: str) -> str:
    return f"{KIND} {name} is suspended."


def resumed_message(name: str) -> str:
    return f"{KIND} {name} is resumed."


# --- conditions (pkg/util/status.go) ---------------------------------------------------------------


def find_condition(status: JsonDict, ctype: ConditionType) -> JsonDict | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == ctype:
            return dict(condition)
    return None


def has_condition(status: JsonDict, ctype: ConditionType) -> bool:
    condition = find_condition(status, ctype)
    return condition is not None and condition.get("status") == "True"


def is_finished(status: JsonDict) -> bool:
    return has_condition(status, ConditionType.SUCCEEDED) or has_condition(status, ConditionType.FAILED)


def set_condition(
    status: JsonDict, ctype: ConditionType, truth: bool, reason: Reason, message: str, *, now: dt.datetime
) -> None:
    """``UpdateJobConditions``: the operator's setCondition rules, applied to ``status`` in place.

    A job with ``Failed=True`` is frozen; a condition with the same status and reason is left
    alone (so its message keeps the first wording); the transition time survives a change that
    keeps the status; Running and Restarting exclude each other; Succeeded or Failed turn Running
    to ``False``; the new condition goes last.
    """
    if has_condition(status, ConditionType.FAILED):
        return
    value = "True" if truth else "False"
    current = find_condition(status, ctype)
    if current is not None and current.get("status") == value and current.get("reason") == reason:
        return
    stamp = rfc3339(now)
    condition = {
        "type": str(ctype),
        "status": value,
        "reason": str(reason),
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }
    if current is not None and current.get("status") == value and current.get("lastTransitionTime"):
        condition["lastTransitionTime"] = current["lastTransitionTime"]
    kept: list[JsonDict] = []
    for existing in status.get("conditions") or []:
        kind = existing.get("type")
        if kind == ctype:
            continue
        if {kind, ctype} == {ConditionType.RUNNING, ConditionType.RESTARTING}:
            continue
        if kind == ConditionType.RUNNING and ctype in (ConditionType.SUCCEEDED, ConditionType.FAILED):
            kept.append({**existing, "status": "False"})
        else:
            kept.append(existing)
    status["conditions"] = [*kept, condition]


# --- replica statuses (pkg/core/status.go) ---------------------------------------------------------


def count_pod(counts: dict[str, int], pod: JsonDict) -> None:
    """``UpdateJobReplicaStatuses``: only Running pods are active; a Running pod being deleted
    (node gone, evicted) counts as failed, a Failed one being deleted no longer counts."""
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        counts["failed" if deleting else "active"] += 1
    elif phase == "Succeeded":
        counts["succeeded"] += 1
    elif phase == "Failed" and not deleting:
        counts["failed"] += 1


def replica_status(counts: dict[str, int], selector: str) -> JsonDict:
    """The wire form: Go's ``omitempty`` drops zero counts."""
    entry: JsonDict = {key: counts[key] for key in ("active", "succeeded", "failed") if counts.get(key)}
    entry["selector"] = selector
    return entry


def format_selector(labels: dict[str, str]) -> str:
    """``metav1.FormatLabelSelector`` of plain matchLabels: ``k=v`` pairs sorted by key."""
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


def update_conditions(
    status: JsonDict,
    job: JsonDict,
    specs: dict[str, JsonDict],
    *,
    counts: dict[str, dict[str, int]],
    permanent: dict[str, int],
    now: dt.datetime,
) -> None:
    """``UpdateJobStatus`` of the PyTorchJob reconciler, for a job whose pods were just counted.

    :param specs: replica specs with defaults applied, Master first.
    :param counts: per replica type, ``active``/``succeeded``/``failed`` pods.
    :param permanent: per replica type, failed pods whose ExitCode policy forbids a retry.
    """
    metadata = job.get("metadata") or {}
    name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "")
    has_master = MASTER in specs
    status.setdefault("startTime", rfc3339(now))
    for rtype, spec in specs.items():
        active, succeeded, failed = (counts[rtype][k] for k in ("active", "succeeded", "failed"))
        expected = spec["replicas"] - succeeded
        # The Master decides success; without one, the Workers do (all of them).
        if rtype == MASTER or (not has_master and rtype == WORKER):
            if active > 0:
                message = running_message(name, namespace, has_master)
                set_condition(status, ConditionType.RUNNING, True, Reason.RUNNING, message, now=now)
            if expected == 0:
                status.setdefault("completionTime", rfc3339(now))
                message = succeeded_message(name, namespace, has_master)
                set_condition(status, ConditionType.SUCCEEDED, True, Reason.SUCCEEDED, message, now=now)
                return
        if failed > 0 and spec["replicas"] > succeeded + active:
            # Never, or an ExitCode failure with a permanent code (1-127), fails the job.
            if spec["restartPolicy"] == "Never" or permanent[rtype] > 0:
                status.setdefault("completionTime", rfc3339(now))
                message = failed_message(name, failed, rtype)
                set_condition(status, ConditionType.FAILED, True, Reason.FAILED, message, now=now)
            else:
                message = restarting_message(name, failed, rtype)
                set_condition(status, ConditionType.RESTARTING, True, Reason.RESTARTING, message, now=now)
