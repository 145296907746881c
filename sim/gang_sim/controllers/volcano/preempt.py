"""Volcano's ``preempt`` and ``reclaim`` actions on one session's state (pure: no I/O).

Both follow Volcano v1.16.0-alpha.1 (commit a4b775ad), ``pkg/scheduler/actions``; the plugin
functions they ask are `plugins.Plugins`, the state they change `state`.

**Who may take** (``preempt/preempt.go:112-151``, ``reclaim/reclaim.go:72-104``): a job whose
PodGroup has been admitted (not ``Pending``, ``api/job_info.go:1263-1267``) — so a gang the
enqueue gate holds back can never preempt or reclaim —, valid, whose queue exists, and that is
*starving*; its pending pods (not scheduling-gated) in task order. A pod with
``preemptionPolicy: Never`` takes nothing (``preempt.go:440-443``, ``reclaim.go:145``).

**preempt** takes inside the preemptor's own queue only. Per queue (queue order), per starving
job (job order), one Statement: while the job starves, its next pod looks for victims node by
node (``normalPreempt``, :337-438): Bound or Running pods of *another job of the same queue*
(:198-216) with ``volcano.sh/preemptable`` not false, a best-effort preemptor taking only
best-effort pods; the plugins vote; if FutureIdle plus the victims cannot hold the pod the node
is skipped (``util.ValidateVictims``); victims go lowest first, each evicted with reason
``preempt``, until the queue is Allocatable for the pod and it fits FutureIdle; then the pod is
*Pipelined* there (not bound) and the node's evictions join the job's Statement, else they are
discarded and the next node is tried. The job's Statement is committed only if the job is then
pipelined (``Ready + Pipelined >= minAvailable``, :222-232), else every eviction is undone.
Then, between the pods of one job (:239-295), each pending pod of the queue's starving jobs may
take from *its own job's* Running/Bound pods (task priority decides), committed per pod with no
pipelined check. A pod nominated to a node whose other predicates pass may not preempt again
(``taskEligibleToPreempt``, :440-477). The topology-aware variant is not simulated.

**reclaim** takes from *other* queues only (``reclaim.go:180-261``): queues in queue order, an
``Overused`` queue skipped (:112); per starving job one Statement; a pod its queue cannot hold
(``Preemptive``) is skipped (:150); per node, only *Running* pods of other jobs whose queue is
reclaimable (``spec.reclaimable``, unset: true) and with ``volcano.sh/preemptable`` not false are
candidates (:186-206, a node without any is skipped), the plugins vote, the victims are evicted
lowest first with reason ``reclaim`` until the pod fits FutureIdle plus what was reclaimed, and
the pod is pipelined on the first node where it then fits. Committed only if the job is then
pipelined (:163-171).

Nodes are tried in name order (Volcano scores them with its nodeorder plugins for preempt).
"""

from __future__ import annotations

from collections.abc import Callable

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.model import Key
from gang_sim.controllers.volcano.plugins import Plugins, PriorityQueue
from gang_sim.controllers.volcano.proportion import is_empty, less_equal
from gang_sim.controllers.volcano.state import Job, NodeState, SessionState, Statement, Task

Filter = Callable[[Task], bool]
PREEMPTABLE_STATUSES = frozenset({"Bound", "Running"})


def _candidates(state: SessionState, plugins: Plugins) -> list[Job]:
    """The jobs that may take, in job order: admitted, valid, in a queue that exists."""
    jobs = [
        job
        for job in state.jobs.values()
        if not job.is_pending() and plugins.job_valid(job) and job.queue in state.queues
    ]
    return _ordered(jobs, plugins.job_less)


def _ordered(jobs: list[Job], less: Callable[[Job, Job], bool]) -> list[Job]:
    queue = PriorityQueue(less, jobs)
    ordered = []
    while not queue.empty():
        ordered.append(queue.pop())
    return ordered


def _pending_tasks(job: Job, plugins: Plugins) -> PriorityQueue[Task]:
    return PriorityQueue(plugins.task_less, [task for task in job.pending() if not task.gated])


def preempt(state: SessionState, plugins: Plugins) -> None:
    """The ``preempt`` action (``actions/preempt/preempt.go:98-296``)."""
    preemptors: dict[str, PriorityQueue[Job]] = {}
    tasks: dict[Key, PriorityQueue[Task]] = {}
    under_request: dict[str, list[Job]] = {}
    for job in _candidates(state, plugins):
        if not plugins.job_starving(job):
            continue
        preemptors.setdefault(job.queue, PriorityQueue(plugins.job_less)).push(job)
        under_request.setdefault(job.queue, []).append(job)
        tasks[job.key] = _pending_tasks(job, plugins)
    queues = PriorityQueue(plugins.queue_less, list(preemptors))
    while not queues.empty():
        queue = queues.pop()
        jobs = preemptors[queue]
        while not jobs.empty():
            job = jobs.pop()
            stmt = Statement(state)
            assigned = False
            while plugins.job_starving(job) and not tasks[job.key].empty():
                preemptor = tasks[job.key].pop()
                assigned = _preempt(state, plugins, stmt, preemptor, _other_job_in_queue(preemptor))
            if not plugins.job_pipelined(job):
                stmt.discard()
                continue
            stmt.commit()
            if assigned:
                jobs.push(job)
        for job in under_request.get(queue, []):  # between the pods of one job
            own = _pending_tasks(job, plugins)
            while not own.empty():
                preemptor = own.pop()
                stmt = Statement(state)
                if not _preempt(state, plugins, stmt, preemptor, _same_job(preemptor)):
                    stmt.discard()
                    break
                stmt.commit()


def _takeable(preemptor: Task, task: Task) -> bool:
    """The status, best-effort and ``volcano.sh/preemptable`` filters of both phases."""
    if task.status not in PREEMPTABLE_STATUSES:
        return False
    if preemptor.best_effort and not task.best_effort:
        return False
    return task.preemptable


def _other_job_in_queue(preemptor: Task) -> Filter:
    def takeable(task: Task) -> bool:
        return (
            _takeable(preemptor, task)
            and task.job.queue == preemptor.job.queue
            and task.job is not preemptor.job
        )

    return takeable


def _same_job(preemptor: Task) -> Filter:
    def takeable(task: Task) -> bool:
        return _takeable(preemptor, task) and task.job is preemptor.job

    return takeable


def _eligible(state: SessionState, plugins: Plugins, preemptor: Task) -> bool:
    """``taskEligibleToPreempt`` (``preempt.go:440-477``)."""
    if preemptor.never_preempts:
        return False
    nominated = preemptor.nominated
    if nominated:
        node = state.nodes.get(nominated)
        if node is None:
            return False
        # Predicates passing there means "schedulable already": no preempting again. A node
        # failing them (selector, taint, cordon) is unresolvable, and the pod may preempt.
        if plugins.predicate(preemptor, node):
            return False
    return True


def _preempt(
    state: SessionState, plugins: Plugins, stmt: Statement, preemptor: Task, takeable: Filter
) -> bool:
    if not _eligible(state, plugins, preemptor):
        return False
    queue = preemptor.job.queue
    for node in state.nodes.values():
        if not plugins.predicate(preemptor, node):
            continue
        preemptees = [task for task in node.tasks if task.job.key in state.jobs and takeable(task)]
        victims = plugins.preemptable(preemptor, preemptees)
        if not plugins.validate_victims(preemptor, node, victims):
            continue
        node_stmt = Statement(state)
        preempted: Resources = {}
        for victim in plugins.victims_in_order(victims, preemptor):
            if _placeable(plugins, queue, preemptor, node):
                break
            node_stmt.evict(victim, "preempt")
            preempted = capacity.add(preempted, victim.request)
        if _placeable(plugins, queue, preemptor, node):
            node_stmt.pipeline(preemptor, node.name, not is_empty(preempted))
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


def _placeable(plugins: Plugins, queue: str, task: Task, node: NodeState) -> bool:
    return plugins.allocatable(queue, task) and node.fits(task)


def reclaim(state: SessionState, plugins: Plugins) -> None:
    """The ``reclaim`` action (``actions/reclaim/reclaim.go:57-178``)."""
    queues: PriorityQueue[str] = PriorityQueue(plugins.queue_less)
    seen: set[str] = set()
    preemptors: dict[str, PriorityQueue[Job]] = {}
    tasks: dict[Key, PriorityQueue[Task]] = {}
    for job in _candidates(state, plugins):
        if job.queue not in seen:
            seen.add(job.queue)
            queues.push(job.queue)
        if plugins.job_starving(job):
            preemptors.setdefault(job.queue, PriorityQueue(plugins.job_less)).push(job)
            tasks[job.key] = _pending_tasks(job, plugins)
    while not queues.empty():
        queue = queues.pop()
        if plugins.overused(queue):
            continue
        jobs = preemptors.get(queue)
        while jobs is not None and not jobs.empty():
            job = jobs.pop()
            stmt = Statement(state)
            while plugins.job_starving(job) and not tasks[job.key].empty():
                task = tasks[job.key].pop()
                if task.never_preempts or not plugins.preemptive(queue, task):
                    continue
                _reclaim_for_task(state, plugins, stmt, task)
            if plugins.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
            if not jobs.empty():
                queues.push(queue)  # as reclaim.go:173-175 does, while it goes on with this queue


def _reclaim_for_task(state: SessionState, plugins: Plugins, stmt: Statement, task: Task) -> None:
    for node in state.nodes.values():
        if not plugins.predicate(task, node):
            continue
        reclaimees = [
            other
            for other in node.tasks
            if other.status == "Running"
            and other.preemptable
            and other.job.key in state.jobs
            and other.job.queue != task.job.queue
            and plugins.reclaimable_queue(other.job.queue)
        ]
        if not reclaimees:
            continue
        victims = plugins.reclaimable(task, reclaimees)
        if not plugins.validate_victims(task, node, victims):
            continue
        available = node.future_idle()
        node_stmt = Statement(state)
        evicted = False
        for victim in plugins.victims_in_order(victims, task):
            if less_equal(task.request, available):
                break
            node_stmt.evict(victim, "reclaim")
            available = capacity.add(available, victim.request)
            evicted = True
        if not less_equal(task.request, available):
            node_stmt.discard()
            continue
        node_stmt.pipeline(task, node.name, evicted)
        stmt.merge(node_stmt)
        return
