"""One Volcano scheduling session as a pure function: cluster snapshot in, decisions out.

Mirrors the default ``enqueue, allocate`` actions with the gang, overcommit, proportion and
priority plugins (DOMAIN.md §1 and the observations of §10):

- **enqueue**: a ``Pending`` PodGroup becomes ``Inqueue`` when it has no ``minResources``, or
  when both the overcommit check (cluster x factor - used must cover what admitted groups still
  need plus this one) and the proportion check (the queue is Open and its capability — or the
  whole cluster — covers its allocation, its admitted groups and this one) pass. Rejected groups
  are skipped; later ones may still enqueue.
- **allocate**: pending pods of admitted groups are placed first-fit on a scratch copy of the
  nodes; the placement is committed (pods bound) only if the gang then has ``minMember`` pods
  placed — all or nothing.
- **session close**: phases are computed from the state the session *started* with, so a
  group's pods are bound one session before its phase says ``Running`` (as on a real cluster);
  conditions ``Unschedulable``/``Scheduled`` carry the real message format.
- **events** (what ``kubectl describe`` shows, §10): the PodGroup gets Normal ``Unschedulable``
  for each enqueue rejection, Warning ``Unschedulable`` with the gang's fit error while it cannot
  be placed (and the misleading "0/N tasks in gang unschedulable: pod group is ready, N Binding"
  in the session that binds it), Normal ``Scheduled`` "pod group is ready"; each pod of a gang
  that cannot be placed gets Warning ``FailedScheduling`` with the fit error itself. The Normal
  ``Scheduled`` "Successfully assigned" event of a bound pod is the binder's (`scheduler.py`).
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.disrupt import Disruption, close_end_state, run_disruptive
from gang_sim.controllers.volcano.gate import EnqueueGate, queue_state
from gang_sim.controllers.volcano.messages import fit_error, fit_message, histogram, unready_prefix
from gang_sim.controllers.volcano.model import (
    ADMITTED_PHASES,
    GROUP_ANNOTATION,
    SCHEDULER_NAME,
    Closed,
    Group,
    GroupEvent,
    JsonDict,
    Key,
    PodEvent,
    SessionConfig,
    SessionMemo,
    SessionResult,
    Snapshot,
    gather_groups,
)
from gang_sim.quantity import format_quantity

__all__ = [
    "GROUP_ANNOTATION",
    "SCHEDULER_NAME",
    "GroupEvent",
    "PodEvent",
    "SessionConfig",
    "SessionMemo",
    "SessionResult",
    "Snapshot",
    "run_session",
]


DEFAULT_CONFIG = SessionConfig()


def run_session(
    snapshot: Snapshot, config: SessionConfig = DEFAULT_CONFIG, memo: SessionMemo | None = None
) -> SessionResult:
    """Decide one session: which groups enqueue, which pods bind, and every group's new status.

    With a `memo` (kept from one session to the next), gangs decided as last time reuse that
    outcome and are listed in ``unchanged``.
    """
    result = SessionResult()
    groups = gather_groups(snapshot, config, memo)
    gate = EnqueueGate(snapshot, groups, config)
    enqueued: set[Key] = set()
    placeable: list[Group] = []  # past the gate, in order: the gangs the allocate action tries
    told: dict[Key, tuple[Group, tuple[str, ...]]] = memo.rejections if memo is not None else {}
    for group in groups:
        if group.incomplete:
            continue
        if group.phase != "Pending":
            # A Completed gang is past the gate too (its Succeeded pods count as ready), but it
            # is not in ADMITTED_PHASES, which also decides what the enqueue gate keeps reserved.
            if group.phase in ADMITTED_PHASES or group.phase == "Completed":
                placeable.append(group)
            continue
        reasons = gate.admit(group)
        if not reasons:
            enqueued.add(group.key)
            placeable.append(group)
            continue
        # Which rejections apply moves with the queue's running totals: they are decided every
        # session, and stated again unless this very gang was told exactly these last session
        # (the recorder would drop the repeats).
        previous = told.get(group.key)
        if previous is not None and previous[0] is group and previous[1] == reasons:
            continue
        if memo is not None:
            told[group.key] = (group, reasons)
        for reason in reasons:
            result.events.append(GroupEvent(group.key, "Normal", "Unschedulable", reason))

    disruption: Disruption | None = None
    if config.scheduler.disrupts:  # preempt or reclaim configured (`disrupt`)
        allocated, disruption = run_disruptive(
            snapshot,
            groups=groups,
            placeable=placeable,
            enqueued=enqueued,
            conf=config.scheduler,
            result=result,
        )
        ready_groups, fit, could_go = allocated.ready_groups, allocated.fit, allocated.could_go
    else:
        ready_groups, fit, could_go = _allocate(snapshot, placeable, result)
    tally = _close_all(
        groups,
        result,
        enqueued=enqueued,
        ready_groups=ready_groups,
        fit=fit,
        could_go=could_go,
        memo=memo,
        disruption=disruption,
    )
    result.queue_status = _queue_statuses(snapshot, tally)
    return result


Fit = tuple[int, int, "str | None"]
"""(schedulable, unschedulable, origin reason) of a gang's pending pods."""


def _allocate(
    snapshot: Snapshot, placeable: list[Group], result: SessionResult
) -> tuple[set[Key], dict[Key, Fit], dict[Key, dict[Key, str]]]:
    """Place the pending pods of admitted gangs, all or nothing per gang; bindings go to ``result``.

    Returns the gangs placed whole, the fit of each gang tried (the others': `Group.waiting`),
    and where the pods of a gang that could not be placed whole would have gone.
    """
    nodes = sorted((n for n in snapshot.nodes), key=lambda n: n["metadata"]["name"])
    free = capacity.node_free(nodes, snapshot.pods)
    ready_groups: set[Key] = set()
    fit: dict[Key, Fit] = {}
    could_go: dict[Key, dict[Key, str]] = {}
    for group in placeable:
        pending = group.pending
        scratch = {name: dict(amounts) for name, amounts in free.items()}
        placed: list[tuple[JsonDict, str]] = []
        origin: str | None = None
        for task in pending:
            node, why = capacity.place(task, nodes, scratch)
            if node is None:
                origin = (
                    origin or f"{task['metadata']['name']}: {why.replace('are available', 'are unavailable')}"
                )
                continue
            scratch[node] = capacity.subtract(
                scratch[node], {**capacity.pod_requests(task), "pods": Decimal(1)}
            )
            placed.append((task, node))
        if group.scheduled + len(placed) >= group.min_member and (placed or group.scheduled):
            free = scratch
            ready_groups.add(group.key)
            result.bindings += [(t["metadata"]["namespace"], t["metadata"]["name"], n) for t, n in placed]
            fit[group.key] = (len(placed), len(pending) - len(placed), None)
        else:
            fit[group.key] = (len(placed), len(pending) - len(placed), origin)
            could_go[group.key] = {
                (task["metadata"]["namespace"], task["metadata"]["name"]): node for task, node in placed
            }
    return ready_groups, fit, could_go


class _Tally:
    """Per queue, its gangs' phases as the session leaves them and what they hold."""

    def __init__(self) -> None:
        self.phases: dict[str, Counter[str]] = {}
        self.allocated: dict[str, list[Resources]] = {}

    def count(self, group: Group, status: JsonDict) -> None:
        phases = self.phases.get(group.queue)
        if phases is None:
            phases = self.phases[group.queue] = Counter()
        phases[status["phase"]] += 1
        if group.allocated:
            self.allocated.setdefault(group.queue, []).append(group.allocated)


def _close_all(
    groups: list[Group],
    result: SessionResult,
    *,
    enqueued: set[Key],
    ready_groups: set[Key],
    fit: dict[Key, Fit],
    could_go: dict[Key, dict[Key, str]],
    memo: SessionMemo | None,
    disruption: Disruption | None = None,
) -> _Tally:
    """Every group's status, conditions and events; a group decided as last time reuses them."""
    closed = memo.closed if memo is not None else {}
    tally = _Tally()
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
            if binding := schedulable:  # vc-scheduler warns even in the session that binds (§10)
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


def _render(resources: Resources) -> dict[str, str]:
    return {
        name: format_quantity(amount, binary="memory" in name or "storage" in name)
        for name, amount in sorted(resources.items())
        if amount
    }


def _queue_statuses(snapshot: Snapshot, tally: _Tally) -> dict[str, JsonDict]:
    statuses: dict[str, JsonDict] = {}
    for queue in snapshot.queues:
        name = queue["metadata"]["name"]
        phases = tally.phases.get(name) or Counter()
        state = queue_state(queue)
        if state == "Closing" and not any(phases[p] for p in ("Inqueue", "Running", "Unknown")):
            state = "Closed"
        statuses[name] = {
            "state": state,
            "allocated": _render(capacity.total(tally.allocated.get(name, []))),
            "pending": phases["Pending"],
            "inqueue": phases["Inqueue"],
            "running": phases["Running"],
            "unknown": phases["Unknown"],
            "completed": phases["Completed"],
        }
    return statuses
