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
  ``Scheduled`` "Successfully assigned" event of a bound pod is the binder's (`volcano.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, lru_cache
from typing import Any

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.quantity import format_quantity

JsonDict = dict[str, Any]
Key = tuple[str, str]

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SCHEDULER_NAME = "volcano"
ADMITTED_PHASES = frozenset({"Inqueue", "Running", "Unknown"})


@dataclass(frozen=True)
class SessionConfig:
    overcommit_factor: Decimal = Decimal("1.2")
    scheduler_name: str = SCHEDULER_NAME


@dataclass(frozen=True)
class Snapshot:
    nodes: list[JsonDict]
    pods: list[JsonDict]
    podgroups: list[JsonDict]
    queues: list[JsonDict]
    priority_classes: list[JsonDict] = field(default_factory=list)
    tasks_by_group: Mapping[Key, list[JsonDict]] | None = None
    """Each PodGroup's pods (of this scheduler), when the caller keeps them indexed; else the
    session groups ``pods`` by their group annotation itself. With it, ``pods`` need only hold
    the pods that hold node resources (bound, not finished): nothing else reads them."""


@dataclass(frozen=True)
class GroupEvent:
    podgroup: Key
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class PodEvent:
    pod: Key
    type: str
    reason: str
    message: str


@dataclass
class SessionResult:
    bindings: list[tuple[str, str, str]] = field(default_factory=list)
    """(namespace, pod, node), in the order they should be bound."""
    podgroup_status: dict[Key, JsonDict] = field(default_factory=dict)
    """Every PodGroup's status as this session leaves it (``conditions`` without times)."""
    events: list[GroupEvent] = field(default_factory=list)
    pod_events: list[PodEvent] = field(default_factory=list)
    pod_unschedulable: dict[Key, str] = field(default_factory=dict)
    """Pending pods left unbound, with the PodScheduled=False message."""
    queue_status: dict[str, JsonDict] = field(default_factory=dict)
    unchanged: set[Key] = field(default_factory=set)
    """Groups decided exactly as in the previous session (`SessionMemo`): their pod conditions
    and events were produced then and are left out of this result."""


@dataclass
class _Closed:
    inputs: tuple[Any, ...]
    status: JsonDict


class SessionMemo:
    """What one session can take over from the previous one.

    A session restates every gang, and a queue of a thousand waiting gangs would be restated
    five times a second. A gang whose PodGroup and pods are the very objects the last session
    saw (the informer replaces an object when it changes), and whose admission and placement
    came out the same, gets the same status and the same pod conditions and events: those are
    reused instead of rebuilt, and its pod-level outputs are not repeated.
    """

    def __init__(self) -> None:
        self.groups: dict[Key, _Group] = {}
        self.closed: dict[Key, _Closed] = {}

    def forget(self, key: Key) -> None:
        """Decide ``key`` afresh next session (a write of its outcome failed)."""
        self.groups.pop(key, None)
        self.closed.pop(key, None)


@dataclass
class _Group:
    podgroup: JsonDict
    key: Key
    queue: str
    min_member: int
    min_resources: Resources | None
    priority: int
    phase: str
    tasks: list[JsonDict]

    # A session reads these many times for thousands of groups; the tasks do not change in it.
    @cached_property
    def pending(self) -> list[JsonDict]:
        return sorted(
            (t for t in self.tasks if not (t.get("spec") or {}).get("nodeName") and not _terminating(t)),
            key=lambda t: t["metadata"]["name"],
        )

    @cached_property
    def histogram(self) -> Counter[str]:
        return Counter(_task_status(task) for task in self.tasks)

    @cached_property
    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self.histogram.items()))

    def count(self, status: str) -> int:
        return self.histogram[status]

    @cached_property
    def scheduled(self) -> int:
        return sum(self.histogram[status] for status in ("Bound", "Running", "Succeeded", "Failed"))

    @property
    def incomplete(self) -> bool:
        """Some pods exist, fewer than the gang needs (the controller is still creating them).

        vc-scheduler's gang ``JobValid`` drops such a job from the session before any action, and
        the session writes nothing for it: no enqueue, no binding, no condition, no event. A group
        with no pods at all is left to the enqueue gate, as the real training-operator needs.
        """
        return 0 < len(self.tasks) < self.min_member

    @cached_property
    def allocated(self) -> Resources:
        return capacity.total(capacity.pod_requests(t) for t in self.tasks if capacity.holds_resources(t))


def _terminating(pod: JsonDict) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _task_status(pod: JsonDict) -> str:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Pending" and (pod.get("spec") or {}).get("nodeName"):
        return "Bound"
    return str(phase)


def _priority_values(priority_classes: list[JsonDict]) -> tuple[dict[str, int], int]:
    values = {pc["metadata"]["name"]: int(pc.get("value", 0)) for pc in priority_classes}
    default = next((int(pc.get("value", 0)) for pc in priority_classes if pc.get("globalDefault")), 0)
    return values, default


def _groups(snapshot: Snapshot, config: SessionConfig, memo: SessionMemo | None) -> list[_Group]:
    tasks = snapshot.tasks_by_group
    if tasks is None:
        grouped: dict[Key, list[JsonDict]] = {}
        for pod in snapshot.pods:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            group = annotations.get(GROUP_ANNOTATION)
            if group and (pod.get("spec") or {}).get("schedulerName") == config.scheduler_name:
                grouped.setdefault((pod["metadata"]["namespace"], group), []).append(pod)
        tasks = grouped
    priorities, default_priority = _priority_values(snapshot.priority_classes)
    groups = []
    for podgroup in snapshot.podgroups:
        metadata, spec = podgroup["metadata"], podgroup.get("spec") or {}
        key = (metadata["namespace"], metadata["name"])
        members = tasks.get(key, [])
        priority = priorities.get(spec.get("priorityClassName") or "", default_priority)
        previous = memo.groups.get(key) if memo is not None else None
        if previous is not None and _same_group(previous, podgroup, members, priority):
            groups.append(previous)
            continue
        min_resources = spec.get("minResources")
        groups.append(
            _Group(
                podgroup=podgroup,
                key=key,
                queue=spec.get("queue") or "default",
                min_member=int(spec.get("minMember") or 0),
                min_resources=capacity.parse_resources(min_resources) if min_resources else None,
                priority=priority,
                phase=(podgroup.get("status") or {}).get("phase") or "Pending",
                tasks=list(members),
            )
        )
    if memo is not None:
        memo.groups = {group.key: group for group in groups}
        memo.closed = {key: closed for key, closed in memo.closed.items() if key in memo.groups}
    # Volcano's job order: priority first, then age (1 s resolution), then namespace/name.
    groups.sort(key=lambda g: (-g.priority, g.podgroup["metadata"].get("creationTimestamp", ""), g.key))
    return groups


def _same_group(group: _Group, podgroup: JsonDict, tasks: list[JsonDict], priority: int) -> bool:
    return (
        group.podgroup is podgroup
        and group.priority == priority
        and len(group.tasks) == len(tasks)
        and all(mine is theirs for mine, theirs in zip(group.tasks, tasks, strict=True))
    )


def _queue_state(queue: JsonDict) -> str:
    return str((queue.get("status") or {}).get("state") or "Open")


def _unmet(need: Resources, have: Resources, dimensions: Resources) -> list[str]:
    return [
        name for name in sorted(dimensions) if dimensions[name] > 0 and need.get(name, 0) > have.get(name, 0)
    ]


def _still_needed(group: _Group) -> Resources:
    """What an admitted group may still claim: its minResources less what it already holds."""
    if group.min_resources is None:
        return {}
    if group.phase == "Inqueue":
        return dict(group.min_resources)
    held = group.allocated
    return {
        name: max(Decimal(0), amount - held.get(name, Decimal(0)))
        for name, amount in group.min_resources.items()
    }


class _Enqueue:
    """The enqueue gate: overcommit and proportion, with running totals across one session."""

    def __init__(self, snapshot: Snapshot, groups: list[_Group], config: SessionConfig) -> None:
        nodes = [n for n in snapshot.nodes if capacity.node_is_schedulable(n)]
        self.cluster = capacity.total(capacity.node_allocatable(n) for n in nodes)
        used = capacity.total(capacity.pod_requests(p) for p in snapshot.pods if capacity.holds_resources(p))
        self.idle = capacity.subtract(capacity.scale(self.cluster, config.overcommit_factor), used)
        self.reserved = capacity.total(_still_needed(g) for g in groups if g.phase in ADMITTED_PHASES)
        self.queues = {q["metadata"]["name"]: q for q in snapshot.queues}
        self.queue_claims: dict[str, Resources] = {}
        for group in groups:
            if group.phase in ADMITTED_PHASES:
                claim = capacity.add(group.allocated, _still_needed(group))
                self.queue_claims[group.queue] = capacity.add(self.queue_claims.get(group.queue, {}), claim)

    def admit(self, group: _Group) -> list[str]:
        """Reasons the group stays Pending (empty: admitted, and the totals now include it)."""
        queue = self.queues.get(group.queue)
        if queue is None:
            return [f"queue {group.queue} does not exist"]
        if _queue_state(queue) != "Open":
            return [f"queue {group.queue} is {_queue_state(queue)}, not Open"]
        if group.min_resources is None:
            return []
        request = group.min_resources
        reasons = []
        overused = _unmet(capacity.add(self.reserved, request), self.idle, request)
        if overused:
            reasons.append(f"resource in cluster is overused: overused {', '.join(overused)}")
        capability = capacity.parse_resources((queue.get("spec") or {}).get("capability"))
        limit = {**self.cluster, **capability}
        claims = capacity.add(self.queue_claims.get(group.queue, {}), request)
        insufficient = _unmet(claims, limit, request)
        if insufficient:
            reasons.append(f"queue resource quota insufficient: insufficient {', '.join(insufficient)}")
        if not reasons:
            self.reserved = capacity.add(self.reserved, request)
            self.queue_claims[group.queue] = claims
        return reasons


def _histogram(group: _Group, binding: int = 0) -> str:
    """``4 Pending, 4 minAvailable``: task counts by status (``binding`` of the pending ones
    counted as ``Binding``) and the gang size, sorted as vc-scheduler prints them."""
    return _histogram_text(group.counts, group.min_member, binding)


@lru_cache(maxsize=4096)
def _histogram_text(counts: tuple[tuple[str, int], ...], min_member: int, binding: int) -> str:
    # Cached: a thousand queued gangs of one shape share one text, restated every session.
    histogram = Counter(dict(counts))
    if binding:
        histogram["Pending"] -= binding
        histogram["Binding"] += binding
    return ", ".join(
        sorted([f"{n} {status}" for status, n in histogram.items() if n] + [f"{min_member} minAvailable"])
    )


def _fit_error(group: _Group, schedulable: int, unschedulable: int, origin: str | None) -> str:
    """vc-scheduler's ``JobInfo.FitError()`` for a gang that cannot be placed."""
    return _fit_error_text(_histogram(group), schedulable, unschedulable, origin)


@lru_cache(maxsize=4096)
def _fit_error_text(histogram: str, schedulable: int, unschedulable: int, origin: str | None) -> str:
    message = f"pod group is not ready, {histogram}"
    pending = [
        f"{n} {label}" for n, label in ((schedulable, "Schedulable"), (unschedulable, "Unschedulable")) if n
    ]
    if pending:
        message += f"; Pending: {', '.join(pending)}"
    if origin:
        message += f". Origin reason is {origin}"
    return message


def _unready_prefix(group: _Group, ready: int) -> str:
    return f"{max(0, group.min_member - ready)}/{len(group.tasks)} tasks in gang unschedulable: "


def _fit_message(group: _Group, schedulable: int, unschedulable: int, origin: str | None) -> str:
    """The gang plugin's condition and event text: the unready count, then the fit error."""
    prefix = _unready_prefix(group, group.scheduled + schedulable)
    return prefix + _fit_error(group, schedulable, unschedulable, origin)


def run_session(
    snapshot: Snapshot, config: SessionConfig = SessionConfig(), memo: SessionMemo | None = None
) -> SessionResult:
    """Decide one session: which groups enqueue, which pods bind, and every group's new status.

    With a `memo` (kept from one session to the next), gangs decided as last time reuse that
    outcome and are listed in ``unchanged``.
    """
    result = SessionResult()
    groups = _groups(snapshot, config, memo)
    gate = _Enqueue(snapshot, groups, config)
    enqueued: set[Key] = set()
    for group in groups:
        if group.phase != "Pending" or group.incomplete:
            continue
        reasons = gate.admit(group)
        if reasons:
            # Restated every session, not memoized: which rejections apply moves with the
            # queue's running totals, and the recorder drops repeats.
            for reason in reasons:
                result.events.append(GroupEvent(group.key, "Normal", "Unschedulable", reason))
        else:
            enqueued.add(group.key)

    nodes = sorted((n for n in snapshot.nodes), key=lambda n: n["metadata"]["name"])
    free = capacity.node_free(nodes, snapshot.pods)
    ready_groups: set[Key] = set()
    fit: dict[Key, tuple[int, int, str | None]] = {}
    could_go: dict[Key, dict[Key, str]] = {}
    for group in groups:
        # A Completed gang is past the gate too (its Succeeded pods count as ready), but it is
        # not in ADMITTED_PHASES, which also decides what the enqueue gate keeps reserved.
        admitted = group.phase in ADMITTED_PHASES or group.phase == "Completed" or group.key in enqueued
        pending = group.pending
        if not admitted or group.incomplete:
            fit[group.key] = (0, len(pending), None)
            continue
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

    _close_all(
        groups,
        result,
        enqueued=enqueued,
        ready_groups=ready_groups,
        fit=fit,
        could_go=could_go,
        memo=memo,
    )
    result.queue_status = _queue_statuses(snapshot, groups, result)
    return result


def _close_all(
    groups: list[_Group],
    result: SessionResult,
    *,
    enqueued: set[Key],
    ready_groups: set[Key],
    fit: dict[Key, tuple[int, int, str | None]],
    could_go: dict[Key, dict[Key, str]],
    memo: SessionMemo | None,
) -> None:
    """Every group's status, conditions and events; a group decided as last time reuses them."""
    for group in groups:
        nodes_for = could_go.get(group.key) or {}
        enqueued_now, ready = group.key in enqueued, group.key in ready_groups
        inputs = (enqueued_now, ready, fit[group.key], tuple(sorted(nodes_for.items())))
        previous = memo.closed.get(group.key) if memo is not None else None
        if previous is not None and previous.inputs[0] is group and previous.inputs[1:] == inputs:
            result.unchanged.add(group.key)
            result.podgroup_status[group.key] = previous.status
            continue
        status = _close(group, enqueued_now, ready, fit, result)
        result.podgroup_status[group.key] = status
        if memo is not None:
            memo.closed[group.key] = _Closed((group, *inputs), status)
        for (namespace, name), node in nodes_for.items():
            result.pod_unschedulable[(namespace, name)] = (
                f"Pod {namespace}/{name} can possibly be assigned to {node}, once minAvailable is satisfied"
            )


def _close(
    group: _Group,
    enqueued: bool,
    ready: bool,
    fit: dict[Key, tuple[int, int, str | None]],
    result: SessionResult,
) -> JsonDict:
    phase = "Inqueue" if enqueued else group.phase
    conditions: list[JsonDict] = list((group.podgroup.get("status") or {}).get("conditions") or [])
    if group.incomplete:
        return {**(group.podgroup.get("status") or {}), "phase": group.phase, "conditions": conditions}
    unschedulable_now = False
    if group.tasks:
        schedulable, unschedulable, origin = fit[group.key]
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
                ready_now = _histogram(group, binding)
                message = (
                    f"{_unready_prefix(group, group.scheduled + binding)}pod group is ready, {ready_now}"
                )
                result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
        else:
            unschedulable_now = True
            message = _fit_message(group, schedulable, unschedulable, origin)
            condition = {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": message,
            }
            result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
            fit_error = _fit_error(group, schedulable, unschedulable, origin)
            for task in group.pending:
                key = (task["metadata"]["namespace"], task["metadata"]["name"])
                result.pod_unschedulable[key] = message
                result.pod_events.append(PodEvent(key, "Warning", "FailedScheduling", fit_error))
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


def _queue_statuses(snapshot: Snapshot, groups: list[_Group], result: SessionResult) -> dict[str, JsonDict]:
    statuses: dict[str, JsonDict] = {}
    for queue in snapshot.queues:
        name = queue["metadata"]["name"]
        members = [g for g in groups if g.queue == name]
        phases = Counter(result.podgroup_status[g.key]["phase"] for g in members)
        state = _queue_state(queue)
        if state == "Closing" and not any(phases[p] for p in ("Inqueue", "Running", "Unknown")):
            state = "Closed"
        statuses[name] = {
            "state": state,
            "allocated": _render(capacity.total(g.allocated for g in members)),
            "pending": phases["Pending"],
            "inqueue": phases["Inqueue"],
            "running": phases["Running"],
            "unknown": phases["Unknown"],
            "completed": phases["Completed"],
        }
    return statuses
