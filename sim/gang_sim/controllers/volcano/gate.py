"""Volcano's enqueue gate: the overcommit and proportion checks, with running totals.

A ``Pending`` PodGroup becomes ``Inqueue`` when it has no ``minResources``, or when both the
overcommit check (cluster x factor - used must cover what admitted groups still need plus this
one) and the proportion check (the queue is Open and its capability — or the whole cluster —
covers its allocation, its admitted groups and this one) pass. Rejected groups are skipped;
later ones may still enqueue.

The totals move only when a group is admitted, so until then a gang asking what an earlier
one of its queue asked gets that one's answer: thousands of queued gangs of one shape cost one
check each, not one resource sum each.
"""

from __future__ import annotations

from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.model import (
    ADMITTED_PHASES,
    Group,
    JsonDict,
    SessionConfig,
    Snapshot,
)


def queue_state(queue: JsonDict) -> str:
    return str((queue.get("status") or {}).get("state") or "Open")


def _unmet(need: Resources, have: Resources, dimensions: Resources) -> list[str]:
    return [
        name for name in sorted(dimensions) if dimensions[name] > 0 and need.get(name, 0) > have.get(name, 0)
    ]


def _still_needed(group: Group) -> Resources:
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


class EnqueueGate:
    """The enqueue gate of one session (see the module docstring)."""

    def __init__(self, snapshot: Snapshot, groups: list[Group], config: SessionConfig) -> None:
        nodes = [n for n in snapshot.nodes if capacity.node_is_schedulable(n)]
        self.cluster = capacity.total(capacity.node_allocatable(n) for n in nodes)
        used = capacity.total(capacity.pod_requests(p) for p in snapshot.pods if capacity.holds_resources(p))
        self.idle = capacity.subtract(capacity.scale(self.cluster, config.overcommit_factor), used)
        admitted = [g for g in groups if g.phase in ADMITTED_PHASES]
        self.reserved = capacity.total(_still_needed(g) for g in admitted)
        self.queues = {q["metadata"]["name"]: q for q in snapshot.queues}
        self.queue_claims: dict[str, Resources] = {}
        for group in admitted:
            claim = capacity.add(group.allocated, _still_needed(group))
            self.queue_claims[group.queue] = capacity.add(self.queue_claims.get(group.queue, {}), claim)
        self._limits: dict[str, Resources] = {}
        # (queue, request) -> reasons, valid while the totals stay as they are (no admission).
        self._answers: dict[tuple[str, object], tuple[str, ...]] = {}

    def admit(self, group: Group) -> tuple[str, ...]:
        """Reasons the group stays Pending (empty: admitted, and the totals now include it)."""
        asked = (group.queue, group.request)
        answer = self._answers.get(asked)
        if answer is None:
            answer = self._decide(group)
            if answer:
                self._answers[asked] = answer
        return answer

    def _decide(self, group: Group) -> tuple[str, ...]:
        queue = self.queues.get(group.queue)
        if queue is None:
            return (f"queue {group.queue} does not exist",)
        if queue_state(queue) != "Open":
            return (f"queue {group.queue} is {queue_state(queue)}, not Open",)
        if group.min_resources is None:
            return ()
        request = group.min_resources
        reasons = []
        overused = _unmet(capacity.add(self.reserved, request), self.idle, request)
        if overused:
            reasons.append(f"resource in cluster is overused: overused {', '.join(overused)}")
        claims = capacity.add(self.queue_claims.get(group.queue, {}), request)
        insufficient = _unmet(claims, self._limit(group.queue, queue), request)
        if insufficient:
            reasons.append(f"queue resource quota insufficient: insufficient {', '.join(insufficient)}")
        if not reasons:
            self.reserved = capacity.add(self.reserved, request)
            self.queue_claims[group.queue] = claims
            self._answers.clear()  # the totals moved: every answer is to be found again
        return tuple(reasons)

    def _limit(self, name: str, queue: JsonDict) -> Resources:
        limit = self._limits.get(name)
        if limit is None:
            capability = capacity.parse_resources((queue.get("spec") or {}).get("capability"))
            limit = self._limits[name] = {**self.cluster, **capability}
        return limit
