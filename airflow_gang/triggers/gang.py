"""`GangJobTrigger`: waits asynchronously for a gang's admission, then (optionally) its completion.

It follows the job, its PodGroup and its pods with list + watch (`change_feed.ChangeFeed`:
re-listing after ``410 Gone``), re-evaluates `airflow_gang.model.gang_state.gang_status` on every
change, and yields exactly one event:

``{status: admitted|succeeded|failed|admission_timeout|queue_mismatch|disrupted|lost|
api_unavailable|error, reason, name, namespace, uid, phase, message, timeline, disruptions...}``
(``api_unavailable`` also carries ``unavailable_seconds`` and ``last_error``; ``queue_mismatch``
``asked_queue``). A running gang's disruptions are followed by `disruption_steps`.

While the watches work, the objects are read again only on a change (and every
`RESYNC_SECONDS` as a safety net); while one fails, every ``poll_interval``. An API that cannot be
reached is ridden out (`airflow_gang.model.outage`): one WARNING per episode, and after
``api_unavailable_timeout`` an ``api_unavailable`` event, with nothing deleted. Deadlines travel
as absolute UTC times, so a triggerer restart does not reset the clock; after an outage the
decision comes from what the objects say (a gang admitted meanwhile counts as admitted, at its
PodGroup's condition time). On an admission timeout the trigger deletes the job and its PodGroup
and confirms by a watch that they are gone before it reports, so a retry starts clean; so does it
when the PodGroup first appears in another queue than ``expected_queue``. ``on_kill``
(Airflow 3.3: the user marked the task failed or success, or cleared it) deletes them too.

The trigger's kwargs (stored in Airflow's trigger table) carry the connection id, never the
credentials: the triggerer looks the connection up itself, once for the triggers starting
together (`connection_lookup`). Only ``[gang] kubeconfig_to_triggerer = True`` ships a
kubeconfig's content, for deployments whose kubeconfig file exists on workers alone.

One deferral covers the whole wait of a try: phase changes go to the task log from here
(`status_lines`), never back to a worker. The event is held until ``not_before``
(the deferral moment plus ``[gang] resume_hold_seconds``): Airflow 3.3.2 fails a task whose
resumed try is already queued or running when the scheduler reads the executor's "success" of
the deferring try (apache/airflow#72716, #71580), and a trigger that fires seconds after the
deferral hits that window. The event's timeline comes from the cluster's own objects (bind
times, conditions, ``completionTime``), not from when this trigger happened to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_gang.exceptions import GangApiError
from airflow_gang.jobs.disruption import DisruptionTracker
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.wait_plan import WaitFor
from airflow_gang.kinds import DEFAULT_JOB_KIND, job_kind_named
from airflow_gang.model.gang_state import GangPhase, GangSnapshot
from airflow_gang.model.outage import DEFAULT_API_UNAVAILABLE_TIMEOUT, Outage, is_outage
from airflow_gang.triggers import connection_lookup, disruption_steps, looks, status_lines, watch_cache
from airflow_gang.triggers.change_feed import ChangeFeed
from airflow_gang.triggers.deletion import delete_for_kill, delete_gang
from airflow_gang.triggers.events import (
    api_unavailable_event,
    execution_timeout_event,
    gang_event,
    hold_until,
    parse_moment,
    past,
    utc_now,
)
from airflow_gang.triggers.feeds import Feed, PollingFeed, SharedFeed
from airflow_gang.triggers.queue_check import wrong_queue_event
from airflow_gang.triggers.status_lines import StatusLines

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

JsonDict = dict[str, Any]
WatchMode = Literal["shared", "per_trigger", "poll"]
WATCH_MODES: tuple[WatchMode, ...] = ("shared", "per_trigger", "poll")
# How long a trigger waits for a new shared cache's lists and watches before it looks with GETs.
CACHE_SYNC_SECONDS = 10.0
# How long the deletion after an admission timeout may take to be confirmed.
_DELETE_CONFIRM_SECONDS = 60.0
# While every watch works, the objects are read again this often anyway (an informer's resync):
# a safety net, not the way changes arrive.
RESYNC_SECONDS = 300.0


class GangJobTrigger(BaseTrigger):
    """Wait for a gang-scheduled job of any kind without holding a worker slot.

    :param name: the job's name.
    :param namespace: the job's namespace (its PodGroup's too).
    :param uid: the job's uid; a job of the same name with another uid counts as lost.
    :param wait_for: ``admission``, ``completion``, or ``both`` (admission then completion).
    :param gang_scheduling: ``provider``, ``training-operator``, ``trainer``, ``volcano`` or
        ``disabled``.
    :param admission_deadline: ISO UTC time after which a job still queued is deleted and
        ``admission_timeout`` is reported; None waits forever.
    :param execution_deadline: ISO UTC time after which ``error`` is reported (the task's
        ``execution_timeout``); the job is left to the operator's cleanup.
    :param submitted_at: ISO UTC submission time (for the timeline).
    :param admitted_at: ISO UTC admission time if already known (``completion`` waits).
    :param poll_interval: seconds between re-checks when no watch event arrives.
    :param kubernetes_conn_id: Airflow connection (cncf ``kubernetes`` type).
    :param hook_kwargs: `AsyncGangJobHook` keyword arguments from the worker
        (``GangJobHook.async_hook_kwargs()``): the connection id and non-secret overrides. The
        connection itself is looked up here, in the triggerer. Deployments with
        ``[gang] kubeconfig_to_triggerer`` carry extras and content instead.
    :param api_unavailable_timeout: seconds one API outage may last before ``api_unavailable``
        is reported (nothing is deleted); None rides out any outage.
    :param delete_on_kill: delete job and PodGroup when the user kills the deferred task.
    :param not_before: ISO UTC time before which no event is fired (the deferral moment plus
        ``[gang] resume_hold_seconds``; see the module docstring for the Airflow race it avoids).
    :param watch: how the trigger learns of changes: ``shared`` (default: the triggerer's
        `watch_cache.WatchCache`, one list + watch per kind and namespace for all triggers, no
        request of this trigger's own while it works), ``per_trigger`` (this trigger's own three
        watches, re-reading its objects on each event) or ``poll`` (GETs every
        ``poll_interval``, no watch).
    :param reattached: the task's try took over a job of an earlier try; carried back in the
        event, so the task knows a "lost" job means "the earlier try's job was deleted" (train
        anew) even when resumed without its defer kwargs, as ``dag.test()`` does.
    :param job_kind: the job's ``kind``: ``PyTorchJob`` (default), ``TrainJob`` or ``VolcanoJob``.
    :param expected_queue: the queue the task asked for; a PodGroup that first appears in
        another one is deleted with its job and ``queue_mismatch`` reported. None checks nothing.
    :param on_disruption: ``wait``, ``retry`` or None (report only), with ``max_disruptions``
        and ``readmission_timeout`` (seconds): `airflow_gang.jobs.disruption`.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        uid: str,
        *,
        wait_for: WaitFor = "both",
        gang_scheduling: str = "provider",
        admission_deadline: str | None = None,
        execution_deadline: str | None = None,
        submitted_at: str | None = None,
        admitted_at: str | None = None,
        poll_interval: float = 10.0,
        kubernetes_conn_id: str | None = "kubernetes_default",
        hook_kwargs: dict[str, Any] | None = None,
        delete_on_kill: bool = True,
        not_before: str | None = None,
        api_unavailable_timeout: float | None = DEFAULT_API_UNAVAILABLE_TIMEOUT,
        watch: WatchMode = "shared",
        reattached: bool = False,
        job_kind: str = DEFAULT_JOB_KIND.kind,
        expected_queue: str | None = None,
        on_disruption: str | None = None,
        max_disruptions: int | None = None,
        readmission_timeout: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.wait_for = wait_for
        self.gang_scheduling = gang_scheduling
        self.admission_deadline = admission_deadline
        self.execution_deadline = execution_deadline
        self.submitted_at = submitted_at
        self.admitted_at = admitted_at
        self.poll_interval = poll_interval
        self.kubernetes_conn_id = kubernetes_conn_id
        self.hook_kwargs = hook_kwargs
        self.delete_on_kill = delete_on_kill
        self.not_before = not_before
        self.api_unavailable_timeout = api_unavailable_timeout
        if watch not in WATCH_MODES:
            raise ValueError(f"watch={watch!r}: use one of {', '.join(WATCH_MODES)}")
        self.watch = watch
        self.reattached = reattached
        self.job_kind, self.kind, self.expected_queue = job_kind, job_kind_named(job_kind), expected_queue
        self.on_disruption, self.max_disruptions = on_disruption, max_disruptions
        self.readmission_timeout = readmission_timeout
        self._disruptions = DisruptionTracker(on_disruption, max_disruptions, readmission_timeout)
        self._event_sent = False
        self._connection_extras: dict[str, Any] | None = None
        self._deletion_requested_at: str | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        # Each argument is kept as the attribute of its name: the kwargs are those attributes.
        names = inspect.signature(GangJobTrigger.__init__).parameters
        kwargs = {name: getattr(self, name) for name in names if name != "self"}
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    def _hook_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self.hook_kwargs or {})
        kwargs.setdefault("conn_id", self.kubernetes_conn_id)
        return kwargs

    async def hook(self) -> AsyncGangJobHook:
        """The async hook, its module imported in a thread.

        The triggerer imports this trigger's module inside its event loop; kubernetes_asyncio and
        the cncf hooks take most of a second to import, which would stall every other trigger
        (the "async thread was blocked" warning). So this module imports no client at its top.
        """
        module = await asyncio.to_thread(importlib.import_module, "airflow_gang.hooks.gang_async")
        retrying = await asyncio.to_thread(importlib.import_module, "airflow_gang.hooks.retrying")
        kwargs = self._hook_kwargs()
        hook: AsyncGangJobHook = module.AsyncGangJobHook(**kwargs)
        if self._connection_extras is not None and "connection_extras" not in kwargs:
            # Looked up once per trigger: on_kill must not wait on the supervisor a second time.
            hook.reuse_lookup(self._connection_extras)
        # The connection is looked up here, on the triggerer's loop (its supervisor serves it),
        # so its extras are cached before the client is built in a worker thread.
        self._connection_extras = await hook.get_conn_extras()
        # Each look retries briefly and quietly; outages are reported once per episode (_wait).
        hook.retry_policy = retrying.WAIT_RETRY_POLICY
        return hook

    # --- the wait ----------------------------------------------------------------------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if self.watch == "shared":
            event = await self._wait_shared()
        else:
            hook = await self.hook()
            try:
                feed: Feed = PollingFeed() if self.watch == "poll" else self._own_feed(hook)
                try:
                    event = await self._wait(hook, feed)
                finally:
                    await feed.stop()
            finally:
                await hook.close()
        if self._disruptions.episodes:
            event["disruptions"] = self._disruptions.to_json()
        if self._deletion_requested_at is not None:  # the record's end: when we asked for the deletion
            event.setdefault("timeline", {})["deleted_at"] = self._deletion_requested_at
        await status_lines.written()  # the trigger's lines go into its task log before its event
        await hold_until(self.not_before, self.log)  # apache/airflow#72716: see the module docstring
        self._event_sent = True
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    def _own_feed(self, hook: AsyncGangJobHook) -> ChangeFeed:
        with_podgroup = self.gang_scheduling != "disabled"
        return ChangeFeed(
            hook,
            self.name,
            self.namespace,
            with_podgroup=with_podgroup,
            log=self.log,
            uid=self.uid,
            job_kind=self.kind,
        ).start()

    async def _wait_shared(self) -> dict[str, Any]:
        """Wait through the triggerer's shared cache (or this trigger's own watches for a job the
        cache does not follow: one without the provider's labels, e.g. a sensor's)."""
        # Keyed by what the connection is now (its extras, the kubeconfig's bytes), not by its id:
        # a connection edited while other triggers wait gets a cache of its own. Triggers starting
        # together share one look-up (and the first one's hook starts the cache).
        resolved = await connection_lookup.resolve(self._hook_kwargs(), self.hook)
        self._connection_extras = resolved.extras
        cache = await watch_cache.acquire(resolved.definition, self.namespace, resolved.hook, self.kind)
        try:
            await cache.ready(CACHE_SYNC_SECONDS)
            if cache.snapshot_job(self.name) is None:  # not there (yet), or not followed at all
                job = await self._get_or_none(cache.hook)
                if job is not None and not watch_cache.followed(job):
                    where = f"{self.job_kind} {self.namespace}/{self.name}"
                    self.log.info("%s is not the provider's: watching it alone", where)
                    feed: Feed = self._own_feed(cache.hook)
                    try:
                        return await self._wait(cache.hook, feed)
                    finally:
                        await feed.stop()
            shared = SharedFeed(cache, self.name, self.uid, self.gang_scheduling, self.kind)
            try:
                return await self._wait(cache.hook, shared)
            finally:
                await shared.stop()
        finally:
            watch_cache.release(cache)

    async def _get_or_none(self, hook: AsyncGangJobHook) -> JsonDict | None:
        with contextlib.suppress(GangApiError):  # the wait's own looks report what is wrong
            return await hook.get_job(self.kind, self.name, self.namespace)
        return None

    async def _wait(self, hook: AsyncGangJobHook, feed: Feed) -> dict[str, Any]:
        waiting_for_admission = self.wait_for in ("admission", "both") and self.admitted_at is None
        outage = Outage(f"{self.job_kind} {self.namespace}/{self.name}", timeout=self.api_unavailable_timeout)
        lines = StatusLines(self.log, self.namespace, self.name)
        memory = FailureMemory(self.kind)
        podgroup_seen = False
        while True:
            feed.changed.clear()
            try:
                seen = feed.look() or await self._observe(hook)
            except GangApiError as error:
                if not is_outage(error):  # refused (403...): fail the try, delete nothing
                    return gang_event(self, "error", None, f"{error}", reason="api_error")
                step = outage.failed(error)
                if step.warning:
                    self.log.warning(step.warning)
                if step.exceeded:
                    unavailable = outage.unavailable(name=self.name, namespace=self.namespace)
                    return api_unavailable_event(self, unavailable)
                if past(self.execution_deadline):
                    return execution_timeout_event(self, None)
                await asyncio.sleep(step.delay)
                continue
            if (message := outage.recovered()) is not None:
                self.log.info(message)
            status = seen.status
            if not podgroup_seen and seen.podgroup is not None:
                podgroup_seen = True  # its queue is settled at creation: one check suffices
                wrong = await wrong_queue_event(
                    self, seen, self.expected_queue, lambda: self._delete(hook), self.log
                )
                if wrong is not None:
                    return wrong
            await looks.note_failure(hook, memory, seen.pods, self.namespace)
            if status.admitted and self.admitted_at is None and seen.job is not None:
                self.admitted_at = seen.admitted_at()
                lines.admitted(status, self.admitted_at)
            else:
                lines.saw(status)
            if status.phase is GangPhase.LOST:
                if waiting_for_admission and past(self.admission_deadline):
                    # Gone after its admission deadline: this trigger (or its predecessor in a
                    # triggerer that died before reporting) deleted it for that deadline.
                    return gang_event(
                        self, "admission_timeout", seen, f"gang not admitted by {self.admission_deadline}"
                    )
                return gang_event(
                    self,
                    "lost",
                    seen,
                    f"{self.job_kind} {self.namespace}/{self.name} was deleted while waiting",
                )
            if waiting_for_admission and status.admitted:
                waiting_for_admission = False
                if self.wait_for == "admission":
                    return gang_event(self, "admitted", seen, "")
            if ended := await disruption_steps.follow(
                self, self._disruptions, seen, lambda: self._delete(hook)
            ):
                return ended
            if status.finished:
                return {
                    **gang_event(self, status.phase.value, seen, status.message),
                    "failure": memory.to_json(),
                }
            if waiting_for_admission and past(self.admission_deadline):
                gone = await self._delete(hook)
                return {
                    **gang_event(
                        self,
                        "admission_timeout",
                        seen,
                        f"gang not admitted by {self.admission_deadline}: {status.describe()}",
                    ),
                    "deleted": gone,
                }
            if past(self.execution_deadline):
                return execution_timeout_event(self, seen)
            deadlines = [
                moment
                for moment in (
                    parse_moment(self.admission_deadline) if waiting_for_admission else None,
                    parse_moment(self.execution_deadline),
                    self._disruptions.deadline,
                )
                if moment
            ]
            recheck = self.poll_interval if not feed.healthy else max(self.poll_interval, RESYNC_SECONDS)
            timeout = min([recheck, *((moment - utc_now()).total_seconds() for moment in deadlines)])
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
            # lands as the event fires, and the cancelled trigger would then wait on for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, timeout)):
                    await feed.changed.wait()

    async def _observe(self, hook: AsyncGangJobHook) -> GangSnapshot:
        return await looks.observe(
            hook, self.kind, self.name, self.namespace, uid=self.uid, gang_scheduling=self.gang_scheduling
        )

    async def _delete(self, hook: AsyncGangJobHook, timeout: float = _DELETE_CONFIRM_SECONDS) -> bool:
        self._deletion_requested_at = self._deletion_requested_at or utc_now().isoformat()
        return await delete_gang(
            hook,
            self.name,
            self.namespace,
            self.uid,
            gang_scheduling=self.gang_scheduling,
            timeout=timeout,
            log=self.log,
            job_kind=self.kind,
        )

    async def on_kill(self) -> None:
        """The user marked the deferred task failed/success or cleared it: delete what we submitted.

        Bounded by `on_kill_budget_seconds` (Airflow's ``[triggerer] on_kill_timeout`` less a
        margin), the connection lookup included.
        """
        if self._event_sent or not self.delete_on_kill:
            return
        where = f"{self.job_kind} {self.namespace}/{self.name}"
        await delete_for_kill(
            self.hook, lambda hook, seconds: self._delete(hook, timeout=seconds), where, self.log
        )
