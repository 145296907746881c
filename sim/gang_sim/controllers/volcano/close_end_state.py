"""The close of a gang that preempt or reclaim touched: its status from the session's *end* state.

After preempt and reclaim (`disrupt`), every gang whose pods the session pipelined, kept, or
evicted is closed from the session's *end* state, as vc-scheduler's close reads its jobs
(``framework/session.go:581-632``): evicted pods are ``Releasing``, neither Running nor
scheduled; gang's condition (``gang.go:229-297``) is ``Scheduled`` while ``Ready + pending
best-effort >= minAvailable``, else ``Unschedulable`` with ``<minAvailable -
schedulable>/<tasks> tasks in gang unschedulable: <FitError>``; the phase is ``Unknown`` with
Running pods and that Unschedulable condition, else ``Running`` (or ``Completed``) with
``minMember`` scheduled pods, else ``Pending`` unless ``Inqueue``. A pipelined pod is told
``Pod ns/name can possibly be assigned to <node>, once resource is released and minAvailable is
satisfied`` (``api/job_info.go:906-911``), with ``FailedScheduling`` saying the same
(``cache/cache.go:1080-1125``), and gets ``status.nominatedNodeName`` when a pod was evicted for
it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gang_sim.controllers import capacity
from gang_sim.controllers.volcano.disrupt import Disruption
from gang_sim.controllers.volcano.messages import counts_text, fit_error_of
from gang_sim.controllers.volcano.model import (
    Fit,
    Group,
    GroupEvent,
    JsonDict,
    Key,
    PodEvent,
    SessionResult,
    pod_key,
    task_status,
)
from gang_sim.controllers.volcano.state import READY

_SCHEDULED = ("Running", "Bound", "Failed", "Succeeded")  # api.ScheduledStatus


@dataclass
class _EndState:
    """A gang's pods as the session leaves them."""

    statuses: Counter[str] = field(default_factory=Counter)
    pending: list[JsonDict] = field(default_factory=list)
    pipelined: list[tuple[Key, str]] = field(default_factory=list)
    kept: list[tuple[Key, str]] = field(default_factory=list)

    @property
    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((s, n) for s, n in self.statuses.items() if n))

    @property
    def ready_num(self) -> int:
        return sum(self.statuses[s] for s in READY)


def _end_state(group: Group, disruption: Disruption) -> _EndState:
    end = _EndState()
    for pod in group.tasks:
        key = pod_key(pod)
        placement = disruption.placements.get(key)
        if key in disruption.evicted:
            status = "Releasing"
        elif placement is not None:
            status = placement.status
            if status == "Pipelined":
                end.pipelined.append((key, placement.node))
            elif status == "Allocated":
                end.kept.append((key, placement.node))
        else:
            status = task_status(pod)
            if status == "Pending":
                end.pending.append(pod)
        end.statuses[status] += 1
    return end


def close_end_state(
    group: Group,
    *,
    enqueued: bool,
    fit: Fit,
    could_go: dict[Key, str],
    disruption: Disruption,
    result: SessionResult,
) -> JsonDict:
    """The gang's status from the session's end state (see the module docstring)."""
    end = _end_state(group, disruption)
    best_effort = sum(1 for pod in end.pending if not any(capacity.pod_requests(pod).values()))
    ready = end.ready_num + best_effort >= group.min_member
    conditions: list[JsonDict] = list((group.podgroup.get("status") or {}).get("conditions") or [])
    if ready:
        condition = _ready_condition(group, end, conditions, result)
    else:
        condition = _unready_condition(group, end, fit, could_go, result)
    conditions = [c for c in conditions if c.get("type") != condition["type"]] + [condition]
    for key, node in end.pipelined:
        text = (
            f"Pod {key[0]}/{key[1]} can possibly be assigned to {node}, "
            "once resource is released and minAvailable is satisfied"
        )
        result.pod_unschedulable[key] = text
        result.pod_events.append(PodEvent(key, "Warning", "FailedScheduling", text))
        if key in disruption.nominated:
            result.nominated[key] = node
    for key, node in end.kept:
        text = f"Pod {key[0]}/{key[1]} can possibly be assigned to {node}, once minAvailable is satisfied"
        result.pod_unschedulable[key] = text
    statuses = end.statuses
    phase = "Inqueue" if enqueued else group.phase
    scheduled = sum(statuses[s] for s in _SCHEDULED)
    if statuses["Running"] and not ready:
        phase = "Unknown"
    elif scheduled >= group.min_member and group.tasks:
        phase = "Completed" if scheduled == statuses["Succeeded"] + statuses["Failed"] else "Running"
    elif phase == "Completed" and not end.pending:
        pass
    elif phase != "Inqueue":
        phase = "Pending"
    return {
        "phase": phase,
        "conditions": conditions,
        "running": statuses["Running"],
        "succeeded": statuses["Succeeded"],
        "failed": statuses["Failed"],
    }


def _ready_condition(
    group: Group, end: _EndState, conditions: list[JsonDict], result: SessionResult
) -> JsonDict:
    condition: JsonDict = {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "message": "",
    }
    if group.phase != "Running" and not _has(conditions, condition):
        result.events.append(GroupEvent(group.key, "Normal", "Scheduled", "pod group is ready"))
    if end.statuses["Binding"]:  # the misleading warning of a binding session, as `close` gives
        unready = max(0, group.min_member - end.ready_num)
        message = (
            f"{unready}/{len(group.tasks)} tasks in gang unschedulable: pod group is ready, "
            + counts_text(end.counts, group.min_member)
        )
        result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
    return condition


def _unready_condition(
    group: Group, end: _EndState, fit: Fit, could_go: dict[Key, str], result: SessionResult
) -> JsonDict:
    schedulable = sum(1 for pod in end.pending if pod_key(pod) in could_go)
    error = fit_error_of(end.counts, group.min_member, schedulable, len(end.pending) - schedulable, fit[2])
    unready = max(0, group.min_member - (end.ready_num + schedulable))
    message = f"{unready}/{len(group.tasks)} tasks in gang unschedulable: {error}"
    result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
    for pod in end.pending:
        result.pod_unschedulable[pod_key(pod)] = message
        result.pod_events.append(PodEvent(pod_key(pod), "Warning", "FailedScheduling", error))
    return {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": message}


def _has(conditions: list[JsonDict], condition: JsonDict) -> bool:
    return any(all(c.get(k) == v for k, v in condition.items()) for c in conditions)
