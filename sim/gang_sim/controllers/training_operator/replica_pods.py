"""Reading the pods of a PyTorchJob: replica slots, phases, exit codes, restart counts.

Pure helpers for `pytorchjob_plan`; the exit code is the ``pytorch`` container's, as the
training-operator reads it, from the statuses the (simulated) kubelet writes.
"""

from __future__ import annotations

from typing import Any

from gang_sim.controllers.training_operator.pytorchjob_resources import (
    CONTAINER,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)

JsonDict = dict[str, Any]


def exit_code(pod: JsonDict) -> int | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if container.get("name") == CONTAINER and terminated and isinstance(terminated.get("exitCode"), int):
            return int(terminated["exitCode"])
    return None


def is_retryable(policy: str, pod: JsonDict) -> bool:
    """May a Failed pod be deleted and recreated? ExitCode: 128-255 (signals) retry, 1-127 do
    not; an unknown code retries, as the operator's 0xbeef placeholder does."""
    if policy in ("OnFailure", "Always"):
        return True
    if policy == "ExitCode":
        code = exit_code(pod)
        return code is None or code >= 128
    return False


def phase(pod: JsonDict) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def deleting(obj: JsonDict) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def name_of(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def slots_of(pods: list[JsonDict], rtype: str) -> dict[int, list[JsonDict]]:
    slots: dict[int, list[JsonDict]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(REPLICA_TYPE_LABEL) != rtype.lower():
            continue
        try:
            index = int(labels.get(REPLICA_INDEX_LABEL, ""))
        except ValueError:
            continue
        slots.setdefault(index, []).append(pod)
    return slots


def restart_count(pod: JsonDict) -> int:
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return sum(int(s.get("restartCount") or 0) for s in statuses)
