"""What one Volcano session reads and returns, and the gangs (`Group`) it decides on.

`gather_groups` turns a `Snapshot` into the session's jobs in Volcano's order. With a
`SessionMemo` kept from one session to the next, a gang whose PodGroup and pods are the very
objects the last session saw is the same `Group` object again, with everything it computed
(pending pods, histogram, allocation) already known: under a queue of thousands of waiting
gangs, a session costs a lookup for each of them, not a rebuild.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any, Protocol

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.conf import DEFAULT as DEFAULT_SCHEDULER_CONF
from gang_sim.controllers.volcano.conf import SchedulerConf

JsonDict = dict[str, Any]
Key = tuple[str, str]
Fit = tuple[int, int, str | None]
"""(schedulable, unschedulable, origin reason) of a gang's pending pods after allocate."""

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SCHEDULER_NAME = "volcano"
ADMITTED_PHASES = frozenset({"Inqueue", "Running", "Unknown"})


@dataclass(frozen=True)
class SessionConfig:
    overcommit_factor: Decimal = Decimal("1.2")
    scheduler_name: str = SCHEDULER_NAME
    scheduler: SchedulerConf = DEFAULT_SCHEDULER_CONF
    """``volcano-scheduler.conf`` (`conf`): its actions and plugin tiers."""


class TasksByGroup(Protocol):
    """Each PodGroup's pods by its key: a dict, or a view of an index the caller keeps."""

    def get(self, key: Key, default: list[JsonDict], /) -> list[JsonDict]: ...


@dataclass(frozen=True)
class Snapshot:
    nodes: list[JsonDict]
    pods: list[JsonDict]
    podgroups: list[JsonDict]
    queues: list[JsonDict]
    priority_classes: list[JsonDict] = field(default_factory=list)
    tasks_by_group: TasksByGroup | None = None
    """Each PodGroup's pods (of this scheduler), when the caller keeps them indexed; else the
    session groups ``pods`` by their group annotation itself. With it, ``pods`` need only hold
    the pods that hold node resources (bound, not finished): nothing else reads them."""
    changed: Set[Key] | None = None
    """With ``tasks_by_group``: the PodGroups whose PodGroup or pods may have changed since the
    previous session of the memo (the caller tracks its cache); the pods of the others are
    known to be the very objects that session saw, and are not looked up again. None: any."""


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


@dataclass(frozen=True)
class Eviction:
    """A pod the session evicts (``preempt`` or ``reclaim``), and the PodGroup it belongs to."""

    pod: Key
    podgroup: Key
    reason: str


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
    evictions: list[Eviction] = field(default_factory=list)
    """Pods to evict, in order (only with ``preempt`` or ``reclaim`` configured)."""
    nominated: dict[Key, str] = field(default_factory=dict)
    """``status.nominatedNodeName`` of pods pipelined where a victim was evicted for them."""
    unchanged: set[Key] = field(default_factory=set)
    """Groups decided exactly as in the previous session (`SessionMemo`): their pod conditions
    and events were produced then and are left out of this result, and so are the enqueue
    gate's rejections when they are the ones it stated last session."""


@dataclass
class Closed:
    """How a gang was closed: the very `Group`, what the session decided for it, its status."""

    group: Group
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
        self.groups: dict[Key, Group] = {}
        self.closed: dict[Key, Closed] = {}
        self.rejections: dict[Key, tuple[Group, tuple[str, ...]]] = {}
        """The enqueue gate's reasons each gang (that very `Group`) was last told in events."""

    def forget(self, key: Key) -> None:
        """Decide ``key`` afresh next session (a write of its outcome failed)."""
        self.groups.pop(key, None)
        self.closed.pop(key, None)
        self.rejections.pop(key, None)


@dataclass(eq=False)
class Group:
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
        return Counter(task_status(task) for task in self.tasks)

    @cached_property
    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self.histogram.items()))

    def count(self, status: str) -> int:
        return self.histogram[status]

    @cached_property
    def scheduled(self) -> int:
        return sum(self.histogram[status] for status in ("Bound", "Running", "Succeeded", "Failed"))

    @cached_property
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

    @cached_property
    def waiting(self) -> Fit:
        """The fit of a gang that is not placed this session: none of its pending pods."""
        return (0, len(self.pending), None)

    @cached_property
    def request(self) -> tuple[tuple[str, Decimal], ...] | None:
        """``min_resources`` as a hashable value: gangs asking the same share gate outcomes."""
        return None if self.min_resources is None else tuple(sorted(self.min_resources.items()))

    @cached_property
    def order(self) -> tuple[int, str, Key]:
        """Volcano's job order: priority first, then age (1 s resolution), then namespace/name."""
        return (-self.priority, self.podgroup["metadata"].get("creationTimestamp", ""), self.key)


def _terminating(pod: JsonDict) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_key(pod: JsonDict) -> Key:
    """``(namespace, name)`` of a pod."""
    return (pod["metadata"]["namespace"], pod["metadata"]["name"])


def task_status(pod: JsonDict) -> str:
    """vc-scheduler's task status of a pod (``api/helpers.go:41-64`` at v1.16.0-alpha.1).

    A pod being deleted (``deletionTimestamp``) that is Running, or Pending, is ``Releasing``:
    it still holds its node's resources but is neither Running nor scheduled, so a gang whose
    pods terminate (evicted, say) counts fewer scheduled pods at once.
    """
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase in ("Running", "Pending") and _terminating(pod):
        return "Releasing"
    if phase == "Pending" and (pod.get("spec") or {}).get("nodeName"):
        return "Bound"
    return str(phase)


def _priority_values(priority_classes: list[JsonDict]) -> tuple[dict[str, int], int]:
    values = {pc["metadata"]["name"]: int(pc.get("value", 0)) for pc in priority_classes}
    default = next((int(pc.get("value", 0)) for pc in priority_classes if pc.get("globalDefault")), 0)
    return values, default


def _group_order(group: Group) -> tuple[int, str, Key]:
    return group.order


def gather_groups(snapshot: Snapshot, config: SessionConfig, memo: SessionMemo | None) -> list[Group]:
    """The snapshot's gangs in Volcano's job order (the same `Group` objects where unchanged)."""
    tasks: TasksByGroup | None = snapshot.tasks_by_group
    changed = snapshot.changed if tasks is not None else None
    if tasks is None:
        grouped: dict[Key, list[JsonDict]] = {}
        for pod in snapshot.pods:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            group = annotations.get(GROUP_ANNOTATION)
            if group and (pod.get("spec") or {}).get("schedulerName") == config.scheduler_name:
                grouped.setdefault((pod["metadata"]["namespace"], group), []).append(pod)
        tasks = grouped
    priorities, default_priority = _priority_values(snapshot.priority_classes)
    remembered = memo.groups if memo is not None else {}
    groups = []
    for podgroup in snapshot.podgroups:
        metadata, spec = podgroup["metadata"], podgroup.get("spec") or {}
        key = (metadata["namespace"], metadata["name"])
        priority = priorities.get(spec.get("priorityClassName") or "", default_priority)
        previous = remembered.get(key)
        if previous is not None and previous.podgroup is podgroup and previous.priority == priority:
            if changed is not None and key not in changed:
                groups.append(previous)  # neither its PodGroup nor any of its pods changed
                continue
            members = tasks.get(key, [])
            if _same_tasks(previous, members):
                groups.append(previous)
                continue
        else:
            members = tasks.get(key, [])
        min_resources = spec.get("minResources")
        groups.append(
            Group(
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
        if len(memo.closed) > len(memo.groups):
            memo.closed = {key: closed for key, closed in memo.closed.items() if key in memo.groups}
        if len(memo.rejections) > len(memo.groups):
            memo.rejections = {key: r for key, r in memo.rejections.items() if key in memo.groups}
    groups.sort(key=_group_order)
    return groups


def _same_tasks(group: Group, tasks: list[JsonDict]) -> bool:
    return len(group.tasks) == len(tasks) and all(
        mine is theirs for mine, theirs in zip(group.tasks, tasks, strict=True)
    )
