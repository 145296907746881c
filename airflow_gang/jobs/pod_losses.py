"""How a pod went: the marks the cluster leaves on a pod it takes from a running gang.

`pod_loss` reads one pod's mark (docs/disruptions.md lists who writes which, with the source
lines); `live_disruption` tells, from a gang's objects alone, whether it is disrupted right now
(the Gang jobs page, which keeps no memory between looks). `airflow_gang.jobs.disruption`
follows episodes across looks. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]


class DisruptionReason(StrEnum):
    PREEMPTED = "preempted"  # Volcano's preempt (a higher-priority job of the same queue)
    RECLAIMED = "reclaimed"  # Volcano's reclaim (another queue taking back its share)
    NODE_LOST = "node_lost"  # the node stopped answering, or went away
    EVICTED = "evicted"  # the Eviction API (a drain), or the kubelet under node pressure
    DELETED = "deleted"  # deleted with no mark of why (a person, another controller)


# When one episode loses pods for several reasons, the row names the most telling one.
STRENGTH = [
    DisruptionReason.NODE_LOST,
    DisruptionReason.RECLAIMED,
    DisruptionReason.PREEMPTED,
    DisruptionReason.EVICTED,
    DisruptionReason.DELETED,
]
# DisruptionTarget reasons (k8s.io/api/core/v1 types.go) and what each means for a gang.
_TARGET_REASONS = {
    "PreemptionByScheduler": DisruptionReason.PREEMPTED,
    "EvictionByEvictionAPI": DisruptionReason.EVICTED,
    "DeletionByTaintManager": DisruptionReason.NODE_LOST,
    "DeletionByPodGC": DisruptionReason.NODE_LOST,
    "TerminationByKubelet": DisruptionReason.EVICTED,
}
WORDS = {
    DisruptionReason.PREEMPTED: "preempted",
    DisruptionReason.RECLAIMED: "reclaimed",
    DisruptionReason.NODE_LOST: "node lost",
    DisruptionReason.EVICTED: "evicted",
    DisruptionReason.DELETED: "pods deleted",
}


@dataclass(frozen=True)
class PodLoss:
    """Why one pod went, as its last known state shows."""

    pod: str
    node: str | None
    reason: DisruptionReason
    detail: str
    at: str | None  # the cluster's moment of the mark, when it carries one


def _time(value: Any) -> str | None:
    moment = parse_time(value)
    return moment.isoformat() if moment else None


def pod_loss(pod: JsonDict) -> PodLoss | None:
    """The disruption mark on ``pod``, or None when it carries none."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    name, node = str(metadata.get("name") or ""), (pod.get("spec") or {}).get("nodeName")
    conditions = {str(c.get("type")): c for c in status.get("conditions") or []}
    target, ready = conditions.get("DisruptionTarget"), conditions.get("Ready") or {}
    if ready.get("reason") == "Evict":
        # Volcano's evictor: Ready=False "Pod is evicted, because of preempt|reclaim", then a
        # DisruptionTarget whose words are the same for both (docs/disruptions.md).
        message = str(ready.get("message") or "")
        meaning = DisruptionReason.RECLAIMED if "reclaim" in message else DisruptionReason.PREEMPTED
        return PodLoss(name, node, meaning, message, _time((target or ready).get("lastTransitionTime")))
    if target is not None and target.get("status") == "True":
        reason = str(target.get("reason") or "")
        meaning = _TARGET_REASONS.get(reason, DisruptionReason.EVICTED)
        message = str(target.get("message") or "")
        if reason == "TerminationByKubelet":  # the kubelet says which resource ran short here
            message = str(status.get("message") or message)
        return PodLoss(name, node, meaning, message or reason, _time(target.get("lastTransitionTime")))
    if status.get("phase") == "Failed" and status.get("reason") in ("Evicted", "NodeLost"):
        meaning = DisruptionReason.EVICTED if status["reason"] == "Evicted" else DisruptionReason.NODE_LOST
        return PodLoss(name, node, meaning, str(status.get("message") or status["reason"]), None)
    return None


def live_disruption(seen: GangSnapshot) -> JsonDict | None:
    """A running gang's disruption as its objects show it now, for a reader with no memory of
    earlier looks (the Gang jobs page): pods still carrying a mark, or a gang that was running
    and holds fewer than ``minMember`` pods (its job ``Restarting``, its PodGroup ``Unknown``)."""
    status = seen.status
    if seen.job is None or status.finished or not (status.admitted or status.podgroup_phase == "Unknown"):
        return None
    marked = [
        loss
        for pod in seen.pods
        if (
            (pod.get("metadata") or {}).get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") == "Failed"
        )
        and (loss := pod_loss(pod)) is not None
    ]
    alive = sum(1 for pod in seen.pods if ready(pod))
    below = alive < status.min_member and (
        status.podgroup_phase == "Unknown" or status.job_condition == "Restarting"
    )
    if not marked and not below:
        return None
    strongest = min(marked, key=lambda loss: STRENGTH.index(loss.reason)) if marked else None
    moments = sorted(loss.at for loss in marked if loss.at)
    return {
        "reason": strongest.reason.value if strongest else None,
        "detail": strongest.detail
        if strongest
        else f"the gang holds {alive} of its minMember {status.min_member} pods",
        "pods_lost": len(marked) or max(0, status.replicas - alive),
        "pods": [loss.pod for loss in marked],
        "since": moments[0] if moments else None,
        "requeued": alive < status.min_member,
    }


def holds_node(pod: JsonDict) -> bool:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    return bool((pod.get("spec") or {}).get("nodeName")) and not deleting and phase in ("Pending", "Running")


def ready(pod: JsonDict) -> bool:
    """Holds its node, or already finished its part: what Volcano counts towards ``minMember``
    (``ReadyTaskNum``: Bound, Running, Succeeded; volcano ``pkg/scheduler/api/job_info.go:925-934``)."""
    return holds_node(pod) or (pod.get("status") or {}).get("phase") == "Succeeded"


def pod_uid(pod: JsonDict) -> str:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("uid") or metadata.get("name") or "")


def deleted_loss(pod: JsonDict) -> PodLoss:
    metadata = pod.get("metadata") or {}
    return PodLoss(
        str(metadata.get("name") or ""),
        (pod.get("spec") or {}).get("nodeName"),
        DisruptionReason.DELETED,
        "deleted without a disruption condition (by a person or another controller)",
        None,
    )
