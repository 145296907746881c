"""A session with ``preempt`` or ``reclaim`` configured: allocate, the actions, what they leave.

Only `SessionConfig.scheduler` with either action brings a session here; the default
configuration keeps the simulator's earlier allocate (`allocate`), unchanged. Here allocate
pipelines (`allocate_pipelining`), then preempt and reclaim run in the configured order
(`preempt`, Volcano v1.16.0-alpha.1's ``pkg/scheduler/actions``) on the session's state
(`state`), asking the plugins (`plugins`). What they decided — placements, evictions,
nominations, and the gangs they touched — is the `Disruption` the close reads: every gang whose
pods the session pipelined, kept, or evicted is closed from the session's end state
(`close_end_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gang_sim.controllers.volcano.allocate_pipelining import Allocated, allocate_pipelining
from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.model import (
    Eviction,
    Group,
    Key,
    SessionResult,
    Snapshot,
    pod_key,
)
from gang_sim.controllers.volcano.plugins import Plugins
from gang_sim.controllers.volcano.preempt import preempt, reclaim
from gang_sim.controllers.volcano.state import Placement, SessionState


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
            key = pod_key(pod)
            placement = self.placements.get(key)
            decided.append(
                (key, placement, self.evicted.get(key), self.nominated.get(key))
                if placement or key in self.evicted
                else (key,)
            )
        return tuple(decided)


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
    return any(pod_key(pod) not in placements for group in placeable for pod in group.pending)
