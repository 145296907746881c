"""One session's jobs, tasks and nodes as preempt and reclaim see and change them, and Volcano's Statement.

Built after allocate (``allocate_pipelining``), from the snapshot and what allocate placed. Task
statuses are vc-scheduler's (``api/helpers.go:41-107``, ``api/job_info.go`` at v1.16.0-alpha.1):
``Pending``, ``Allocated``/``Binding`` (placed by allocate), ``Pipelined`` (placed on resources
still being released), ``Bound``, ``Running``, ``Releasing`` (being deleted), ``Succeeded``,
``Failed``. A node's ``FutureIdle`` is idle + releasing - pipelined (``api/node_info.go``).

A `Statement` (``framework/statement.go:82-425``) records evictions and pipelines: the session
sees them at once (the victim ``Releasing``, its resources counted as releasing on its node, the
preemptor ``Pipelined`` on its node; the proportion and drf plugins' allocations follow), and
``discard`` undoes them in reverse order; ``commit`` hands the evictions to the session's result
(`SessionState.evictions`), a pipeline needing nothing more. One difference: Volcano's
``unevict`` sets a discarded victim ``Running`` whatever it was (:123-147); here it gets its
status back, so a Bound pod stays Bound (it shows only in that session's PodGroup counts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import JsonDict, Resources
from gang_sim.controllers.volcano.conf import SchedulerConf
from gang_sim.controllers.volcano.model import Group, Key, task_status
from gang_sim.controllers.volcano.proportion import Proportion, less_equal, without_pods

PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
READY = frozenset({"Bound", "Binding", "Running", "Allocated", "Succeeded"})  # ReadyTaskNum
ALLOCATED = frozenset({"Bound", "Binding", "Running", "Allocated"})  # AllocatedStatus
VALID = ALLOCATED | {"Succeeded", "Pipelined", "Pending"}  # ValidTaskNum
ON_NODE = ALLOCATED | {"Releasing", "Pipelined"}


def preemptable(pod: JsonDict) -> bool:
    """``volcano.sh/preemptable`` of a pod: annotation, else label; absent means true, and a
    value that is not a bool means false (``api/pod_info.go:176-202``)."""
    metadata = pod.get("metadata") or {}
    for source in (metadata.get("annotations") or {}, metadata.get("labels") or {}):
        if PREEMPTABLE_ANNOTATION in source:
            return _go_bool(str(source[PREEMPTABLE_ANNOTATION]))
    return True


def _go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``, an invalid value reading false."""
    return text in ("1", "t", "T", "TRUE", "true", "True")


def task_priority(pod: JsonDict) -> int:
    """``spec.priority``, overridden by ``volcano.sh/task-priority``; 1 without either
    (``api/job_info.go:226, 243-251``)."""
    value = 1
    priority = (pod.get("spec") or {}).get("priority")
    if priority is not None:
        value = int(priority)
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get(TASK_PRIORITY_ANNOTATION)
    if annotated is not None:
        with contextlib.suppress(ValueError):
            value = int(str(annotated))
    return value


def _pod_index(name: str) -> int | None:
    """``GetPodIndexUnderTask``: the last ``-`` part of a name with at least three parts."""
    parts = name.split("-")
    if len(parts) < 3:
        return None
    try:
        return int(parts[-1])
    except ValueError:
        return None


@dataclass(eq=False)
class Task:
    pod: JsonDict
    key: Key
    uid: str
    job: Job
    status: str
    node: str | None
    request: Resources
    priority: int
    preemptable: bool
    eviction_occurred: bool = False

    @property
    def best_effort(self) -> bool:
        return all(amount <= 0 for amount in self.request.values())

    @property
    def gated(self) -> bool:
        return bool((self.pod.get("spec") or {}).get("schedulingGates"))

    @property
    def never_preempts(self) -> bool:
        return (self.pod.get("spec") or {}).get("preemptionPolicy") == "Never"

    @property
    def nominated(self) -> str:
        return str((self.pod.get("status") or {}).get("nominatedNodeName") or "")

    @property
    def index(self) -> int | None:
        return _pod_index(self.key[1])

    @property
    def created(self) -> str:
        return str((self.pod.get("metadata") or {}).get("creationTimestamp") or "")


@dataclass(eq=False)
class Job:
    group: Group
    phase: str
    tasks: list[Task] = field(default_factory=list)
    allocated: Resources = field(default_factory=dict)  # drf's view: what its placed tasks ask

    @property
    def key(self) -> Key:
        return self.group.key

    @property
    def queue(self) -> str:
        return self.group.queue

    @property
    def priority(self) -> int:
        return self.group.priority

    @property
    def min_available(self) -> int:
        return self.group.min_member

    @property
    def uid(self) -> str:
        return str(self.group.podgroup["metadata"].get("uid") or "/".join(self.key))

    @property
    def created(self) -> str:
        return str(self.group.podgroup["metadata"].get("creationTimestamp") or "")

    def count(self, statuses: Iterable[str]) -> int:
        wanted = set(statuses)
        return sum(1 for task in self.tasks if task.status in wanted)

    def pending(self) -> list[Task]:
        return [task for task in self.tasks if task.status == "Pending"]

    @property
    def ready_num(self) -> int:
        return self.count(READY)

    @property
    def waiting_num(self) -> int:
        return self.count(("Pipelined",))

    @property
    def pending_best_effort(self) -> int:
        return sum(1 for task in self.tasks if task.status == "Pending" and task.best_effort)

    def is_ready(self) -> bool:
        return self.ready_num + self.pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_num + self.ready_num + self.pending_best_effort >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_num + self.ready_num < self.min_available

    def is_pending(self) -> bool:
        return self.phase in ("Pending", "")

    def valid_num(self) -> int:
        return self.count(VALID)


@dataclass(eq=False)
class NodeState:
    name: str
    obj: JsonDict
    idle: Resources
    releasing: Resources = field(default_factory=dict)
    pipelined: Resources = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)

    def future_idle(self) -> Resources:
        return capacity.subtract(capacity.add(self.idle, self.releasing), self.pipelined)

    def fits(self, task: Task, extra: Mapping[str, Decimal] | None = None) -> bool:
        """Whether the task's request fits FutureIdle (plus ``extra``): ``LessEqual(..., Zero)``."""
        room = self.future_idle()
        if extra:
            room = capacity.add(room, extra)
        return less_equal(task.request, room)


@dataclass(frozen=True)
class Placement:
    """Where allocate left a pending task: ``Binding`` (bound), ``Allocated`` (kept for a gang
    that is only pipelined) or ``Pipelined`` (on resources being released)."""

    status: str
    node: str


class SessionState:
    """The jobs, nodes and queue shares preempt and reclaim work on (see the module docstring)."""

    def __init__(
        self,
        *,
        nodes: list[JsonDict],
        pods: list[JsonDict],
        groups: list[Group],
        phases: Mapping[Key, str],
        queues: list[JsonDict],
        idle: Mapping[str, Resources],
        placements: Mapping[Key, Placement],
        conf: SchedulerConf,
    ) -> None:
        self.conf = conf
        self.queues = {q["metadata"]["name"]: q for q in queues}
        ordered = sorted(nodes, key=lambda n: n["metadata"]["name"])
        self.nodes: dict[str, NodeState] = {}
        for node_obj in ordered:
            name = node_obj["metadata"]["name"]
            self.nodes[name] = NodeState(name, node_obj, dict(idle.get(name, {})))
        for pod in pods:  # what terminating pods will give back (Releasing)
            node = self.nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
            if node is not None and capacity.holds_resources(pod) and task_status(pod) == "Releasing":
                node.releasing = capacity.add(node.releasing, capacity.pod_requests(pod))
        schedulable = [n for n in ordered if capacity.node_is_schedulable(n)]
        self.total = without_pods(capacity.total(capacity.node_allocatable(n) for n in schedulable))
        self.jobs: dict[Key, Job] = {}
        demands: list[tuple[str, Resources, Resources]] = []
        placed: list[Task] = []
        for group in groups:
            job = Job(group, phases.get(group.key, group.phase))
            held: Resources = {}
            asked: Resources = {}
            for pod in group.tasks:
                task = self._task(job, pod)
                job.tasks.append(task)
                if task.status in ALLOCATED:
                    held = capacity.add(held, task.request)
                elif task.status == "Pending":
                    asked = capacity.add(asked, task.request)
                where = placements.get(task.key)
                if where is not None and task.status == "Pending":
                    task.status, task.node = where.status, where.node
                    placed.append(task)
                if task.node is not None and task.status in ON_NODE and task.node in self.nodes:
                    node = self.nodes[task.node]
                    node.tasks.append(task)
                    if task.status == "Pipelined":
                        node.pipelined = capacity.add(node.pipelined, task.request)
            job.allocated = held
            demands.append((group.queue, held, asked))
            if not group.incomplete:  # a gang still being created is left out, as elsewhere
                self.jobs[group.key] = job
        self.proportion = Proportion(self.total, self.queues, demands) if conf.plugin("proportion") else None
        for task in placed:  # allocate's placements, as the plugins' event handlers saw them
            self.allocate(task)
        self.evictions: list[tuple[Task, str]] = []
        self.pipelines: list[Task] = []

    @staticmethod
    def _task(job: Job, pod: JsonDict) -> Task:
        metadata = pod.get("metadata") or {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        node = (pod.get("spec") or {}).get("nodeName") or None
        return Task(
            pod=pod,
            key=key,
            uid=str(metadata.get("uid") or "/".join(key)),
            job=job,
            status=task_status(pod),
            node=str(node) if node else None,
            request=without_pods(capacity.pod_requests(pod)),
            priority=task_priority(pod),
            preemptable=preemptable(pod),
        )

    # --- the plugins' event handlers (proportion and drf follow allocations) --------------------

    def allocate(self, task: Task) -> None:
        task.job.allocated = capacity.add(task.job.allocated, task.request)
        if self.proportion is not None:
            self.proportion.allocate(task.job.queue, task.request)

    def deallocate(self, task: Task) -> None:
        task.job.allocated = capacity.subtract(task.job.allocated, task.request)
        if self.proportion is not None:
            self.proportion.deallocate(task.job.queue, task.request)


@dataclass
class _Op:
    kind: str  # "evict" or "pipeline"
    task: Task
    reason: str = ""
    previous: str = ""


class Statement:
    """``framework.Statement``: evictions and pipelines the session sees until discarded."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.ops: list[_Op] = []

    def evict(self, task: Task, reason: str) -> None:
        op = _Op("evict", task, reason, task.status)
        task.status = "Releasing"
        node = self.state.nodes.get(task.node or "")
        if node is not None:
            node.releasing = capacity.add(node.releasing, task.request)
        self.state.deallocate(task)
        self.ops.append(op)

    def pipeline(self, task: Task, node_name: str, eviction_occurred: bool) -> None:
        task.status, task.node, task.eviction_occurred = "Pipelined", node_name, eviction_occurred
        node = self.state.nodes[node_name]
        node.pipelined = capacity.add(node.pipelined, task.request)
        node.tasks.append(task)
        self.state.allocate(task)
        self.ops.append(_Op("pipeline", task))

    def merge(self, other: Statement) -> None:
        self.ops.extend(other.ops)
        other.ops = []

    @property
    def has_evictions(self) -> bool:
        return any(op.kind == "evict" for op in self.ops)

    def discard(self) -> None:
        for op in reversed(self.ops):
            task = op.task
            node = self.state.nodes.get(task.node or "")
            if op.kind == "evict":
                task.status = op.previous
                if node is not None:
                    node.releasing = capacity.subtract(node.releasing, task.request)
                self.state.allocate(task)
            else:
                task.status, task.eviction_occurred = "Pending", False
                if node is not None:
                    node.pipelined = capacity.subtract(node.pipelined, task.request)
                    node.tasks.remove(task)
                task.node = None
                self.state.deallocate(task)
        self.ops = []

    def commit(self) -> None:
        for op in self.ops:
            if op.kind == "evict":
                self.state.evictions.append((op.task, op.reason))
            else:
                self.state.pipelines.append(op.task)
        self.ops = []
