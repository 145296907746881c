"""The plugin functions preempt and reclaim ask, combined across tiers as vc-scheduler combines them.

Line numbers are of Volcano v1.16.0-alpha.1 (commit a4b775ad), ``pkg/scheduler``:

- **Votes** (``framework/session_plugins.go:225-321``): the tiers are walked in order, skipping a
  plugin whose ``enablePreemptable``/``enableReclaimable`` is false; within a tier the plugins'
  victim lists are intersected. A plugin answering an *empty* list ends its tier with no
  victims (``victims = nil; break``, :242-244, :292-294) — and since nothing was decided, the
  *next* tier then decides on its own (:315-317). An intersection that comes out empty is nil as
  well, so the tier's next plugin starts afresh from its own list. The first tier with a
  non-empty answer wins.

  - ``priority`` (preempt only, ``plugins/priority/priority.go:111-149``): another job's pod
    only if that job's priority is strictly lower; a pod of the preemptor's own job only if its
    task priority is strictly lower.
  - ``gang`` (both, ``plugins/gang/gang.go:97-129``): per victim job, at most
    ``ReadyTaskNum - minAvailable`` pods (Bound, Binding, Running, Allocated and Succeeded pods
    count as ready), so a job at its minimum — a full gang of ``minAvailable == replicas`` —
    gives none.
  - ``conformance`` (both, ``plugins/conformance/conformance.go:47-66``): never a pod in
    ``kube-system`` or of priority class ``system-cluster-critical``/``system-node-critical``.
  - ``drf`` (preempt only, ``plugins/drf/drf.go:222-263``): a pod while the preemptor job's
    dominant share with the new pod stays <= the victim job's without it.
  - ``proportion`` (reclaim only, ``plugins/proportion/proportion.go:288-319``): pods of a queue
    while its allocation is over its deserved share.

- **Starving** (:537-561): the first tier with a starving function decides, AND of its
  functions: gang's ``Pipelined + Ready < minAvailable`` (``gang.go:221-226``), priority's
  ``Ready + Pipelined < len(tasks)`` (``priority.go:174-178``). **Pipelined** (:505-533): any
  reject is false, a permit in a tier true, true by default; gang permits when
  ``Pipelined + Ready + pending best-effort >= minAvailable`` (``gang.go:204-211``). **Valid**:
  gang's ``ValidTaskNum >= minAvailable`` (``gang.go:58-95``). **Overused** (:365-382, any),
  **Preemptive** (:385-402, all) and **Allocatable** (:405-422, all): proportion's.
- **Orders**: jobs by the first plugin with a difference (priority: higher first; gang: not ready
  first, ``gang.go:139-163``; drf: smaller share first), then creation time and UID (:717-750);
  tasks by priority, then ``CompareTask`` (pod index, creation, UID); queues by proportion (queue
  priority, then share), then creation and name; victims lowest first
  (``BuildVictimsPriorityQueue``, :1163-1215).

Task-level ``minAvailable`` (``minTaskMember``), sub-jobs and network topologies are not simulated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Generic, TypeVar

from gang_sim.controllers import capacity
from gang_sim.controllers.volcano.proportion import less_equal, share
from gang_sim.controllers.volcano.state import Job, NodeState, SessionState, Task

Vote = Callable[[Task, list[Task]], list[Task]]
T = TypeVar("T")
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SHARE_DELTA = Decimal("0.000001")


class Plugins:
    """The configured plugins' functions for one session (see the module docstring)."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.conf = state.conf
        self._preemptable: dict[str, Vote] = {
            "priority": self._priority_vote,
            "gang": self._gang_vote,
            "conformance": self._conformance_vote,
            "drf": self._drf_vote,
        }
        self._reclaimable: dict[str, Vote] = {
            "gang": self._gang_vote,
            "conformance": self._conformance_vote,
            "proportion": self._proportion_vote,
        }

    # --- votes ----------------------------------------------------------------------------------

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        return self._combine("enable_preemptable", self._preemptable, preemptor, preemptees) or []

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task]:
        return self._combine("enable_reclaimable", self._reclaimable, reclaimer, reclaimees) or []

    def _combine(
        self, flag: str, votes: dict[str, Vote], task: Task, candidates: list[Task]
    ) -> list[Task] | None:
        victims: list[Task] | None = None
        for tier in self.conf.tiers:
            for plugin in tier.plugins:
                if not plugin.enabled(flag):
                    continue
                vote = votes.get(plugin.name)
                if vote is None:
                    continue
                chosen = vote(task, candidates)  # every simulated vote is a Permit, never an abstain
                if not chosen:
                    victims = None
                    break
                if victims is None:
                    victims = chosen
                else:
                    ids = {id(c) for c in chosen}
                    victims = [v for v in victims if id(v) in ids] or None
            if victims is not None:
                return victims
        return victims

    def _priority_vote(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        victims = []
        for preemptee in preemptees:
            if preemptee.job is not preemptor.job:
                if preemptee.job.priority < preemptor.job.priority:
                    victims.append(preemptee)
            elif preemptee.priority < preemptor.priority:
                victims.append(preemptee)
        return victims

    def _gang_vote(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        occupied: dict[int, int] = {}
        victims = []
        for preemptee in preemptees:
            job = preemptee.job
            left = occupied.setdefault(id(job), job.ready_num)
            if left > job.min_available:
                occupied[id(job)] = left - 1
                victims.append(preemptee)
        return victims

    def _conformance_vote(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        return [
            t
            for t in preemptees
            if (t.pod.get("spec") or {}).get("priorityClassName") not in CRITICAL_CLASSES
            and t.key[0] != "kube-system"
        ]

    def _drf_vote(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        total = self.state.total
        mine = share(capacity.add(preemptor.job.allocated, preemptor.request), total)
        allocations: dict[int, capacity.Resources] = {}
        victims = []
        for preemptee in preemptees:
            job = preemptee.job
            left = capacity.subtract(allocations.get(id(job), job.allocated), preemptee.request)
            allocations[id(job)] = left
            theirs = share(left, total)
            if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                victims.append(preemptee)
        return victims

    def _proportion_vote(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task]:
        proportion = self.state.proportion
        if proportion is None:
            return []
        chosen = proportion.reclaimable([(t.job.queue, t.request) for t in reclaimees])
        return [reclaimees[index] for index in chosen]

    # --- job and queue functions ----------------------------------------------------------------

    def job_valid(self, job: Job) -> bool:
        if self.conf.plugin("gang") is None:
            return True
        return job.valid_num() >= job.min_available

    def job_starving(self, job: Job) -> bool:
        for tier in self.conf.tiers:
            found = False
            for plugin in tier.plugins:
                if not plugin.enabled("enable_job_starving"):
                    continue
                if plugin.name == "gang":
                    found = True
                    if not job.is_starving():
                        return False
                elif plugin.name == "priority":
                    found = True
                    if job.ready_num + job.waiting_num >= len(job.tasks):
                        return False
            if found:
                return True
        return False

    def job_pipelined(self, job: Job) -> bool:
        for tier in self.conf.tiers:
            permitted = False
            for plugin in tier.plugins:
                if plugin.name != "gang" or not plugin.enabled("enable_job_pipelined"):
                    continue
                if not job.is_pipelined():
                    return False
                permitted = True
            if permitted:
                return True
        return True

    def overused(self, queue: str) -> bool:
        proportion = self.state.proportion
        return (
            proportion is not None
            and self.conf.enabled("proportion", "enable_overused")
            and proportion.overused(queue)
        )

    def preemptive(self, queue: str, task: Task) -> bool:
        proportion = self.state.proportion
        if proportion is None or not self.conf.enabled("proportion", "enable_preemptive"):
            return True
        return proportion.allocatable(queue, task.request)

    def allocatable(self, queue: str, task: Task) -> bool:
        proportion = self.state.proportion
        if proportion is None or not self.conf.enabled("proportion", "enable_allocatable"):
            return True
        return proportion.allocatable(queue, task.request)

    def reclaimable_queue(self, queue: str) -> bool:
        """``QueueInfo.Reclaimable()``: ``spec.reclaimable``, true when unset; false for no queue."""
        found = self.state.queues.get(queue)
        if found is None:
            return False
        value = (found.get("spec") or {}).get("reclaimable")
        return True if value is None else bool(value)

    def predicate(self, task: Task, node: NodeState) -> bool:
        """The non-resource predicates (the ``predicates`` plugin; none configured: all pass)."""
        if not self.conf.enabled("predicates", "enable_predicate"):
            return True
        return capacity.matches_node(task.pod, node.obj) is None

    # --- orders ---------------------------------------------------------------------------------

    def job_compare(self, left: Job, right: Job) -> int:
        for tier in self.conf.tiers:
            for plugin in tier.plugins:
                if not plugin.enabled("enable_job_order"):
                    continue
                if plugin.name == "priority" and left.priority != right.priority:
                    return -1 if left.priority > right.priority else 1
                if plugin.name == "gang":
                    ready_left, ready_right = left.is_ready(), right.is_ready()
                    if ready_left != ready_right:
                        return 1 if ready_left else -1
                if plugin.name == "drf":
                    share_left = share(left.allocated, self.state.total)
                    share_right = share(right.allocated, self.state.total)
                    if share_left != share_right:
                        return -1 if share_left < share_right else 1
        return 0

    def job_less(self, left: Job, right: Job) -> bool:
        compared = self.job_compare(left, right)
        if compared:
            return compared < 0
        if left.created == right.created:
            return left.uid < right.uid
        return left.created < right.created

    def task_less(self, left: Task, right: Task) -> bool:
        if self.conf.enabled("priority", "enable_task_order") and left.priority != right.priority:
            return left.priority > right.priority
        index_left, index_right = left.index, right.index
        if index_left is None or index_right is None or index_left == index_right:
            if left.created == right.created:
                return left.uid < right.uid
            return left.created < right.created
        return index_left < index_right

    def queue_less(self, left: str, right: str) -> bool:
        proportion = self.state.proportion
        if proportion is not None and self.conf.enabled("proportion", "enable_queue_order"):
            order_left, order_right = proportion.order(left), proportion.order(right)
            if order_left != order_right:
                return order_left < order_right
        created_left, created_right = self._queue_created(left), self._queue_created(right)
        if created_left == created_right:
            return left < right
        return created_left < created_right

    def _queue_created(self, name: str) -> str:
        queue = self.state.queues.get(name) or {}
        return str((queue.get("metadata") or {}).get("creationTimestamp") or "")

    def victims_in_order(self, victims: list[Task], preemptor: Task) -> list[Task]:
        """``BuildVictimsPriorityQueue``: the victims to evict first come first."""

        def less(left: Task, right: Task) -> bool:
            if left.job is right.job:
                return not self.task_less(left, right)
            if left.job.queue != right.job.queue:
                return not self.queue_less(left.job.queue, right.job.queue)
            compared = self.job_compare(left.job, right.job)
            if compared:
                return compared > 0
            return not self.task_less(left, right)

        return _sorted(victims, less)

    def validate_victims(self, task: Task, node: NodeState, victims: list[Task]) -> bool:
        """``util.ValidateVictims``: FutureIdle and the victims' requests cover the task's."""
        freed = capacity.total(victim.request for victim in victims)
        return less_equal(task.request, capacity.add(node.future_idle(), freed))


def _sorted(items: list[Task], less: Callable[[Task, Task], bool]) -> list[Task]:
    def compare(left: Task, right: Task) -> int:
        if less(left, right):
            return -1
        return 1 if less(right, left) else 0

    return sorted(items, key=functools.cmp_to_key(compare))


class PriorityQueue(Generic[T]):
    """``util.PriorityQueue``: pop the item no other is less than (orders here are total)."""

    def __init__(self, less: Callable[[T, T], bool], items: list[T] | None = None) -> None:
        self.less = less
        self.items: list[T] = list(items or [])

    def push(self, item: T) -> None:
        self.items.append(item)

    def empty(self) -> bool:
        return not self.items

    def pop(self) -> T:
        best = 0
        for index in range(1, len(self.items)):
            if self.less(self.items[index], self.items[best]):
                best = index
        return self.items.pop(best)
