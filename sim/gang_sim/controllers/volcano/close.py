"""The session's close: every gang's PodGroup status, conditions and events, from what it started with.

Phases are computed from the state the session *started* with, so a group's pods are bound one
session before its phase says ``Running`` (as on a real cluster); conditions
``Unschedulable``/``Scheduled`` carry the real message format (``messages``). Events (what
``kubectl describe`` shows, ``docs/architecture.md#volcano-messages``): the PodGroup gets
Warning ``Unschedulable`` with the gang's fit error while it cannot be placed (and the
misleading "0/N tasks in gang unschedulable: pod group is ready, N Binding" in the session that
binds it), Normal ``Scheduled`` "pod group is ready"; each pod of a gang that cannot be placed
gets Warning ``FailedScheduling`` with the fit error itself, and ``PodScheduled=False`` with the
message.

A gang that preempt or reclaim touched is closed from the session's end state instead
(`close_end_state`); a gang decided as last time reuses its status (`SessionMemo`).
"""

from __future__ import annotations

from gang_sim.controllers.volcano.close_end_state import close_end_state
from gang_sim.controllers.volcano.disrupt import Disruption
from gang_sim.controllers.volcano.messages import fit_error, fit_message, histogram, unready_prefix
from gang_sim.controllers.volcano.model import (
    Closed,
    Fit,
    Group,
    GroupEvent,
    JsonDict,
    Key,
    PodEvent,
    SessionMemo,
    SessionResult,
)
from gang_sim.controllers.volcano.queue_status import QueueTally


def close_all(
    groups: list[Group],
    result: SessionResult,
    *,
    enqueued: set[Key],
    ready_groups: set[Key],
    fit: dict[Key, Fit],
    could_go: dict[Key, dict[Key, str]],
    memo: SessionMemo | None,
    disruption: Disruption | None = None,
) -> QueueTally:
    """Every group's status, conditions and events; a group decided as last time reuses them."""
    closed = memo.closed if memo is not None else {}
    tally = QueueTally()
    for group in groups:
        key = group.key
        nodes_for = could_go.get(key)
        enqueued_now, ready = key in enqueued, key in ready_groups
        inputs = (
            enqueued_now,
            ready,
            fit.get(key) or group.waiting,
            tuple(sorted(nodes_for.items())) if nodes_for else (),
            disruption.signature(group) if disruption is not None else (),
        )
        previous = closed.get(key)
        if previous is not None and previous.group is group and previous.inputs == inputs:
            result.unchanged.add(key)
            result.podgroup_status[key] = status = previous.status
            tally.count(group, status)
            continue
        if disruption is not None and key in disruption.groups:
            status = close_end_state(
                group,
                enqueued=enqueued_now,
                fit=inputs[2],
                could_go=nodes_for or {},
                disruption=disruption,
                result=result,
            )
        else:
            status = _close(group, enqueued_now, ready, inputs[2], result)
        result.podgroup_status[key] = status
        tally.count(group, status)
        if memo is not None:
            memo.closed[key] = Closed(group, inputs, status)
        for (namespace, name), node in (nodes_for or {}).items():
            if disruption is not None and (namespace, name) in disruption.placements:
                continue  # preempt or reclaim placed it after all
            result.pod_unschedulable[(namespace, name)] = (
                f"Pod {namespace}/{name} can possibly be assigned to {node}, once minAvailable is satisfied"
            )
    return tally


def _close(
    group: Group,
    enqueued: bool,
    ready: bool,
    fit: Fit,
    result: SessionResult,
) -> JsonDict:
    phase = "Inqueue" if enqueued else group.phase
    conditions: list[JsonDict] = list((group.podgroup.get("status") or {}).get("conditions") or [])
    if group.incomplete:
        return {**(group.podgroup.get("status") or {}), "phase": group.phase, "conditions": conditions}
    unschedulable_now = False
    if group.tasks:
        schedulable, unschedulable, origin = fit
        if ready:
            condition = {
                "type": "Scheduled",
                "status": "True",
                "reason": "tasks in gang are ready to be scheduled",
                "message": "",
            }
            if group.phase != "Running" and not _has(conditions, condition):
                result.events.append(GroupEvent(group.key, "Normal", "Scheduled", "pod group is ready"))
            if binding := schedulable:  # vc-scheduler warns even in the session that binds
                ready_now = histogram(group, binding)
                message = f"{unready_prefix(group, group.scheduled + binding)}pod group is ready, {ready_now}"
                result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
        else:
            unschedulable_now = True
            message = fit_message(group, schedulable, unschedulable, origin)
            condition = {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": message,
            }
            result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
            error = fit_error(group, schedulable, unschedulable, origin)
            for task in group.pending:
                key = (task["metadata"]["namespace"], task["metadata"]["name"])
                result.pod_unschedulable[key] = message
                result.pod_events.append(PodEvent(key, "Warning", "FailedScheduling", error))
        conditions = [c for c in conditions if c.get("type") != condition["type"]] + [condition]
    elif phase == "Pending" and group.min_resources is not None:
        result.events.append(
            GroupEvent(
                group.key,
                "Warning",
                "Unschedulable",
                f"0/0 tasks in gang unschedulable: pod group is not ready, {group.min_member} minAvailable",
            )
        )
    if group.count("Running") and unschedulable_now:
        phase = "Unknown"
    elif group.scheduled >= group.min_member and group.tasks:
        completed = group.count("Succeeded") + group.count("Failed")
        phase = "Completed" if group.scheduled == completed else "Running"
    elif phase == "Completed" and not group.pending:
        pass  # a finished gang whose pods were cleaned up stays Completed instead of queueing again
    elif phase != "Inqueue":
        phase = "Pending"
    return {
        "phase": phase,
        "conditions": conditions,
        "running": group.count("Running"),
        "succeeded": group.count("Succeeded"),
        "failed": group.count("Failed"),
    }


def _has(conditions: list[JsonDict], condition: JsonDict) -> bool:
    return any(all(c.get(k) == v for k, v in condition.items()) for c in conditions)
