"""The simulated Volcano job controller (vc-controller-manager's ``job-controller``): the I/O.

Follows ``pkg/controllers/job/job_controller.go`` of volcano-sh/volcano v1.16.0-alpha.1
(commit a4b775ad). Every change of a Job, of a pod it controls or of a PodGroup becomes a
`policies.Request` (``job_controller_handler.go``), queued per job; equal requests coalesce, as
in a work queue. Each round takes every job's requests in order (jobs in parallel, as the
workers do) and for each (``processNextReq``, lines 337-409): the job from the cache (gone:
dropped), the action its policies pick (`policies.apply_policies`; a policy ``timeout`` delays
it, lines 374-383 and 461-509), the `status.Step` its phase takes for that action, and the
operation's writes (`plan`), applied here in the upstream order, each write's answer into the
cache at once.

- A job being deleted is left alone: ``syncJob`` and ``killPods`` return at once
  (``job_controller_actions.go`` lines 93-97 and 353-357), so nothing is ever created for it;
  its pods, PodGroup, Service and ConfigMap carry controller ownerReferences to it and the API
  server's garbage collector removes them.
- A failed write ends that request's operation with an error (a failed pod creation before any
  deletion or status write, lines 553-557; a failed kill before its status write, 215-220);
  ``handleJobError`` (lines 511-528) then requeues the request with the work queue's per-item
  backoff (client-go's ``DefaultTypedControllerRateLimiter``: 5 ms doubling up to 1000 s) while
  it has been requeued fewer than ``--max-requeue-num`` times (15, ``cmd/controller-manager/app/
  options/options.go`` line 38), and past that executes ``TerminateJob`` on the job and drops
  the request. ``AlreadyExists`` on a pod or PodGroup create and ``NotFound`` on a delete
  count as done.
- ``ttlSecondsAfterFinished``: vc-controller-manager's garbage collector
  (``pkg/controllers/garbagecollector/garbagecollector.go`` lines 189-241) deletes a Completed,
  Failed or Terminated job, ``Foreground``, with its uid as precondition, once
  ``state.lastTransitionTime`` + the TTL has passed; here a timer wakes the round for it.

Events (reason ``ExecuteAction``, lines 385-391) are recorded for every action but ``SyncJob``.
Not modelled: bus Commands, volumes, job forwarding, ``dependsOn`` ordering of pod creation,
partitions, the error-task resync queue (a failed pod delete is retried by the requeue).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Callable
from dataclasses import replace

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import utc_now
from gang_sim.controllers.concurrency import in_parallel
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, Change, deep_get
from gang_sim.controllers.kinds import (
    CONFIGMAPS,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    SERVICES,
    VCJOBS,
    Kind,
    object_key,
)
from gang_sim.controllers.ownership import controlled_by
from gang_sim.controllers.runner import Controller
from gang_sim.controllers.volcano_jobs import build, plan, plugins
from gang_sim.controllers.volcano_jobs.policies import (
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    POD_RUNNING,
    Request,
    apply_policies,
    job_request,
    pod_request,
    podgroup_request,
)
from gang_sim.controllers.volcano_jobs.status import (
    RESTART_POD,
    RESTART_TASK,
    SYNC_JOB,
    TERMINATE_JOB,
    Step,
    transition,
)

log = logging.getLogger(__name__)

COMPONENT = "vc-controller-manager"
INDEX = "volcano-jobs/controller"
WRITE_ERRORS = (ApiError, aiohttp.ClientError, OSError, TimeoutError)
MAX_REQUEUE_NUM = 15
BACKOFF_BASE_SECONDS = 0.005
BACKOFF_MAX_SECONDS = 1000.0
INTERNAL_ACTIONS = frozenset({SYNC_JOB, "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"})
JobKey = tuple[str, str]


class OperationFailed(Exception):
    """An operation stopped at a failed write (the Go ``err`` it returns)."""


def requeue_delay(requeues: int) -> float:
    """The per-item backoff before the ``requeues``-th requeue of one request (1-based)."""
    return min(BACKOFF_BASE_SECONDS * 2.0 ** max(requeues - 1, 0), BACKOFF_MAX_SECONDS)


def _action_type(action: str) -> str:
    """``GetActionType`` (job_controller.go lines 446-471)."""
    return {RESTART_TASK: "task", RESTART_POD: "pod", "RestartPartition": "partition"}.get(action, "job")


class VolcanoJobController(Controller):
    """Volcano ``batch.volcano.sh/v1alpha1`` Jobs -> PodGroup, pods, svc objects, status.

    :param period: seconds between rounds without events.
    :param clock: the time status stamps and TTLs use.
    """

    name = "volcano-jobs"

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        period: float | None = 0.5,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        super().__init__(client, cache, period)
        self.clock = clock
        self.events = EventRecorder(client, COMPONENT, clock)
        self._queue: dict[JobKey, dict[Request, None]] = {}
        self._requeues: dict[Request, int] = {}
        self._delayed: dict[JobKey, dict[str, tuple[Request, str, asyncio.TimerHandle]]] = {}
        self._ttl_timer: asyncio.TimerHandle | None = None
        self._seen: dict[Kind, dict[JobKey, JsonDict]] = {}
        for kind in (PODS, SERVICES, CONFIGMAPS):
            cache[kind].add_index(INDEX, controlled_by(VCJOBS))
        for kind in (VCJOBS, PODS, PODGROUPS):
            cache[kind].subscribe_changes(functools.partial(self._changed, kind))
        cache[QUEUES]  # read, never watched for
        cache[PRIORITY_CLASSES]

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.events.close()

    # --- requests ------------------------------------------------------------------------------

    def _changed(self, kind: Kind, change: Change | None) -> None:
        if change is not None:
            change = self._as_handled(kind, change)
        if change is None:
            if kind == VCJOBS:  # a re-list: every job is looked at again
                for job in self.cache.items(VCJOBS):
                    self._add(Request(*object_key(job), "OutOfSync"))
            return
        if kind == VCJOBS:
            if change.type == "DELETED":
                self._forget(object_key(change.obj))
            request = job_request(change)
        elif kind == PODS:
            namespace, _ = object_key(change.obj)
            job_name = str(deep_get(change.obj, "metadata", "annotations", build.JOB_NAME_KEY, default=""))
            owner = self.cache.get(VCJOBS, namespace, job_name) if job_name else None
            pods = self._pods(owner) if owner is not None else []
            request = pod_request(change, owner, pods)
            if request is not None:
                self._clean_pod_delays(request)
        else:
            request = podgroup_request(change)
        if request is not None:
            self._add(request)

    def _as_handled(self, kind: Kind, change: Change) -> Change:
        """The change against the state this controller's handler last saw of that object.

        Upstream each handler compares the informer's old and new objects; here the cache is
        shared, and a controller's write answer (this one's or the scheduler's) may be in it
        before the watch event, so the state before is the one this handler was last offered.
        """
        seen = self._seen.setdefault(kind, {})
        key = object_key(change.obj)
        old = seen.get(key)
        if change.type == "DELETED":
            seen.pop(key, None)
        else:
            seen[key] = change.obj
        return Change(change.type, change.obj, old)

    def _add(self, request: Request) -> None:
        self._queue.setdefault(request.key, {})[request] = None
        self.wakeup.set()

    def _forget(self, key: JobKey) -> None:
        for _, _, handle in (self._delayed.pop(key, None) or {}).values():
            handle.cancel()

    def _pods(self, job: JsonDict) -> list[JsonDict]:
        return self.cache[PODS].indexed(INDEX, str(deep_get(job, "metadata", "uid", default="")))

    # --- delayed actions (job_controller.go lines 411-509, 530-572) ------------------------------

    def _clean_pod_delays(self, request: Request) -> None:
        """``CleanPodDelayActionsIfNeed``: a pod's later event cancels its delayed action."""
        if request.event not in (POD_RUNNING, POD_FAILED, POD_EVICTED):
            return
        delays = self._delayed.get(request.key) or {}
        entry = delays.get(request.pod)
        if entry is None:
            return
        delayed, event, handle = entry
        if (event == POD_PENDING and request.pod_uid == delayed.pod_uid) or (
            event in (POD_FAILED, POD_EVICTED) and request.event == POD_RUNNING
        ):
            handle.cancel()
            del delays[request.pod]

    def _delay(self, request: Request, action: str, seconds: float) -> None:
        delays = self._delayed.setdefault(request.key, {})
        current = delays.get(request.pod)
        if current is not None and current[0].action == action:
            return
        timed = replace(request, action=action)

        def fire() -> None:
            delays.pop(request.pod, None)
            self._add(timed)

        handle = asyncio.get_running_loop().call_later(seconds, fire)
        delays[request.pod] = (timed, request.event, handle)

    def _cleanup_delays(self, request: Request, action: str) -> None:
        """``cleanupDelayActions``: a done action cancels the delayed ones of its kind."""
        kind = _action_type(action)
        delays = self._delayed.get(request.key) or {}
        for pod, (delayed, _, handle) in list(delays.items()):
            if _action_type(delayed.action) != kind:
                continue
            if kind == "task" and delayed.task != request.task:
                continue
            if kind == "pod" and delayed.pod != request.pod:
                continue
            handle.cancel()
            del delays[pod]

    # --- one round -----------------------------------------------------------------------------

    async def reconcile(self) -> None:
        keys = list(self._queue)
        await in_parallel(self._drain(key) for key in keys)
        await self._collect_garbage()

    async def _drain(self, key: JobKey) -> None:
        while self._queue.get(key):
            requests = self._queue[key]
            request = next(iter(requests))
            del requests[request]
            await self._handle(request)
        if not self._queue.get(key):
            self._queue.pop(key, None)

    async def _handle(self, request: Request) -> None:
        job = self.cache.get(VCJOBS, *request.key)
        if job is None:
            self._requeues.pop(request, None)
            return
        decision = apply_policies(job, request)
        if decision.delay is not None and decision.delay.total_seconds() > 0:
            message = f"Execute action {decision.action} after {decision.delay}"
            self.events.record(job, "Normal", "ExecuteAction", message)
            self._delay(request, decision.action, decision.delay.total_seconds())
            return
        if decision.action != SYNC_JOB:
            self.events.record(job, "Normal", "ExecuteAction", f"Start to execute action {decision.action} ")
        try:
            await self._execute(job, request, decision.action)
        except (OperationFailed, *WRITE_ERRORS) as error:
            self._handle_error(job, request, decision.action, error)
            return
        self._requeues.pop(request, None)
        if decision.action not in INTERNAL_ACTIONS:
            self._cleanup_delays(request, decision.action)

    def _handle_error(self, job: JsonDict, request: Request, action: str, error: BaseException) -> None:
        """``handleJobError``: requeue with backoff, or terminate the job past the limit."""
        requeues = self._requeues.get(request, 0)
        if requeues < MAX_REQUEUE_NUM:
            self._requeues[request] = requeues + 1
            log.info("Failed to handle Job <%s/%s>: %s", *request.key, error)
            asyncio.get_running_loop().call_later(requeue_delay(requeues + 1), self._add, request)
            return
        self._requeues.pop(request, None)
        message = f"Job failed on action {action} for retry limit reached"
        self.events.record(job, "Normal", "ExecuteAction", message)
        log.warning("Terminating Job <%s/%s> and releasing resources", *request.key)
        self._add(replace(request, action=TERMINATE_JOB, event="", pod="", task=""))

    async def _execute(self, job: JsonDict, request: Request, action: str) -> None:
        step = transition(job, action)
        if step.operation == "sync":
            await self._sync(job, step)
        elif step.operation == "kill":
            await self._kill(job, step, None)
        else:
            target = (request.task, request.pod if action == RESTART_POD else "")
            await self._kill(job, step, target)

    # --- syncJob -------------------------------------------------------------------------------

    async def _sync(self, job: JsonDict, step: Step) -> None:
        namespace, _ = object_key(job)
        queue_name = str(deep_get(job, "spec", "queue", default="") or "")
        priorities = {
            str(deep_get(pc, "metadata", "name")): int(pc.get("value") or 0)
            for pc in self.cache.items(PRIORITY_CLASSES)
        }
        inputs = plan.Inputs(self.clock(), priorities, self.cache.get(QUEUES, "", queue_name) is not None)
        podgroup = self.cache.get(PODGROUPS, namespace, build.podgroup_name(job))
        todo = plan.plan_sync(job, self._pods(job), podgroup, inputs)
        if todo.error:
            raise OperationFailed(todo.error)
        if todo.init_status is not None:
            job = await self._write_status(job, todo.init_status) or job
        if todo.configmap is not None:
            await self._apply_configmap(todo.configmap)
        if todo.service is not None:
            await self._create(SERVICES, todo.service)
        if todo.create_podgroup is not None:
            await self._create(PODGROUPS, todo.create_podgroup)
        if todo.update_podgroup is not None:
            self.cache[PODGROUPS].observe(await self.client.replace(PODGROUPS, todo.update_podgroup))
        created: list[JsonDict] = []
        failures: list[str] = []

        async def create(pod: JsonDict) -> None:
            try:
                answer = await self._create(PODS, pod)
            except WRITE_ERRORS as error:
                failures.append(f"failed to create pod {build.name_of(pod)}, err: {error}")
                return
            if answer is not None:
                created.append(answer)

        await in_parallel(create(pod) for pod in todo.create_pods)
        if failures:
            self.events.record(job, "Warning", "FailedCreatePodReason", f"Error creating pods: {failures}")
            raise OperationFailed(f"failed to create {len(failures)} pods of {len(todo.create_pods)}")
        deleted = 0
        errors: list[str] = []

        async def delete(name: str) -> None:
            nonlocal deleted
            try:
                await self._delete(PODS, namespace, name)
                deleted += 1
            except WRITE_ERRORS as error:
                errors.append(str(error))

        await in_parallel(delete(name) for name in todo.delete_pods)
        if errors:
            self.events.record(job, "Warning", "FailedDeletePodReason", f"Error deleting pods: {errors}")
            raise OperationFailed(f"failed to delete {len(errors)} pods of {len(todo.delete_pods)}")
        current = self.cache.get(VCJOBS, namespace, build.name_of(job)) or job
        status = plan.sync_status(
            current, todo, step.update, now=self.clock(), created=created, deleted=deleted
        )
        if status is not None:
            await self._write_status(current, status)

    # --- killPods ------------------------------------------------------------------------------

    async def _kill(self, job: JsonDict, step: Step, target: tuple[str, str] | None) -> None:
        namespace, name = object_key(job)
        todo = plan.plan_kill(job, self._pods(job), step.retain, target)
        if todo.skip:
            return
        errors: list[str] = []
        killed = 0
        undeleted: list[JsonDict] = []

        async def kill(pod_name: str) -> None:
            nonlocal killed
            pod = self.cache.get(PODS, namespace, pod_name)
            patch = {"metadata": {"annotations": {build.OUT_OF_SYNC_KEY: "true"}}}
            try:
                marked = await self.client.patch(PODS, pod_name, patch, namespace)
                self.cache[PODS].observe(marked)
            except WRITE_ERRORS as error:
                if not (isinstance(error, ApiError) and error.status == 404):
                    errors.append(str(error))  # not deleted: that would restart it in a loop
                    return
            try:
                await self._delete(PODS, namespace, pod_name)
                killed += 1
            except WRITE_ERRORS as error:
                errors.append(str(error))
                if pod is not None:
                    undeleted.append(pod)

        await in_parallel(kill(pod_name) for pod_name in todo.kill_pods)
        if errors:
            self.events.record(job, "Warning", "FailedDeletePodReason", f"Error deleting pods: {errors}")
            raise OperationFailed(f"failed to kill {len(errors)} pods of {len(todo.kill_pods)}")
        status = plan.kill_status(
            job, todo, step.update, now=self.clock(), killed=killed, undeleted=undeleted
        )
        if todo.delete_configmap:
            await self._delete(CONFIGMAPS, namespace, plugins.configmap_name(job))
        if todo.delete_service:
            await self._delete(SERVICES, namespace, name)
        written = await self._write_status(job, status)
        if written is None:
            return
        if todo.delete_podgroup:
            await self._delete(PODGROUPS, namespace, build.podgroup_name(job))

    # --- ttlSecondsAfterFinished -----------------------------------------------------------------

    async def _collect_garbage(self) -> None:
        now = self.clock()
        soonest: dt.datetime | None = None
        for job in self.cache.items(VCJOBS):
            expiry = plan.ttl_expiry(job)
            if expiry is None:
                continue
            if expiry > now:
                soonest = expiry if soonest is None else min(soonest, expiry)
                continue
            namespace, name = object_key(job)
            body = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "propagationPolicy": "Foreground",
                "preconditions": {"uid": deep_get(job, "metadata", "uid")},
            }
            try:
                answer = await self.client.request("DELETE", VCJOBS.path(namespace, name), body=body)
            except WRITE_ERRORS as error:
                if not (isinstance(error, ApiError) and error.status in (404, 409)):
                    log.info("error cleaning up Job %s/%s, will retry: %s", namespace, name, error)
                    soonest = now
                continue
            log.info("vcjob deleted after ttlSecondsAfterFinished job=%s/%s", namespace, name)
            if deep_get(answer, "metadata", "deletionTimestamp"):
                self.cache[VCJOBS].observe(answer)
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None
        if soonest is not None:
            delay = max((soonest - now).total_seconds(), 0.0) + 0.05
            self._ttl_timer = asyncio.get_running_loop().call_later(delay, self.wakeup.set)

    # --- writes --------------------------------------------------------------------------------

    async def _create(self, kind: Kind, body: JsonDict) -> JsonDict | None:
        """Create; the stored object, or None when one of that name exists (done already)."""
        try:
            created = await self.client.create(kind, body, deep_get(body, "metadata", "namespace"))
        except ApiError as error:
            if error.status == 409:
                return None
            raise
        self.cache[kind].observe(created)
        return created

    async def _delete(self, kind: Kind, namespace: str, name: str) -> None:
        cached = self.cache.get(kind, namespace, name)
        try:
            answer = await self.client.delete(kind, name, namespace)
        except ApiError as error:
            if error.status != 404:
                raise
            if cached is not None:
                self.cache[kind].forget(cached)
            return
        if deep_get(answer, "metadata", "deletionTimestamp"):
            self.cache[kind].observe(answer)
        elif cached is not None:
            self.cache[kind].forget(cached)

    async def _apply_configmap(self, configmap: JsonDict) -> None:
        """``CreateOrUpdateConfigMap`` (apis/helpers/helpers.go lines 81-122)."""
        namespace, name = object_key(configmap)
        current = self.cache.get(CONFIGMAPS, namespace, name)
        if current is None:
            if await self._create(CONFIGMAPS, configmap) is not None:
                return
            current = await self.client.get(CONFIGMAPS, name, namespace)
        if (current.get("data") or {}) == configmap["data"]:
            return
        self.cache[CONFIGMAPS].observe(
            await self.client.replace(CONFIGMAPS, {**current, "data": configmap["data"]})
        )

    async def _write_status(self, job: JsonDict, status: JsonDict) -> JsonDict | None:
        """``UpdateStatus``; None when the job is gone (NotFound is no error, lines 251-254)."""
        try:
            written = await self.client.replace(VCJOBS, {**job, "status": status}, subresource="status")
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        self.cache[VCJOBS].observe(written)
        old_phase = deep_get(job, "status", "state", "phase", default="")
        new_phase = deep_get(status, "state", "phase", default="")
        if old_phase != new_phase:
            log.info("vcjob phase job=%s/%s %s -> %s", *object_key(job), old_phase or '""', new_phase)
        return written


__all__ = ["VolcanoJobController", "requeue_delay"]
