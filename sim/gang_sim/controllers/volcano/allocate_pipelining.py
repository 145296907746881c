"""allocate when ``preempt`` or ``reclaim`` is configured: placing pods, or pipelining them.

Only `SessionConfig.scheduler` with either action brings a session here (`disrupt`); the
default configuration keeps the simulator's earlier allocate (`allocate`), unchanged. This one
follows Volcano v1.16.0-alpha.1 more closely where evictions need it
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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.model import (
    Fit,
    Group,
    JsonDict,
    Key,
    SessionResult,
    Snapshot,
    pod_key,
    task_status,
)
from gang_sim.controllers.volcano.proportion import share, without_pods
from gang_sim.controllers.volcano.state import Placement


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
            out.placements.update({pod_key(t): Placement("Binding", n) for t, n in placed})
            out.fit[group.key] = (len(placed), unplaced, None)
        elif group.scheduled + len(placed) + len(piped) >= group.min_member and (placed or piped):
            nodes.keep(attempt)  # pipelined: its places are kept for the session, nothing is bound
            out.placements.update({pod_key(t): Placement("Allocated", n) for t, n in placed})
            out.fit[group.key] = (len(placed), unplaced, attempt.origin)
        else:
            out.fit[group.key] = (len(placed), len(group.pending) - len(placed), attempt.origin)
            out.could_go[group.key] = {pod_key(task): node for task, node in placed}
            continue
        out.placements.update({pod_key(t): Placement("Pipelined", n) for t, n in piped})
        if piped or group.key not in out.ready_groups:
            out.holding.add(group.key)
    out.idle = nodes.free
    return out
