"""The simulated Kubeflow training-operator (v1, PyTorchJob only): the I/O around `pytorchjob_plan`.

Each round it reads PyTorchJobs, pods, services (and, with ``gang_scheduler_name="volcano"``,
PodGroups and PriorityClasses) from the shared cache, asks `plan_job` what every job needs, and
applies the answers through the API in a fixed order of steps: PodGroups, deletions, pod
creations interleaved across jobs (`rounds`: every job's first pod, then every job's second
...), services, PodGroup/job removals, then status through the ``/status`` subresource, only
when it changed. Within a step (a round of pods) the writes go out together
(`concurrency.in_parallel`), as the real operator's workers send them for many jobs at once;
the writes themselves, and which failures count, are `pytorchjob_writes`. A job whose PodGroup
sync fails (the webhook refusing a closed queue, a conflict on the spec write) gets no pods that
round and is not retried: the real ``ReconcileJobs`` only logs ``Sync PodGroup ...`` and returns
no error. Any other failed write (a pod, a service, the status, a deletion) requeues that job
with the work queue's per-item backoff (5 ms doubling up to 1000 s, `requeue_delay`).

Which events wake which job follows v1.9's ``SetupWithManager`` and its predicates
(`pytorchjob_watches`): a job's own events, its dependents' through their controller
reference only, a re-list's changes; nothing else comes back on its own (controller-runtime's
default resync is ten hours, ``RESYNC_SECONDS``).

Jobs submitted (or resumed from suspension) together get their pods together: a job that has no
pods yet waits until no other new job has shown up for ``batch_window`` seconds (at most
``BATCH_LIMIT`` after the first of them; `creation_batch.CreationBatch`), and then the pods of all
waiting jobs are created round-robin. A client that
submits six jobs in a loop thus meets the same interleaving the real operator's parallel
workers produce, every time, instead of winning or losing a race against this loop.

Memory kept between rounds, per job: when it was first seen (for that batching), how many
failed pods were deleted to restart them (the real operator keeps the equivalent in its work
queue), which counts against ``backoffLimit``, and its failed rounds in a row (the backoff); a
restarted operator starts them afresh. Deadlines and TTLs wake their job by a timer, against
the injected clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Iterable

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import utc_now
from gang_sim.controllers.concurrency import in_parallel
from gang_sim.controllers.creation_batch import CreationBatch, rounds
from gang_sim.controllers.informer import Cache, Change, deep_get
from gang_sim.controllers.kinds import (
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PYTORCHJOBS,
    SERVICES,
    Kind,
    object_key,
)
from gang_sim.controllers.runner import Controller
from gang_sim.controllers.training_operator.pytorchjob_plan import JobPlan, PlanInputs, plan_job
from gang_sim.controllers.training_operator.pytorchjob_resources import VOLCANO
from gang_sim.controllers.training_operator.pytorchjob_watches import (
    CONTROLLER_INDEX,
    JobKey,
    controller_uids,
    job_of_child,
    job_uid,
    jobs_woken,
)
from gang_sim.controllers.training_operator.pytorchjob_writes import WRITE_ERRORS, JobWrites

log = logging.getLogger(__name__)

MANAGED_BY = "kubeflow.org/training-operator"
# controller-runtime's default SyncPeriod (the operator sets none): in practice, never.
RESYNC_SECONDS = 10 * 3600.0
# client-go's DefaultControllerRateLimiter, per item: 5 ms doubling, at most 1000 s.
BACKOFF_BASE_SECONDS = 0.005
BACKOFF_MAX_SECONDS = 1000.0


def requeue_delay(failures: int) -> float:
    """Seconds before a job whose round failed ``failures`` times in a row is reconciled again."""
    return min(BACKOFF_BASE_SECONDS * 2.0 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS)


def _creation_order(obj: JsonDict) -> tuple[str, str, str]:
    namespace, name = object_key(obj)
    return str(deep_get(obj, "metadata", "creationTimestamp", default="")), namespace, name


class TrainingOperator(Controller):
    """PyTorchJob → pods, headless services, conditions; optionally the Volcano PodGroup.

    :param gang_scheduler_name: ``"volcano"`` (any case) mirrors ``--gang-scheduler-name=volcano``;
        ``None`` leaves PodGroups alone. Other schedulers are not simulated.
    :param period: seconds between rounds without events (deadlines and TTLs need them).
    :param clock: the time the decisions use; tests may inject their own.
    :param batch_window: quiet seconds after the latest new job before new jobs get their pods
        (0 creates them on sight).
    """

    name = "training-operator"
    kinds = (PYTORCHJOBS, PODS, SERVICES)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        gang_scheduler_name: str | None = None,
        period: float | None = 0.5,
        clock: Callable[[], dt.datetime] = utc_now,
        batch_window: float = 0.25,
    ) -> None:
        if gang_scheduler_name and gang_scheduler_name.lower() != VOLCANO:
            raise ValueError(
                f"gang_scheduler_name={gang_scheduler_name!r} is not simulated: use 'volcano' or None"
            )
        self.gang_scheduler = VOLCANO if gang_scheduler_name else None
        self._dirty: set[JobKey] = set()
        self._plan_all = True
        super().__init__(client, cache, period)
        self.clock = clock
        if self.gang_scheduler is not None:
            # Only with the flag: a cluster without Volcano has no podgroups to list.
            self.follow(PODGROUPS)
            cache[PRIORITY_CLASSES]  # read for minResources, never watched for
        self._batch = CreationBatch(batch_window)
        self._restarts: dict[str, int] = {}
        self._failures: dict[JobKey, int] = {}  # failed rounds in a row, for the backoff
        self._timer: asyncio.TimerHandle | None = None
        self._writes = JobWrites(client, cache)
        self._last_full_round = float("-inf")
        self._wake_at: dict[JobKey, dt.datetime] = {}
        self._sync_failures: set[JobKey] = set()
        for kind in (PODS, SERVICES):
            cache[kind].add_index(CONTROLLER_INDEX, controller_uids)

    # --- which events wake which job (`pytorchjob_watches`) -------------------------------------

    def follow(self, kind: Kind) -> None:
        self.cache[kind].subscribe_changes(functools.partial(self._changed, kind))

    def _changed(self, kind: Kind, change: Change | None) -> None:
        if change is None:
            # A re-list: its changed objects were offered one by one just before. Listing jobs
            # again offers every job (the job watch has no update predicate): plan them all.
            if kind == PYTORCHJOBS:
                self._plan_all = True
                self.wakeup.set()
            return
        keys = jobs_woken(self.cache, kind, change)
        if keys:
            self._dirty |= keys
            self.wakeup.set()

    def _requeue_jobs(self, keys: Iterable[JobKey]) -> None:
        self._dirty |= set(keys)
        self.wakeup.set()

    def _due_jobs(self) -> None:
        now = self.clock()
        due = {key for key, moment in self._wake_at.items() if moment <= now}
        for key in due:
            del self._wake_at[key]
        self._requeue_jobs(due)
        self._schedule_wake(now)

    # --- one round ----------------------------------------------------------------------------

    async def reconcile(self) -> None:
        now = self.clock()
        full = self._plan_all or time.monotonic() - self._last_full_round >= RESYNC_SECONDS
        if full:
            self._plan_all, self._last_full_round = False, time.monotonic()
            candidates = self.cache.items(PYTORCHJOBS)
        else:
            candidates = [job for key in self._dirty if (job := self.cache.get(PYTORCHJOBS, *key))]
        taken, self._dirty = self._dirty, set()
        try:
            await self._round(now, candidates, full)
        except BaseException:
            # Nothing of this round may be lost: the runner retries, and it plans the dirty set.
            self._dirty |= taken | {object_key(job) for job in candidates}
            raise

    async def _round(self, now: dt.datetime, candidates: list[JsonDict], full: bool) -> None:
        jobs = sorted((job for job in candidates if self._manages(job)), key=_creation_order)
        pods = self.cache[PODS]
        services = self.cache[SERVICES]
        priorities = {
            str(deep_get(pc, "metadata", "name")): int(pc.get("value") or 0)
            for pc in (self.cache.items(PRIORITY_CLASSES) if self.gang_scheduler else [])
        }
        plans: list[tuple[JsonDict, JobPlan]] = []
        for job in jobs:
            uid = job_uid(job)
            namespace, name = object_key(job)
            podgroup = self.cache.get(PODGROUPS, namespace, name) if self.gang_scheduler else None
            inputs = PlanInputs(now, self.gang_scheduler, self._restarts.get(uid, 0), priorities)
            owned_pods = pods.indexed(CONTROLLER_INDEX, uid)
            owned_services = services.indexed(CONTROLLER_INDEX, uid)
            plans.append((job, plan_job(job, owned_pods, owned_services, podgroup, inputs)))
        if full:
            live = {job_uid(job) for job in jobs}
            self._restarts = {uid: n for uid, n in self._restarts.items() if uid in live}
            self._batch.keep_only(live)
            self._wake_at = {}
        waiting = self._batching(plans)
        self._dirty |= {object_key(job) for job, _ in plans if job_uid(job) in waiting}
        plans = [(job, plan) for job, plan in plans if job_uid(job) not in waiting]
        self._writes.failed, self._sync_failures = set(), set()

        await in_parallel(self._sync_podgroup(job, plan) for job, plan in plans)
        # A failed PodGroup sync turns the job's round into a delayed one (ReconcileJobs:
        # syncReplicas = false): no pods, no services, only lastReconcileTime.
        plans = [
            (job, _delayed(job, plan) if object_key(job) in self._sync_failures else plan)
            for job, plan in plans
        ]
        await in_parallel(self._delete_children(job, plan) for job, plan in plans)
        for row in rounds([plan.create_pods for _, plan in plans]):
            await in_parallel(self._writes.create(PODS, pod, job_of_child(pod)) for pod in row)
        services_to_create = [svc for _, plan in plans for svc in plan.create_services]
        await in_parallel(self._writes.create(SERVICES, svc, job_of_child(svc)) for svc in services_to_create)
        await in_parallel(self._finish(job, plan) for job, plan in plans)
        for job, plan in plans:
            if plan.wake_at is not None:
                self._wake_at[object_key(job)] = plan.wake_at
            else:
                self._wake_at.pop(object_key(job), None)
        self._schedule_wake(now)
        self._back_off({object_key(job) for job, _ in plans})

    def _back_off(self, planned: set[JobKey]) -> None:
        """Requeue the jobs whose round failed after their backoff; forget the others' failures."""
        for key in planned - self._writes.failed:
            self._failures.pop(key, None)
        loop = asyncio.get_running_loop()
        for key in self._writes.failed & planned:
            self._failures[key] = failures = self._failures.get(key, 0) + 1
            loop.call_later(requeue_delay(failures), self._requeue_jobs, {key})

    def _batching(self, plans: list[tuple[JsonDict, JobPlan]]) -> set[str]:
        """The jobs whose first pods wait for more jobs submitted together (see the module doc)."""
        pods = self.cache[PODS]
        fresh = {
            job_uid(job)
            for job, plan in plans
            if plan.create_pods and not pods.indexed(CONTROLLER_INDEX, job_uid(job))
        }
        jobs = [(job_uid(job), bool(deep_get(job, "spec", "runPolicy", "suspend"))) for job, _ in plans]
        return self._batch.held(jobs, fresh, self.wakeup.set)

    def _manages(self, job: JsonDict) -> bool:
        if deep_get(job, "metadata", "deletionTimestamp"):
            return False
        managed_by = deep_get(job, "spec", "runPolicy", "managedBy")
        return not managed_by or managed_by == MANAGED_BY

    # --- applying a plan ----------------------------------------------------------------------

    async def _sync_podgroup(self, job: JsonDict, plan: JobPlan) -> None:
        key = object_key(job)
        if plan.create_podgroup is not None:
            try:
                created = await self.client.create(PODGROUPS, plan.create_podgroup, key[0])
            except WRITE_ERRORS as error:
                self._sync_failures.add(key)
                if isinstance(error, ApiError) and error.status == 409:
                    # The group exists and this cache has not seen it yet; the real operator
                    # reads it fresh, finds it and syncs it in the same round: plan again.
                    self._requeue_jobs({key})
                else:
                    log.warning("Sync PodGroup %s/%s: unable to create PodGroup: %s", *key, error)
                return
            self.cache[PODGROUPS].observe(created)
            log.info("podgroup created job=%s/%s", *key)
        if plan.update_podgroup is not None:
            replaced = await self._writes.write(
                PODGROUPS, plan.update_podgroup, key, create=False, requeue=False
            )
            if replaced is None:
                self._sync_failures.add(key)

    async def _delete_children(self, job: JsonDict, plan: JobPlan) -> None:
        key = object_key(job)
        namespace, _ = key
        uid = job_uid(job)
        for pod in plan.restart_pods:
            if await self._writes.delete(PODS, namespace, pod, key):
                self._restarts[uid] = self._restarts.get(uid, 0) + 1
                log.info("pod restarted job=%s/%s pod=%s", namespace, _name(job), pod)
        for pod in plan.delete_pods:
            await self._writes.delete(PODS, namespace, pod, key)
        for service in plan.delete_services:
            await self._writes.delete(SERVICES, namespace, service, key)

    async def _finish(self, job: JsonDict, plan: JobPlan) -> None:
        key = object_key(job)
        namespace, name = key
        if plan.delete_podgroup:
            await self._writes.delete(PODGROUPS, namespace, name, key)
        if plan.delete_job:
            if await self._writes.delete(PYTORCHJOBS, namespace, name, key):
                log.info("pytorchjob deleted after ttlSecondsAfterFinished job=%s/%s", namespace, name)
            return
        if plan.status is not None:
            await self._writes.write_status(job, plan.status)

    def _schedule_wake(self, now: dt.datetime) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._wake_at:
            return
        delay = max((min(self._wake_at.values()) - now).total_seconds(), 0.0)
        # The margin lands the round just after the second the deadline names.
        self._timer = asyncio.get_running_loop().call_later(delay + 0.05, self._due_jobs)


def _delayed(job: JsonDict, plan: JobPlan) -> JobPlan:
    """The round of a job whose PodGroup sync failed: only the delayed status (and its timer)."""
    status = plan.delayed_status
    changed = status is not None and status != (job.get("status") or {})
    return JobPlan(status=status if changed else None, wake_at=plan.wake_at)


def _name(job: JsonDict) -> str:
    return object_key(job)[1]


__all__ = ["TrainingOperator", "requeue_delay", "utc_now"]
