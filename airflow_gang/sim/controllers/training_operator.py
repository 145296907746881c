"""The simulated Kubeflow training-operator (v1, PyTorchJob only): the I/O around `training_plan`.

Each round it reads PyTorchJobs, pods, services (and, with ``gang_scheduler_name="volcano"``,
PodGroups and PriorityClasses) from the shared cache, asks `plan_job` what every job needs, and
applies the answers through the API in a fixed order of steps: PodGroups, deletions, pod
creations interleaved across jobs (`rounds`: every job's first pod, then every job's second
...), services, PodGroup/job removals, then status through the ``/status`` subresource, only
when it changed. Within a step (a round of pods) the writes go out together
(`concurrency.in_parallel`), as the real operator's workers send them for many jobs at once.
Writes are idempotent: ``AlreadyExists`` on create and ``NotFound`` on delete mean done, a
``Conflict`` on status waits for the next round, and a rejected create (say the PodGroup
webhook refusing a closed queue) is logged and retried later, as the real operator does.
Deadlines and TTLs are re-checked by the period and a timer, against the injected clock.

Jobs submitted (or resumed from suspension) together get their pods together: a job that has no
pods yet waits until no other new job has shown up for ``batch_window`` seconds (at most
``BATCH_LIMIT`` after the first of them), and then the pods of all waiting jobs are created
round-robin. A client that
submits six jobs in a loop thus meets the same interleaving the real operator's parallel
workers produce, every time, instead of winning or losing a race against this loop.

Rounds are incremental, like the real operator's work queue: a change to a job, or to a pod,
service or PodGroup it controls, marks that job dirty, and a round plans only the dirty jobs.
Everything is planned again after a re-list, a conflict, and every ``RESYNC_SECONDS`` (the
informer resync of the real one); a job's deadline or TTL marks it dirty when it comes due.

Memory kept between rounds, per job: when it was first seen (for that batching) and how many
failed pods were deleted to restart them (the real operator keeps the equivalent in its work
queue), which counts against ``backoffLimit``; a restarted operator starts that count afresh.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from airflow_gang.sim.controllers.client import ApiError, JsonDict, KubeClient
from airflow_gang.sim.controllers.clock import utc_now
from airflow_gang.sim.controllers.concurrency import in_parallel
from airflow_gang.sim.controllers.informer import Cache, deep_get
from airflow_gang.sim.controllers.kinds import (
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PYTORCHJOBS,
    SERVICES,
    Kind,
    object_key,
)
from airflow_gang.sim.controllers.pytorchjob_resources import VOLCANO
from airflow_gang.sim.controllers.runner import Controller
from airflow_gang.sim.controllers.training_plan import JobPlan, PlanInputs, plan_job, rounds

log = logging.getLogger(__name__)

MANAGED_BY = "kubeflow.org/training-operator"
BATCH_LIMIT = 1.0  # seconds a steady stream of new jobs may hold back the first ones' pods
RESYNC_SECONDS = 10.0
CONTROLLER_INDEX = "training-operator/controller"
JobKey = tuple[str, str]


def _creation_order(obj: JsonDict) -> tuple[str, str, str]:
    namespace, name = object_key(obj)
    return str(deep_get(obj, "metadata", "creationTimestamp", default="")), namespace, name


def _controller_ref(obj: JsonDict) -> JsonDict | None:
    """The ownerReference of the PyTorchJob controlling ``obj``, if any."""
    for ref in deep_get(obj, "metadata", "ownerReferences", default=None) or []:
        if ref.get("controller") and ref.get("kind") == PYTORCHJOBS.kind:
            return dict(ref)
    return None


def _controller_uids(obj: JsonDict) -> list[str]:
    ref = _controller_ref(obj)
    return [str(ref.get("uid"))] if ref is not None else []


def _controller_key(obj: JsonDict) -> JobKey | None:
    ref = _controller_ref(obj)
    return (object_key(obj)[0], str(ref.get("name"))) if ref is not None else None


def _conditions(status: JsonDict | None) -> set[tuple[str, str, str]]:
    return {(c.get("type"), c.get("status"), c.get("reason")) for c in (status or {}).get("conditions") or []}


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
        super().__init__(client, cache, period)
        if gang_scheduler_name and gang_scheduler_name.lower() != VOLCANO:
            raise ValueError(
                f"gang_scheduler_name={gang_scheduler_name!r} is not simulated: use 'volcano' or None"
            )
        self.gang_scheduler = VOLCANO if gang_scheduler_name else None
        self.clock = clock
        if self.gang_scheduler is not None:
            # Only with the flag: a cluster without Volcano has no podgroups to list.
            for kind in (PODGROUPS, PRIORITY_CLASSES):
                self.follow(kind)
        self.batch_window = batch_window
        self._restarts: dict[str, int] = {}
        self._first_seen: dict[str, float] = {}  # job uid -> when first seen unsuspended
        self._timer: asyncio.TimerHandle | None = None
        self._reported: dict[tuple[str, str, str], str] = {}
        self._dirty: set[JobKey] = set()
        self._plan_all = True
        self._last_full_round = float("-inf")
        self._wake_at: dict[JobKey, dt.datetime] = {}
        for kind in (PODS, SERVICES):
            cache[kind].add_index(CONTROLLER_INDEX, _controller_uids)

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        if kind in (PYTORCHJOBS, PODGROUPS):  # a PodGroup is named after its job
            self._dirty.add(object_key(obj))
            return True
        if kind in (PODS, SERVICES):
            key = _controller_key(obj)
            if key is not None:
                self._dirty.add(key)
            return key is not None
        self._plan_all = True  # a PriorityClass: any job may use it
        return True

    def _offered(self, kind: Kind, obj: JsonDict | None) -> None:
        if obj is None:  # a re-list: anything may have changed
            self._plan_all = True
        super()._offered(kind, obj)

    def requeue(self) -> None:
        """Plan every job again soon (after a conflict: which job it concerned no longer matters)."""
        self._plan_all = True
        super().requeue()

    def _requeue_jobs(self, keys: set[JobKey]) -> None:
        self._dirty |= keys
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
        self._dirty = set()
        jobs = sorted((job for job in candidates if self._manages(job)), key=_creation_order)
        pods = self.cache[PODS]
        services = self.cache[SERVICES]
        priorities = {
            str(deep_get(pc, "metadata", "name")): int(pc.get("value") or 0)
            for pc in (self.cache.items(PRIORITY_CLASSES) if self.gang_scheduler else [])
        }
        plans: list[tuple[JsonDict, JobPlan]] = []
        for job in jobs:
            uid = str(deep_get(job, "metadata", "uid", default=""))
            namespace, name = object_key(job)
            podgroup = self.cache.get(PODGROUPS, namespace, name) if self.gang_scheduler else None
            inputs = PlanInputs(now, self.gang_scheduler, self._restarts.get(uid, 0), priorities)
            owned_pods = pods.indexed(CONTROLLER_INDEX, uid)
            owned_services = services.indexed(CONTROLLER_INDEX, uid)
            plans.append((job, plan_job(job, owned_pods, owned_services, podgroup, inputs)))
        if full:
            live = {_uid(job) for job in jobs}
            self._restarts = {uid: n for uid, n in self._restarts.items() if uid in live}
            self._first_seen = {uid: t for uid, t in self._first_seen.items() if uid in live}
            self._wake_at = {}
        waiting = self._batching(plans)
        self._dirty |= {object_key(job) for job, _ in plans if _uid(job) in waiting}
        plans = [(job, plan) for job, plan in plans if _uid(job) not in waiting]

        await in_parallel(self._sync_podgroup(job, plan) for job, plan in plans)
        await in_parallel(self._delete_children(job, plan) for job, plan in plans)
        for row in rounds([plan.create_pods for _, plan in plans]):
            await in_parallel(self._create(PODS, pod) for pod in row)
        await in_parallel(self._create(SERVICES, svc) for _, plan in plans for svc in plan.create_services)
        await in_parallel(self._finish(job, plan) for job, plan in plans)
        for job, plan in plans:
            if plan.wake_at is not None:
                self._wake_at[object_key(job)] = plan.wake_at
            else:
                self._wake_at.pop(object_key(job), None)
        self._schedule_wake(now)

    def _batching(self, plans: list[tuple[JsonDict, JobPlan]]) -> set[str]:
        """The jobs whose first pods wait for more jobs submitted together (see the module doc)."""
        moment = time.monotonic()
        for job, _ in plans:
            if deep_get(job, "spec", "runPolicy", "suspend"):
                # A suspended job is not yet submitted as far as its pods go: jobs resumed
                # together get their pods together, like jobs created together.
                self._first_seen.pop(_uid(job), None)
            else:
                self._first_seen.setdefault(_uid(job), moment)
        pods = self.cache[PODS]
        fresh = {
            _uid(job)
            for job, plan in plans
            if plan.create_pods and not pods.indexed(CONTROLLER_INDEX, _uid(job))
        }
        if not fresh or self.batch_window <= 0:
            return set()
        newest = max(self._first_seen[uid] for uid in fresh)
        oldest = min(self._first_seen[uid] for uid in fresh)
        release = min(newest + self.batch_window, oldest + BATCH_LIMIT)
        if moment >= release:
            return set()
        asyncio.get_running_loop().call_later(release - moment, self.wakeup.set)
        return fresh

    def _manages(self, job: JsonDict) -> bool:
        if deep_get(job, "metadata", "deletionTimestamp"):
            return False
        managed_by = deep_get(job, "spec", "runPolicy", "managedBy")
        return not managed_by or managed_by == MANAGED_BY

    # --- applying a plan ----------------------------------------------------------------------

    async def _sync_podgroup(self, job: JsonDict, plan: JobPlan) -> None:
        if plan.create_podgroup is not None:
            created = await self._create(PODGROUPS, plan.create_podgroup)
            if created is not None:
                log.info("podgroup created job=%s/%s", *object_key(job))
        if plan.update_podgroup is not None:
            await self._replace(PODGROUPS, plan.update_podgroup)

    async def _delete_children(self, job: JsonDict, plan: JobPlan) -> None:
        namespace, _ = object_key(job)
        uid = _uid(job)
        for pod in plan.restart_pods:
            if await self._delete(PODS, namespace, pod):
                self._restarts[uid] = self._restarts.get(uid, 0) + 1
                log.info("pod restarted job=%s/%s pod=%s", namespace, _name(job), pod)
        for pod in plan.delete_pods:
            await self._delete(PODS, namespace, pod)
        for service in plan.delete_services:
            await self._delete(SERVICES, namespace, service)

    async def _finish(self, job: JsonDict, plan: JobPlan) -> None:
        namespace, name = object_key(job)
        if plan.delete_podgroup:
            await self._delete(PODGROUPS, namespace, name)
        if plan.delete_job:
            if await self._delete(PYTORCHJOBS, namespace, name):
                log.info("pytorchjob deleted after ttlSecondsAfterFinished job=%s/%s", namespace, name)
            return
        if plan.status is not None:
            await self._write_status(job, plan.status)

    async def _write_status(self, job: JsonDict, status: JsonDict) -> None:
        namespace, name = object_key(job)
        try:
            written = await self.client.replace(PYTORCHJOBS, {**job, "status": status}, subresource="status")
        except ApiError as error:
            if error.status == 409:
                self.requeue()  # someone wrote the job meanwhile; decide again on fresh state
            elif error.status != 404:
                self._report(PYTORCHJOBS, job, error)
            return
        self.cache[PYTORCHJOBS].observe(written)
        for ctype, truth, reason in sorted(_conditions(status) - _conditions(job.get("status"))):
            log.info(
                "pytorchjob condition job=%s/%s type=%s status=%s reason=%s",
                namespace,
                name,
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

    async def _create(self, kind: Kind, body: JsonDict) -> JsonDict | None:
        namespace, _ = object_key(body)
        try:
            created = await self.client.create(kind, body, namespace)
        except ApiError as error:
            if error.status != 409:  # AlreadyExists: an earlier round did it
                self._report(kind, body, error)
            return None
        self.cache[kind].observe(created)
        return created

    async def _replace(self, kind: Kind, body: JsonDict) -> None:
        try:
            replaced = await self.client.replace(kind, body)
        except ApiError as error:
            if error.status == 409:
                self.requeue()
            elif error.status != 404:
                self._report(kind, body, error)
            return
        self.cache[kind].observe(replaced)

    async def _delete(self, kind: Kind, namespace: str, name: str) -> bool:
        """Delete; True when this call did it. A pod that now terminates stays in the cache."""
        cached = self.cache.get(kind, namespace, name)
        try:
            answer = await self.client.delete(kind, name, namespace)
        except ApiError as error:
            if error.status == 404 and cached is not None:
                self.cache[kind].forget(cached)
            elif error.status != 404:
                self._report(kind, cached or {"metadata": {"namespace": namespace, "name": name}}, error)
            return False
        if deep_get(answer, "metadata", "deletionTimestamp"):
            self.cache[kind].observe(answer)
        elif cached is not None:
            self.cache[kind].forget(cached)
        return True

    def _report(self, kind: Kind, obj: JsonDict, error: ApiError) -> None:
        """Log a refused write once per object and message; the next rounds retry quietly."""
        key = (kind.plural, *object_key(obj))
        if self._reported.get(key) != str(error):
            if len(self._reported) > 10_000:  # bounded: a forgotten entry only costs one more line
                self._reported.clear()
            self._reported[key] = str(error)
            log.warning("training-operator write refused %s/%s/%s: %s", *key, error)


def _uid(job: JsonDict) -> str:
    return str(deep_get(job, "metadata", "uid", default=""))


def _name(job: JsonDict) -> str:
    return object_key(job)[1]


__all__ = ["TrainingOperator", "utc_now"]
