"""A session with ``preempt`` or ``reclaim`` configured: allocate, the actions, and the close.

Only `SessionConfig.scheduler` with either action brings a session here; the default
configuration keeps the simulator's earlier allocate (`session`), unchanged.

**allocate** then follows Volcano v1.16.0-alpha.1 more closely where evictions need it
(``pkg/scheduler/actions/allocate/allocate.go``): jobs in the configured job order (priority,
then *gang's not-ready-first*, then drf's smaller share, then age: ``gang.go:139-163``, so a
preemptor gang comes before the pending pods its victims' controller recreated); a pod nominated
to a node (``status.nominatedNodeName``) tries that node first when its FutureIdle fits
(:795-804); a pod that fits no node's idle resources is *Pipelined* on a node whose
FutureIdle — idle plus what terminating pods still hold, less what is pipelined already — fits
it (:882-985). A gang placed whole is bound, its pipelined pods wait; a gang that is only
pipelined keeps its places for the session and binds nothing (:343, :854-862). Terminating pods
hold their node's resources until they are gone, so the preemptor is bound by a later session
once its victims have gone. Still not simulated in allocate: the queue order and proportion's
``Overused``/``Allocatable`` gates (:294, :744).

Then preempt and reclaim run in the configured order (`preempt`), and every gang whose
pods the session pipelined, kept, or evicted is closed from the session's *end* state
(`close_end_state`), as vc-scheduler's close reads its jobs (``framework/session.go:581-632``):
evicted pods are ``Releasing``, neither Running nor scheduled; gang's condition
(``gang.go:229-297``) is ``Scheduled`` while ``Ready + pending best-effort >= minAvailable``,
else ``Unschedulable`` with ``<minAvailable - schedulable>/<tasks> tasks in gang unschedulable:
<FitError>``; the phase is ``Unknown`` with Running pods and that Unschedulable condition, else
``Running`` (or ``Completed``) with ``minMember`` scheduled pods, else ``Pending`` unless
``Inqueue``. A pipelined pod is told ``Pod ns/name can possibly be assigned to <node>, once
resource is released and minAvailable is satisfied`` (``api/job_info.go:906-911``), with
``FailedScheduling`` saying the same (``cache/cache.go:1080-1125``), and gets
``status.nominatedNodeName`` when a pod was evicted for it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.messages import counts_text, fit_error_of
from gang_sim.controllers.volcano.model import (
    Eviction,
    Group,
    GroupEvent,
    JsonDict,
    Key,
    PodEvent,
    SessionResult,
    Snapshot,
    task_status,
)
from gang_sim.controllers.volcano.plugins import Plugins
from gang_sim.controllers.volcano.preempt import preempt, reclaim
from gang_sim.controllers.volcano.proportion import share, without_pods
from gang_sim.controllers.volcano.state import READY, Placement, SessionState

Fit = tuple[int, int, "str | None"]
_SCHEDULED = ("Running", "Bound", "Failed", "Succeeded")  # api.ScheduledStatus


@dataclass
class Disruption:
    """What the session left where its ordinary close cannot see it."""

    placements: dict[Key, Placement] = field(default_factory=dict)
    """Pending pods that allocate, preempt or reclaim placed: Binding, Allocated or Pipelined."""
    evicted: dict[Key, str] = field(default_factory=dict)
    nominated: dict[Key, str] = field(default_factory=dict)
    groups: set[Key] = field(default_factory=set)
    """Gangs to close from the end state: a pod pipelined, kept (Allocated) or evicted."""

    def signature(self, group: Group) -> tuple[object, ...]:
        """What the session decided for the gang's pods, for `SessionMemo` comparisons."""
        if group.key not in self.groups:
            return ()
        decided = []
        for pod in group.tasks:
            key = _key(pod)
            placement = self.placements.get(key)
            decided.append(
                (key, placement, self.evicted.get(key), self.nominated.get(key))
                if placement or key in self.evicted
                else (key,)
            )
        return tuple(decided)


def _key(pod: JsonDict) -> Key:
    return (pod["metadata"]["namespace"], pod["metadata"]["name"])


def run_disruptive(
    snapshot: Snapshot,
    *,
    groups: list[Group],
    placeable: list[Group],
    enqueued: set[Key],
    conf: SchedulerConf,
    result: SessionResult,
) -> tuple[Allocated, Disruption]:
    """Allocate (pipelining), then the configured preempt/reclaim; bindings and evictions go to
    ``result``. Returns what allocate decided, and the disruption."""
    allocated = allocate_pipelining(snapshot, placeable, result, conf)
    disruption = Disruption(placements=dict(allocated.placements), groups=set(allocated.holding))
    if not _may_take(placeable, allocated.placements):
        return allocated, disruption
    state = SessionState(
        nodes=snapshot.nodes,
        pods=snapshot.pods,
        groups=groups,
        phases={g.key: "Inqueue" if g.key in enqueued else g.phase for g in groups},
        queues=snapshot.queues,
        idle=allocated.idle,
        placements=allocated.placements,
        conf=conf,
    )
    plugins = Plugins(state)
    for action in conf.actions:
        if action == "preempt":
            preempt(state, plugins)
        elif action == "reclaim":
            reclaim(state, plugins)
    for task, reason in state.evictions:
        disruption.evicted[task.key] = reason
        disruption.groups.add(task.job.key)
        result.evictions.append(Eviction(task.key, task.job.key, reason))
    for task in state.pipelines:
        assert task.node is not None
        disruption.placements[task.key] = Placement("Pipelined", task.node)
        disruption.groups.add(task.job.key)
        if task.eviction_occurred:
            disruption.nominated[task.key] = task.node
    return allocated, disruption


def _may_take(placeable: list[Group], placements: dict[Key, Placement]) -> bool:
    """Whether any admitted gang still has a pending pod after allocate (a possible taker)."""
    return any(_key(pod) not in placements for group in placeable for pod in group.pending)


# --- allocate ------------------------------------------------------------------------------------


def _ready_at_start(group: Group) -> bool:
    ready = sum(group.histogram[s] for s in ("Bound", "Running", "Succeeded"))
    best_effort = sum(1 for pod in group.pending if not any(capacity.pod_requests(pod).values()))
    return ready + best_effort >= group.min_member


def _order(placeable: list[Group], conf: SchedulerConf, total: Resources) -> list[Group]:
    terms = [
        plugin.name
        for tier in conf.tiers
        for plugin in tier.plugins
        if plugin.name in ("priority", "gang", "drf") and plugin.enabled("enable_job_order")
    ]

    def key(group: Group) -> tuple[object, ...]:
        values: list[object] = []
        for term in terms:
            if term == "priority":
                values.append(-group.priority)
            elif term == "gang":
                values.append(1 if _ready_at_start(group) else 0)
            else:
                held = capacity.total(
                    capacity.pod_requests(p) for p in group.tasks if task_status(p) in ("Bound", "Running")
                )
                values.append(share(without_pods(held), total))
        created = group.podgroup["metadata"].get("creationTimestamp") or ""
        uid = str(group.podgroup["metadata"].get("uid") or "/".join(group.key))
        return (*values, created, uid)

    return sorted(placeable, key=key)


class _Allocator:
    """The nodes as allocate leaves them: idle, releasing (terminating pods), reserved (pipelined)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = sorted(snapshot.nodes, key=lambda n: n["metadata"]["name"])
        self.by_name = {n["metadata"]["name"]: n for n in self.nodes}
        self.free = capacity.node_free(self.nodes, snapshot.pods)
        self.releasing: dict[str, Resources] = {name: {} for name in self.by_name}
        for pod in snapshot.pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in self.releasing and capacity.holds_resources(pod) and task_status(pod) == "Releasing":
                held = {**capacity.pod_requests(pod), "pods": Decimal(1)}
                self.releasing[node] = capacity.add(self.releasing[node], held)
        self.reserved: dict[str, Resources] = {name: {} for name in self.by_name}

    def future(self, idle: dict[str, Resources], reserved: dict[str, Resources]) -> dict[str, Resources]:
        return {
            name: capacity.subtract(capacity.add(idle[name], self.releasing[name]), reserved[name])
            for name in self.by_name
        }

    def try_group(self, group: Group) -> _Try:
        """Place the gang's pending pods on copies of the nodes: on idle resources, else pipelined."""
        attempt = _Try(
            {n: dict(a) for n, a in self.free.items()}, {n: dict(a) for n, a in self.reserved.items()}
        )
        for task in group.pending:
            request = {**capacity.pod_requests(task), "pods": Decimal(1)}
            future = self.future(attempt.idle, attempt.reserved)
            candidates = self.nodes
            nominated = str((task.get("status") or {}).get("nominatedNodeName") or "")
            if nominated in self.by_name and not capacity.shortfall(request, future[nominated]):
                candidates = [self.by_name[nominated]]
            node, _ = capacity.place(task, candidates, attempt.idle)
            if node is not None:
                attempt.idle[node] = capacity.subtract(attempt.idle[node], request)
                attempt.placed.append((task, node))
                continue
            node, _ = capacity.place(task, candidates, future)
            if node is not None:
                attempt.reserved[node] = capacity.add(attempt.reserved[node], request)
                attempt.piped.append((task, node))
                continue
            if attempt.origin is None:
                why = capacity.place(task, self.nodes, attempt.idle)[1]
                unavailable = why.replace("are available", "are unavailable")
                attempt.origin = f"{task['metadata']['name']}: {unavailable}"
        return attempt

    def keep(self, attempt: _Try) -> None:
        self.free, self.reserved = attempt.idle, attempt.reserved


@dataclass
class _Try:
    idle: dict[str, Resources]
    reserved: dict[str, Resources]
    placed: list[tuple[JsonDict, str]] = field(default_factory=list)
    piped: list[tuple[JsonDict, str]] = field(default_factory=list)
    origin: str | None = None


@dataclass
class Allocated:
    """What `allocate_pipelining` decided."""

    ready_groups: set[Key] = field(default_factory=set)
    """Gangs placed whole (their pods on idle resources are bound)."""
    fit: dict[Key, Fit] = field(default_factory=dict)
    could_go: dict[Key, dict[Key, str]] = field(default_factory=dict)
    """Where the pods of a gang that was not placed would have gone."""
    idle: dict[str, Resources] = field(default_factory=dict)
    placements: dict[Key, Placement] = field(default_factory=dict)
    holding: set[Key] = field(default_factory=set)
    """Gangs with a pod pipelined, or kept placed without binding."""


def allocate_pipelining(
    snapshot: Snapshot, placeable: list[Group], result: SessionResult, conf: SchedulerConf
) -> Allocated:
    """Allocate as the module docstring says; bindings go to ``result``."""
    nodes = _Allocator(snapshot)
    schedulable = [n for n in nodes.nodes if capacity.node_is_schedulable(n)]
    total = without_pods(capacity.total(capacity.node_allocatable(n) for n in schedulable))
    out = Allocated()
    for group in _order(placeable, conf, total):
        attempt = nodes.try_group(group)
        placed, piped = attempt.placed, attempt.piped
        unplaced = len(group.pending) - len(placed) - len(piped)
        if group.scheduled + len(placed) >= group.min_member and (placed or group.scheduled):
            nodes.keep(attempt)
            out.ready_groups.add(group.key)
            result.bindings += [(t["metadata"]["namespace"], t["metadata"]["name"], n) for t, n in placed]
            out.placements.update({_key(t): Placement("Binding", n) for t, n in placed})
            out.fit[group.key] = (len(placed), unplaced, None)
        elif group.scheduled + len(placed) + len(piped) >= group.min_member and (placed or piped):
            nodes.keep(attempt)  # pipelined: its places are kept for the session, nothing is bound
            out.placements.update({_key(t): Placement("Allocated", n) for t, n in placed})
            out.fit[group.key] = (len(placed), unplaced, attempt.origin)
        else:
            out.fit[group.key] = (len(placed), len(group.pending) - len(placed), attempt.origin)
            out.could_go[group.key] = {_key(task): node for task, node in placed}
            continue
        out.placements.update({_key(t): Placement("Pipelined", n) for t, n in piped})
        if piped or group.key not in out.ready_groups:
            out.holding.add(group.key)
    out.idle = nodes.free
    return out


# --- close -----------------------------------------------------------------------------------------


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
        key = _key(pod)
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
    if end.statuses["Binding"]:  # the misleading warning of a binding session, as `_close` gives
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
    schedulable = sum(1 for pod in end.pending if _key(pod) in could_go)
    error = fit_error_of(end.counts, group.min_member, schedulable, len(end.pending) - schedulable, fit[2])
    unready = max(0, group.min_member - (end.ready_num + schedulable))
    message = f"{unready}/{len(group.tasks)} tasks in gang unschedulable: {error}"
    result.events.append(GroupEvent(group.key, "Warning", "Unschedulable", message))
    for pod in end.pending:
        result.pod_unschedulable[_key(pod)] = message
        result.pod_events.append(PodEvent(_key(pod), "Warning", "FailedScheduling", error))
    return {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": message}


def _has(conditions: list[JsonDict], condition: JsonDict) -> bool:
    return any(all(c.get(k) == v for k, v in condition.items()) for c in conditions)
