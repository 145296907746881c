"""Pod conditions as ``podutil.UpdatePodCondition`` keeps them, and the ``DisruptionTarget`` marks.

Every component that disrupts a pod first adds the ``DisruptionTarget`` condition (status
True) with its own reason, then deletes or ends the pod, so whoever owns the pod can tell a
disruption from a failure of its own. Shared by the API server (the Eviction API) and the
controllers (taint eviction, pod GC, the kubelet), which must not import each other. The
reasons and messages are upstream's: the condition type and ``TerminationByKubelet`` are
k8s.io/api constants (``core/v1/types.go:3532-3534`` and ``:3567-3569@kubernetes-1.36.3``);
``EvictionByEvictionAPI``, ``DeletionByTaintManager`` and ``DeletionByPodGC`` are string
literals of ``pkg/registry/core/pod/storage/eviction.go``,
``pkg/controller/tainteviction/taint_eviction.go`` and ``pkg/controller/podgc/gc_controller.go``
(``addConditionAndDeletePod`` twice, ``markFailedAndDeletePodWithCondition``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

JsonDict = dict[str, Any]

DISRUPTION_TARGET = "DisruptionTarget"


class Mark(NamedTuple):
    reason: str
    message: str


EVICTION_API = Mark("EvictionByEvictionAPI", "Eviction API: evicting")
TAINT_MANAGER = Mark("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
POD_GC = Mark("DeletionByPodGC", "PodGC: node no longer exists")
KUBELET = "TerminationByKubelet"  # the kubelet's message is its eviction message


def disruption_target(reason: str, message: str) -> JsonDict:
    return {"type": DISRUPTION_TARGET, "status": "True", "reason": reason, "message": message}


def with_condition(conditions: list[JsonDict] | None, condition: JsonDict, now: str) -> list[JsonDict]:
    """``conditions`` with ``condition`` set in place of the one of its type (a new list).

    As ``UpdatePodCondition``: ``lastTransitionTime`` moves only when the status changes, and a
    new condition goes at the end.
    """
    result = [dict(c) for c in conditions or []]
    entry = {"lastProbeTime": None, **condition}
    for index, old in enumerate(result):
        if old.get("type") == condition.get("type"):
            same = old.get("status") == condition.get("status")
            entry["lastTransitionTime"] = old.get("lastTransitionTime") if same else now
            result[index] = entry
            return result
    entry["lastTransitionTime"] = now
    result.append(entry)
    return result


def status_patch(pod: JsonDict, condition: JsonDict, now: str) -> JsonDict:
    """A strategic merge patch of ``pods/status`` setting ``condition`` (conditions merge by
    type), with the pod's UID, as ``utilpod.PatchPodStatus`` sends it."""
    conditions = with_condition((pod.get("status") or {}).get("conditions"), condition, now)
    entry = next(c for c in conditions if c.get("type") == condition.get("type"))
    return {"metadata": {"uid": (pod.get("metadata") or {}).get("uid")}, "status": {"conditions": [entry]}}


def is_ready(pod: JsonDict) -> bool:
    """``podutil.IsPodReady``: the ``Ready`` condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def find(pod: JsonDict, ctype: str) -> JsonDict | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == ctype), None)
