"""The simulated Kubeflow training-operator (v1, PyTorchJob only): the I/O around `pytorchjob_plan`.

Each round it reads PyTorchJobs, pods, services (and, with ``gang_scheduler_name="volcano"``,
PodGroups and PriorityClasses) from the shared cache, asks `plan_job` what every job needs, and
applies the answers through the API in a fixed order of steps: PodGroups, deletions, pod
creations interleaved across jobs (`rounds`: every job's first pod, then every job's second
...), services, PodGroup/job removals, then status through the ``/status`` subresource, only
when it changed. Within a step (a round of pods) the writes go out together
(`concurrency.in_parallel`), as the real operator's workers send them for many jobs at once.
``AlreadyExists`` on create and ``NotFound`` on delete mean done. A job whose PodGroup sync
fails (the webhook refusing a closed queue, a conflict on the spec write) gets no pods that
round and is not retried: the real ``ReconcileJobs`` only logs ``Sync PodGroup ...`` and returns
no error. Any other failed write (a pod, a service, the status, a deletion) requeues that job
with the work queue's per-item backoff (5 ms doubling up to 1000 s, `requeue_delay`).

Which events wake which job follows v1.9's ``SetupWithManager`` and its predicates
(``pkg/controller.v1/pytorch/pytorchjob_controller.go``, ``pkg/common/util/reconciler.go``):

- every PyTorchJob event wakes that job (including the status writes of this controller);
- a pod, service or PodGroup wakes only the job named by its *controller* ownerReference
  (``EnqueueRequestForOwner(..., OnlyControllerOwner())``) — a create or delete only when it
  carries the ``training.kubeflow.org/replica-type`` label (so never a PodGroup), an update
  only when that reference resolves to the cached job of the same uid;
- PriorityClasses are only read, never watched for;
- a re-list wakes what it found changed (`informer.Change`); nothing else comes back on its
  own: controller-runtime's default resync is ten hours (``RESYNC_SECONDS``).

So a PodGroup someone else made without a controller reference to the job never wakes it:
with the gang flag, such a job sees its group ``Pending`` once and never learns it was
admitted — the hang of a provider-made PodGroup owned with ``controller: false``.

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

import aiohttp

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
from gang_sim.controllers.training_operator.pytorchjob_resources import (
    JOB_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    VOLCANO,
)

log = logging.getLogger(__name__)

MANAGED_BY = "kubeflow.org/training-operator"
# controller-runtime's default SyncPeriod (the operator sets none): in practice, never.
RESYNC_SECONDS = 10 * 3600.0
# client-go's DefaultControllerRateLimiter, per item: 5 ms doubling, at most 1000 s.
BACKOFF_BASE_SECONDS = 0.005
BACKOFF_MAX_SECONDS = 1000.0
CONTROLLER_INDEX = "training-operator/controller"
JobKey = tuple[str, str]
_WRITE_ERRORS = (ApiError, aiohttp.ClientError, OSError, TimeoutError)


def requeue_delay(failures: int) -> float:
    """Seconds before a job whose round failed ``failures`` times in a row is reconciled again."""
    return min(BACKOFF_BASE_SECONDS * 2.0 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS)


def _creation_order(obj: JsonDict) -> tuple[str, str, str]:
    namespace, name = object_key(obj)
    return str(deep_get(obj, "metadata", "creationTimestamp", default="")), namespace, name


def _controller_ref(obj: JsonDict | None) -> JsonDict | None:
    """The controller ownerReference of ``obj`` if it points at a PyTorchJob."""
    for ref in deep_get(obj, "metadata", "ownerReferences", default=None) or []:
        if ref.get("controller") and ref.get("kind") == PYTORCHJOBS.kind:
            group = str(ref.get("apiVersion") or "").partition("/")[0]
            return dict(ref) if group == PYTORCHJOBS.group else None
    return None


def _controller_uids(obj: JsonDict) -> list[str]:
    ref = _controller_ref(obj)
    return [str(ref.get("uid"))] if ref is not None else []


def _conditions(status: JsonDict | None) -> set[tuple[str, str, str]]:
    return {(c.get("type"), c.get("status"), c.get("reason")) for c in (status or {}).get("conditions") or []}


def _job_of_child(child: JsonDict) -> JobKey:
    """The job a pod or service built by `plan_job` belongs to (before it has a uid)."""
    namespace, _ = object_key(child)
    return namespace, str(deep_get(child, "metadata", "labels", JOB_NAME_LABEL, default=""))


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
        self._reported: dict[tuple[str, str, str], str] = {}
        self._last_full_round = float("-inf")
        self._wake_at: dict[JobKey, dt.datetime] = {}
        self._round_failures: set[JobKey] = set()
        self._sync_failures: set[JobKey] = set()
        for kind in (PODS, SERVICES):
            cache[kind].add_index(CONTROLLER_INDEX, _controller_uids)

    # --- which events wake which job (see the module docstring) ---------------------------------

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
        keys = self._jobs_woken(kind, change)
        if keys:
            self._dirty |= keys
            self.wakeup.set()

    def _jobs_woken(self, kind: Kind, change: Change) -> set[JobKey]:
        if kind == PYTORCHJOBS:
            return set() if change.type == "DELETED" else {object_key(change.obj)}
        namespace, _ = object_key(change.obj)
        if change.type != "MODIFIED":
            # OnDependentCreate/DeleteFunc: only objects with a replica type get through.
            labels = deep_get(change.obj, "metadata", "labels", default=None) or {}
            ref = _controller_ref(change.obj)
            if REPLICA_TYPE_LABEL not in labels or ref is None:
                return set()
            return {(namespace, str(ref.get("name")))}
        # OnDependentUpdateFunc: the controller, resolved to the cached job of that uid, and the
        # previous controller if the reference changed.
        woken = set()
        new, old = _controller_ref(change.obj), _controller_ref(change.old)
        for ref in (new, old if old != new else None):
            if ref is not None and self._resolves(namespace, ref):
                woken.add((namespace, str(ref.get("name"))))
        return woken

    def _resolves(self, namespace: str, ref: JsonDict) -> bool:
        job = self.cache.get(PYTORCHJOBS, namespace, str(ref.get("name")))
        return job is not None and _uid(job) == str(ref.get("uid"))

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
            uid = _uid(job)
            namespace, name = object_key(job)
            podgroup = self.cache.get(PODGROUPS, namespace, name) if self.gang_scheduler else None
            inputs = PlanInputs(now, self.gang_scheduler, self._restarts.get(uid, 0), priorities)
            owned_pods = pods.indexed(CONTROLLER_INDEX, uid)
            owned_services = services.indexed(CONTROLLER_INDEX, uid)
            plans.append((job, plan_job(job, owned_pods, owned_services, podgroup, inputs)))
        if full:
            live = {_uid(job) for job in jobs}
            self._restarts = {uid: n for uid, n in self._restarts.items() if uid in live}
            self._batch.keep_only(live)
            self._wake_at = {}
        waiting = self._batching(plans)
        self._dirty |= {object_key(job) for job, _ in plans if _uid(job) in waiting}
        plans = [(job, plan) for job, plan in plans if _uid(job) not in waiting]
        self._round_failures, self._sync_failures = set(), set()

        await in_parallel(self._sync_podgroup(job, plan) for job, plan in plans)
        # A failed PodGroup sync turns the job's round into a delayed one (ReconcileJobs:
        # syncReplicas = false): no pods, no services, only lastReconcileTime.
        plans = [
            (job, _delayed(job, plan) if object_key(job) in self._sync_failures else plan)
            for job, plan in plans
        ]
        await in_parallel(self._delete_children(job, plan) for job, plan in plans)
        for row in rounds([plan.create_pods for _, plan in plans]):
            await in_parallel(self._create(PODS, pod, _job_of_child(pod)) for pod in row)
        services_to_create = [svc for _, plan in plans for svc in plan.create_services]
        await in_parallel(self._create(SERVICES, svc, _job_of_child(svc)) for svc in services_to_create)
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
        for key in planned - self._round_failures:
            self._failures.pop(key, None)
        loop = asyncio.get_running_loop()
        for key in self._round_failures & planned:
            self._failures[key] = failures = self._failures.get(key, 0) + 1
            loop.call_later(requeue_delay(failures), self._requeue_jobs, {key})

    def _batching(self, plans: list[tuple[JsonDict, JobPlan]]) -> set[str]:
        """The jobs whose first pods wait for more jobs submitted together (see the module doc)."""
        pods = self.cache[PODS]
        fresh = {
            _uid(job)
            for job, plan in plans
            if plan.create_pods and not pods.indexed(CONTROLLER_INDEX, _uid(job))
        }
        jobs = [(_uid(job), bool(deep_get(job, "spec", "runPolicy", "suspend"))) for job, _ in plans]
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
            except _WRITE_ERRORS as error:
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
            replaced = await self._write(PODGROUPS, plan.update_podgroup, key, create=False, requeue=False)
            if replaced is None:
                self._sync_failures.add(key)

    async def _delete_children(self, job: JsonDict, plan: JobPlan) -> None:
        key = object_key(job)
        namespace, _ = key
        uid = _uid(job)
        for pod in plan.restart_pods:
            if await self._delete(PODS, namespace, pod, key):
                self._restarts[uid] = self._restarts.get(uid, 0) + 1
                log.info("pod restarted job=%s/%s pod=%s", namespace, _name(job), pod)
        for pod in plan.delete_pods:
            await self._delete(PODS, namespace, pod, key)
        for service in plan.delete_services:
            await self._delete(SERVICES, namespace, service, key)

    async def _finish(self, job: JsonDict, plan: JobPlan) -> None:
        key = object_key(job)
        namespace, name = key
        if plan.delete_podgroup:
            await self._delete(PODGROUPS, namespace, name, key)
        if plan.delete_job:
            if await self._delete(PYTORCHJOBS, namespace, name, key):
                log.info("pytorchjob deleted after ttlSecondsAfterFinished job=%s/%s", namespace, name)
            return
        if plan.status is not None:
            await self._write_status(job, plan.status)

    async def _write_status(self, job: JsonDict, status: JsonDict) -> None:
        key = object_key(job)
        try:
            written = await self.client.replace(PYTORCHJOBS, {**job, "status": status}, subresource="status")
        except _WRITE_ERRORS as error:
            # A conflict (someone wrote the job meanwhile) is an error like any other: the job
            # is requeued and decided again on fresh state.
            if not (isinstance(error, ApiError) and error.status == 404):
                self._round_failures.add(key)
                if not (isinstance(error, ApiError) and error.status == 409):
                    self._report(PYTORCHJOBS, job, error)
            return
        self.cache[PYTORCHJOBS].observe(written)
        for ctype, truth, reason in sorted(_conditions(status) - _conditions(job.get("status"))):
            log.info(
                "pytorchjob condition job=%s/%s type=%s status=%s reason=%s",
                *key,
                ctype,
                truth,
                reason,
            )

    def _schedule_wake(self, now: dt.datetime) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._wake_at:
            return
        delay = max((min(self._wake_at.values()) - now).total_seconds(), 0.0)
        # The margin lands the round just after the second the deadline names.
        self._timer = asyncio.get_running_loop().call_later(delay + 0.05, self._due_jobs)

    # --- idempotent verbs ---------------------------------------------------------------------

    async def _create(self, kind: Kind, body: JsonDict, key: JobKey) -> None:
        await self._write(kind, body, key, create=True, requeue=True)

    async def _write(
        self, kind: Kind, body: JsonDict, key: JobKey, *, create: bool, requeue: bool
    ) -> JsonDict | None:
        """Create or replace ``body``; the stored object, or None when the write did not happen.

        A create answered ``AlreadyExists`` counts as done (an earlier round made it); with
        ``requeue`` a failure requeues the job (`_back_off`), else it is only logged.
        """
        namespace, _ = object_key(body)
        try:
            if create:
                written = await self.client.create(kind, body, namespace)
            else:
                written = await self.client.replace(kind, body)
        except _WRITE_ERRORS as error:
            status = error.status if isinstance(error, ApiError) else None
            if create and status == 409:
                return None if kind == PODGROUPS else body
            if requeue and status != 404:
                self._round_failures.add(key)
            if kind == PODGROUPS:
                log.warning("Sync PodGroup %s/%s: unable to update a PodGroup: %s", *key, error)
            elif status not in (404, 409):
                self._report(kind, body, error)
            return None
        self.cache[kind].observe(written)
        return written

    async def _delete(self, kind: Kind, namespace: str, name: str, key: JobKey) -> bool:
        """Delete; True when this call did it. A pod that now terminates stays in the cache."""
        cached = self.cache.get(kind, namespace, name)
        try:
            answer = await self.client.delete(kind, name, namespace)
        except _WRITE_ERRORS as error:
            if isinstance(error, ApiError) and error.status == 404:
                if cached is not None:
                    self.cache[kind].forget(cached)
            else:
                self._round_failures.add(key)
                self._report(kind, cached or {"metadata": {"namespace": namespace, "name": name}}, error)
            return False
        if deep_get(answer, "metadata", "deletionTimestamp"):
            self.cache[kind].observe(answer)
        elif cached is not None:
            self.cache[kind].forget(cached)
        return True

    def _report(self, kind: Kind, obj: JsonDict, error: BaseException) -> None:
        """Log a refused write once per object and message; the next rounds retry quietly."""
        key = (kind.plural, *object_key(obj))
        if self._reported.get(key) != str(error):
            if len(self._reported) > 10_000:  # bounded: a forgotten entry only costs one more line
                self._reported.clear()
            self._reported[key] = str(error)
            log.warning("training-operator write refused %s/%s/%s: %s", *key, error)


def _delayed(job: JsonDict, plan: JobPlan) -> JobPlan:
    """The round of a job whose PodGroup sync failed: only the delayed status (and its timer)."""
    status = plan.delayed_status
    changed = status is not None and status != (job.get("status") or {})
    return JobPlan(status=status if changed else None, wake_at=plan.wake_at)


def _uid(job: JsonDict) -> str:
    return str(deep_get(job, "metadata", "uid", default=""))


def _name(job: JsonDict) -> str:
    return object_key(job)[1]


__all__ = ["TrainingOperator", "requeue_delay", "utc_now"]
