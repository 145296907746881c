"""Volcano's resource comparisons and the proportion plugin's queue shares, for preempt and reclaim.

Resources are `capacity.Resources` (exact decimals). Comparisons follow vc-scheduler's
``api.Resource`` (``pkg/scheduler/api/resource_info.go`` at v1.16.0-alpha.1): ``cpu`` and
``memory`` are always compared (absent: 0); another resource counts only where the left side
names it, the right side's absence reading 0 (``LessEqual(..., Zero)``, :439-473); ``pods`` is
ignored, as a pod's request never carries it (``api/pod_info.go:68-72``).

`Proportion` is the proportion plugin (``plugins/proportion/proportion.go``): each queue that
has jobs in the session gets a *deserved* share of the cluster by weight, water-filled
(:199-266) — what a queue asks for (its pods' requests, running or pending) caps its share, and
what it does not use goes round again to the others — capped by its ``capability`` and raised
to its ``guarantee``. Its ``allocated`` starts from its pods that hold a node (Bound, Binding,
Running, Allocated) and follows the session's pipelines and evictions (:494-537). It answers
``Overused`` (deserved <= allocated, :321-333), ``Allocatable``/``Preemptive`` (Open and
allocated + request <= deserved on the requested resources, :335-388), the reclaim vote
(victims while their queue's allocated is not <= deserved, :288-319) and queue order (queue
``spec.priority``, then share, :268-286). Hierarchical queues are not simulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import JsonDict, Resources

ALWAYS = ("cpu", "memory")
IGNORED = frozenset({"pods"})
# vc's minResource is 0.1 of a milli-unit: differences below it are equal.
TOLERANCE = Decimal("0.0001")


def without_pods(amounts: Mapping[str, Decimal]) -> Resources:
    return {name: amount for name, amount in amounts.items() if name not in IGNORED}


def _le(left: Decimal, right: Decimal) -> bool:
    return left < right or abs(left - right) < TOLERANCE


def less_equal(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> bool:
    """``left.LessEqual(right, Zero)`` (``resource_info.go:439-473``)."""
    zero = Decimal(0)
    for name in ALWAYS:
        if not _le(left.get(name, zero), right.get(name, zero)):
            return False
    return all(
        _le(amount, right.get(name, zero))
        for name, amount in left.items()
        if name not in ALWAYS and name not in IGNORED
    )


def fits_on(
    left: Mapping[str, Decimal], right: Mapping[str, Decimal], request: Mapping[str, Decimal]
) -> bool:
    """``left.LessEqualWithDimensionAndResourcesName(right, request)`` (:479-528): only the
    resources ``request`` asks for are compared."""
    zero = Decimal(0)
    return not any(
        amount > 0 and left.get(name, zero) > right.get(name, zero)
        for name, amount in request.items()
        if name not in IGNORED
    )


def is_empty(amounts: Mapping[str, Decimal]) -> bool:
    return all(amount < TOLERANCE for name, amount in amounts.items() if name not in IGNORED)


def share(allocated: Mapping[str, Decimal], of: Mapping[str, Decimal]) -> Decimal:
    """The dominant share: the largest allocated/of over the resources ``of`` has (``helpers.Share``)."""
    result = Decimal(0)
    for name, whole in of.items():
        if whole < TOLERANCE or name in IGNORED:
            continue
        result = max(result, allocated.get(name, Decimal(0)) / whole)
    return result


def _min_dimension(amounts: Resources, limit: Mapping[str, Decimal], *, absent_is_zero: bool) -> Resources:
    """``MinDimensionResource`` (:949-987): with ``absent_is_zero`` a resource ``limit`` lacks is 0."""
    zero = Decimal(0)
    result: Resources = {}
    for name, amount in amounts.items():
        if name in limit:
            result[name] = min(amount, limit[name])
        elif name in ALWAYS or absent_is_zero:
            result[name] = min(amount, zero)
        else:
            result[name] = amount
    return result


def _exceeded(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Resources:
    """``ExceededPart``: what ``left`` has beyond ``right``, resource by resource."""
    names = set(left) | set(right) | set(ALWAYS)
    zero = Decimal(0)
    return {name: max(zero, left.get(name, zero) - right.get(name, zero)) for name in names}


def _same(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> bool:
    names = set(left) | set(right)
    zero = Decimal(0)
    return all(left.get(name, zero) == right.get(name, zero) for name in names)


def queue_weight(queue: JsonDict) -> int:
    return int((queue.get("spec") or {}).get("weight") or 1)


def queue_priority(queue: JsonDict) -> int:
    return int((queue.get("spec") or {}).get("priority") or 0)


@dataclass
class QueueAttr:
    name: str
    weight: int
    real_capability: Resources
    guarantee: Resources
    request: Resources = field(default_factory=dict)
    allocated: Resources = field(default_factory=dict)
    deserved: Resources = field(default_factory=dict)
    share: Decimal = Decimal(0)

    def update_share(self) -> None:
        self.share = share(self.allocated, self.deserved)


class Proportion:
    """The proportion plugin's state for one session (see the module docstring)."""

    def __init__(
        self,
        total: Resources,
        queues: Mapping[str, JsonDict],
        demands: Iterable[tuple[str, Resources, Resources]],
    ) -> None:
        """``demands``: per job, (queue, what it holds, what its pending pods ask)."""
        total = without_pods(total)
        guarantees = {
            name: capacity.parse_resources(((q.get("spec") or {}).get("guarantee") or {}).get("resource"))
            for name, q in queues.items()
        }
        total_guarantee = capacity.total(guarantees.values())
        self.queues = queues
        self.attrs: dict[str, QueueAttr] = {}
        for queue, held, asked in demands:
            attr = self.attrs.get(queue)
            if attr is None:
                attr = self.attrs[queue] = self._attr(queue, total, total_guarantee, guarantees)
            attr.allocated = capacity.add(attr.allocated, held)
            attr.request = capacity.add(attr.request, capacity.add(held, asked))
        self._deserve(total)

    def _attr(
        self, name: str, total: Resources, total_guarantee: Resources, guarantees: dict[str, Resources]
    ) -> QueueAttr:
        queue = self.queues.get(name) or {}
        guarantee = without_pods(guarantees.get(name) or {})
        real = capacity.add(_exceeded(total, total_guarantee), guarantee)
        cap = capacity.parse_resources((queue.get("spec") or {}).get("capability"))
        for resource, limit in cap.items():
            if resource in IGNORED or (resource in ALWAYS and limit <= 0):
                continue  # a missing or zero cpu/memory capability is unlimited (:121-127)
            if resource in real:
                real[resource] = min(real[resource], limit)
        return QueueAttr(name, queue_weight(queue), real, guarantee)

    def _deserve(self, total: Resources) -> None:
        remaining = dict(total)
        met: set[str] = set()
        while True:
            weight = sum(attr.weight for name, attr in self.attrs.items() if name not in met)
            if weight == 0:
                break
            before = dict(remaining)
            increased: Resources = {}
            decreased: Resources = {}
            for name, attr in self.attrs.items():
                if name in met:
                    continue
                old = dict(attr.deserved)
                grown = capacity.add(attr.deserved, capacity.scale(remaining, Decimal(attr.weight) / weight))
                grown = _min_dimension(grown, attr.real_capability, absent_is_zero=False)
                grown = _min_dimension(grown, attr.request, absent_is_zero=True)
                for resource, amount in attr.guarantee.items():
                    grown[resource] = max(grown.get(resource, Decimal(0)), amount)
                attr.deserved = grown
                attr.update_share()
                if less_equal(attr.request, attr.deserved) or _same(attr.deserved, old):
                    met.add(name)
                increased = capacity.add(increased, _exceeded(attr.deserved, old))
                decreased = capacity.add(decreased, _exceeded(old, attr.deserved))
            remaining = _exceeded(capacity.add(remaining, decreased), increased)
            if is_empty(remaining) or _same(remaining, before):
                break
        for attr in self.attrs.values():
            attr.update_share()

    # --- the plugin's functions ----------------------------------------------------------------

    def overused(self, queue: str) -> bool:
        attr = self.attrs.get(queue)
        return attr is not None and less_equal(attr.deserved, attr.allocated)

    def allocatable(self, queue: str, request: Resources) -> bool:
        state = str(((self.queues.get(queue) or {}).get("status") or {}).get("state") or "Open")
        attr = self.attrs.get(queue)
        if state != "Open" or attr is None:
            return False
        return fits_on(capacity.add(attr.allocated, request), attr.deserved, request)

    def reclaimable(self, victims: list[tuple[str, Resources]]) -> list[int]:
        """Indexes of the victims (queue, request) that may go: while their queue is over deserved."""
        allocations: dict[str, Resources] = {}
        chosen = []
        for index, (queue, request) in enumerate(victims):
            attr = self.attrs.get(queue)
            if attr is None:
                continue
            allocated = allocations.setdefault(queue, dict(attr.allocated))
            if not less_equal(allocated, attr.deserved):
                allocations[queue] = capacity.subtract(allocated, request)
                chosen.append(index)
        return chosen

    def order(self, queue: str) -> tuple[int, Decimal]:
        """Queue order: higher ``spec.priority`` first, then the smaller share."""
        attr = self.attrs.get(queue)
        return (-queue_priority(self.queues.get(queue) or {}), attr.share if attr else Decimal(0))

    def allocate(self, queue: str, request: Resources) -> None:
        attr = self.attrs.get(queue)
        if attr is not None:
            attr.allocated = capacity.add(attr.allocated, request)
            attr.update_share()

    def deallocate(self, queue: str, request: Resources) -> None:
        attr = self.attrs.get(queue)
        if attr is not None:
            attr.allocated = capacity.subtract(attr.allocated, request)
            attr.update_share()
