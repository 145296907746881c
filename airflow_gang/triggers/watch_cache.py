"""`WatchCache`: one list + watch per kind and namespace, shared by every trigger of a triggerer.

A sweep of a thousand mapped tasks defers a thousand `GangJobTrigger` instances into one
triggerer process. Following each job with its own three watches would mean thousands of open
watches and hundreds of requests per second; instead the triggers of one event loop share, per
cluster and namespace, the informer pattern Kubernetes controllers use:

- three followers, each a list then a watch from its resourceVersion (bookmarks on, resumed from
  the last version seen, listed again after ``410 Gone``, reconnected with capped backoff):
  the provider's jobs of one kind (PyTorchJobs or TrainJobs) and their pods (label-selected by
  the managed-by label) and the namespace's PodGroups (the training-operator and Trainer's
  Volcano plugin create PodGroups without our labels). A namespace with both kinds of job has a
  cache per kind: a cluster without Kubeflow Trainer never gets a TrainJob watch;
- an in-memory store per kind, indexed by job name (pods by the kind's job label,
  ``training.kubeflow.org/job-name`` or ``jobset.sigs.k8s.io/jobset-name``), holding of each
  object only what a trigger's look reads (`cache_projection`);
- subscribers per job name: an event wakes only the triggers whose job it concerns (a re-list
  wakes those whose objects changed); a follower failing or coming back wakes every trigger,
  since their way of looking changes (`healthy`: cache or polling);
- one API client for all of it (the first trigger's hook); "cluster" is what the connection
  resolves to when a trigger starts (`AsyncGangJobHook.definition`: its extras and kubeconfig),
  so triggers started after the connection was edited never join the old settings' cache, and
  a cache whose server stops answering looks at its connection again before it reports trouble
  (`AsyncGangJobHook.refresh_connection`);
- its own log lines (a watch failing, once per episode with a reminder every few minutes, or
  back) in the triggerer's log: it outlives the trigger that started it, not that task's log;
- reference counting: the first trigger starts the cache, the last one leaving stops it after
  `LINGER_SECONDS`, so a task that re-defers does not restart the watches.

Triggers evaluate `gang_status` from `snapshot` while the cache is `healthy`, with no request of
their own; they poll with GETs only while a follower is down (not while its first list is slow).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JOB_KINDS, JobKind
from airflow_gang.model.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_gang.model.outage import OutageLog
from airflow_gang.triggers import heap
from airflow_gang.triggers.cache_projection import projected
from airflow_gang.triggers.list_watch import ListWatch, WatchTrouble

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook
    from airflow_gang.hooks.kinds import WatchKind

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)
JOB_NAME_LABEL = DEFAULT_JOB_KIND.pod_job_label
WATCH_SECONDS = 300
# How long a cache outlives its last trigger: a task resumed for a phase and deferred again, or
# the next wave of a sweep, finds the watches open.
LINGER_SECONDS = 30.0
OURS = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
# Jobs and pods of the provider's own; every PodGroup (a controller's carry no label of ours).
SELECTORS: dict[WatchKind, str | None] = {
    **{job_kind.watch_name: OURS for job_kind in JOB_KINDS.values()},
    "podgroup": None,
    "pod": OURS,
}


def followed(job: JsonDict) -> bool:
    """Whether the cache follows this job: the provider's jobs carry the managed-by label."""
    return ((job.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def job_of(kind: WatchKind, obj: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> str | None:
    """The job name an object belongs to (a PodGroup's: `JobKind.job_of_podgroup`)."""
    metadata = obj.get("metadata") or {}
    if kind == "pod":
        return (metadata.get("labels") or {}).get(job_kind.pod_job_label)
    if kind == "podgroup":
        return job_kind.job_of_podgroup(obj)
    name = metadata.get("name")
    return str(name) if name else None


@dataclass(eq=False)  # each subscription is its own (hashable by identity)
class Subscription:
    """One trigger's interest in one job: ``changed`` is set whenever something about it may have."""

    name: str
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class _Follower:
    """List + watch of one kind in one namespace into a store, informing the cache of changes."""

    def __init__(self, cache: WatchCache, kind: WatchKind) -> None:
        self.cache = cache
        self.kind = kind
        self.selector = SELECTORS[kind]
        self.objects: dict[str, JsonDict] = {}  # name -> object
        self.by_job: dict[str, dict[str, JsonDict]] = {}  # job name -> name -> object
        # Only ever True after a list: a watch starts from a listed resourceVersion.
        self.watching = False
        self.loop: ListWatch | None = None
        self.trouble = WatchTrouble(
            cache.log,
            f"shared watch of {kind} in {cache.namespace}",
            "its triggers poll until it is back",
            clock=cache.clock,
        )

    @property
    def lists(self) -> int:
        return self.loop.lists if self.loop is not None else 0

    @property
    def watches(self) -> int:
        return self.loop.watches if self.loop is not None else 0

    async def run(self) -> None:
        cache = self.cache
        self.loop = ListWatch(
            cache.hook,
            self.kind,
            cache.namespace,
            label_selector=self.selector,
            watch_seconds=WATCH_SECONDS,
            on_list=self._replace,
            on_event=self._apply,
            on_watching=self._set_watching,
            on_failure=self._failed,
            on_back=self.trouble.back,
            on_page=cache.progressed,
        )
        await self.loop.run()

    def _failed(self, failures: int, error: Exception) -> None:
        """Wake the triggers to poll; say so once per episode, with reminders (`WatchTrouble`)."""
        self.cache.follower_failed()
        self.trouble.failed(error)

    def _set_watching(self, watching: bool) -> None:
        if watching != self.watching:
            self.watching = watching
            self.cache.followers_changed()

    def _replace(self, items: list[JsonDict]) -> None:
        """A fresh list: wake the jobs whose objects appeared, changed or vanished meanwhile."""
        fresh = {str(item["metadata"]["name"]): self._projected(item) for item in items}
        touched: set[str] = set()
        for name in self.objects.keys() | fresh.keys():
            before, after = self.objects.get(name), fresh.get(name)
            if _version(before) != _version(after):
                touched.update(job for job in (self._job(before), self._job(after)) if job)
        self.objects = fresh
        self.by_job = {}
        for name, obj in fresh.items():
            self._index(name, obj)
        self.cache.wake(touched)

    def _index(self, name: str, obj: JsonDict) -> None:
        job = job_of(self.kind, obj, self.cache.job_kind)
        if job:
            self.by_job.setdefault(job, {})[name] = obj

    def _unindex(self, name: str, obj: JsonDict | None) -> None:
        job = self._job(obj)
        if job and job in self.by_job:
            self.by_job[job].pop(name, None)
            if not self.by_job[job]:
                del self.by_job[job]

    def _apply(self, kind_of_event: str, obj: JsonDict) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        before = self.objects.get(name)
        self._unindex(name, before)
        if kind_of_event == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = self._projected(obj)
            self._index(name, obj)
        self.cache.wake({job for job in (self._job(before), self._job(obj)) if job})

    def _job(self, obj: JsonDict | None) -> str | None:
        return None if obj is None else job_of(self.kind, obj, self.cache.job_kind)

    def _projected(self, obj: JsonDict) -> JsonDict:
        return projected(self.kind, obj, self.cache.job_kind)


def _version(obj: JsonDict | None) -> str | None:
    return None if obj is None else str((obj.get("metadata") or {}).get("resourceVersion"))


class WatchCache:
    """The shared followers of one cluster and namespace, in one event loop (see the module docstring).

    Get one with `acquire`, give it back with `release`; `subscribe` to a job for wake-ups and
    read its objects with `snapshot` while `healthy`.
    """

    def __init__(
        self,
        key: tuple[str, ...],
        hook: AsyncGangJobHook,
        namespace: str,
        logger: OutageLog = log,
        clock: Callable[[], float] = time.monotonic,
        *,
        job_kind: JobKind = DEFAULT_JOB_KIND,
    ) -> None:
        self.key = key
        self.hook = hook
        self.namespace = namespace
        self.job_kind = job_kind
        self.log = logger
        self.clock = clock  # for the reminders while a follower fails (tests pass a fake)
        kinds: tuple[WatchKind, ...] = (job_kind.watch_name, "podgroup", "pod")
        self.followers = {kind: _Follower(self, kind) for kind in kinds}
        self.subscribers: dict[str, set[Subscription]] = {}
        self.users = 0
        self._main: asyncio.Task[None] | None = None
        self._healthy = asyncio.Event()
        # Set from a follower's failure until the cache is healthy again: waiting is moot then.
        self._failing = asyncio.Event()
        self._progress = asyncio.Event()  # a page listed: a slow first list is still getting on
        self._linger: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        # A fresh context: the task would otherwise inherit the starting trigger's (Airflow binds
        # a trigger's task instance to its log lines through context variables).
        self._main = asyncio.create_task(
            self._run(), name=f"airflow-gang watch cache {self.namespace}", context=contextvars.Context()
        )

    async def _run(self) -> None:
        try:
            await asyncio.gather(*(follower.run() for follower in self.followers.values()))
        finally:
            # Also when the loop shuts down under us (dag.test() ends its loop with the trigger).
            await self.hook.close()

    async def stop(self) -> None:
        if self._main is not None:
            self._main.cancel()
            await asyncio.gather(self._main, return_exceptions=True)
            self._main = None

    @property
    def running(self) -> bool:
        return self._main is not None and not self._main.done()

    async def ready(self, timeout: float, limit: float = 300.0) -> bool:
        """Until the cache is `healthy` (every follower listed and watching); False once ``timeout``
        seconds pass with no page listed (``limit`` in all), or as soon as a follower fails: the
        caller then polls, and so sees (and times) an outage itself. A slow first list that is
        getting on is waited for: 5,000 triggers polling meanwhile slowed it further (issue 33)."""
        end = (loop := asyncio.get_running_loop()).time() + limit
        while not self.healthy and not self._failing.is_set():
            self._progress.clear()
            waits = [asyncio.ensure_future(e.wait()) for e in (self._healthy, self._failing, self._progress)]
            try:
                done, _ = await asyncio.wait(
                    waits, timeout=max(0.0, min(timeout, end - loop.time())), return_when="FIRST_COMPLETED"
                )
            finally:
                for waiting in waits:
                    waiting.cancel()
            if not done:
                break
        return self.healthy

    def progressed(self) -> None:
        self._progress.set()

    def follower_failed(self) -> None:
        self._failing.set()

    def followers_changed(self) -> None:
        """A follower started or stopped watching: wake every trigger (their way of looking
        changes: cache or polling)."""
        if self.healthy:
            self._healthy.set()
            self._failing.clear()
        else:
            self._healthy.clear()
        self.wake_all()

    # --- reading -----------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """Every follower has listed and is watching: the store is current, triggers need not poll."""
        return all(follower.watching for follower in self.followers.values())

    def snapshot(self, name: str) -> tuple[JsonDict | None, JsonDict | None, list[JsonDict]]:
        """The job, its PodGroup and its pods as the cache holds them."""
        pods = list(self.followers["pod"].by_job.get(name, {}).values())
        return (
            self.followers[self.job_kind.watch_name].objects.get(name),
            self.followers["podgroup"].objects.get(name),
            pods,
        )

    def snapshot_job(self, name: str) -> JsonDict | None:
        return self.followers[self.job_kind.watch_name].objects.get(name)

    def counts(self) -> dict[str, int]:
        """Lists and accepted watches per kind so far (for tests and benchmarks)."""
        return {
            **{f"{kind}_lists": f.lists for kind, f in self.followers.items()},
            **{f"{kind}_watches": f.watches for kind, f in self.followers.items()},
        }

    # --- subscribers -------------------------------------------------------------------------

    def subscribe(self, name: str) -> Subscription:
        subscription = Subscription(name)
        self.subscribers.setdefault(name, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscribers = self.subscribers.get(subscription.name)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self.subscribers[subscription.name]

    def wake(self, names: set[str]) -> None:
        for name in names:
            for subscription in self.subscribers.get(name, ()):
                subscription.changed.set()

    def wake_all(self) -> None:
        self.wake(set(self.subscribers))


# One registry per event loop: the triggerer runs every trigger in one loop; dag.test() runs each
# in its own, and a cache must never outlive (or be shared across) loops.
_REGISTRIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], WatchCache]] = (
    weakref.WeakKeyDictionary()
)
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


async def acquire(
    cluster: str, namespace: str, hook: AsyncGangJobHook, job_kind: JobKind = DEFAULT_JOB_KIND
) -> WatchCache:
    """The loop's cache for ``cluster`` and ``namespace``, started by the first caller with its
    ``hook`` (whose client it then shares with every later caller; theirs stay unused).

    :param cluster: what the callers' connection resolves to
        (`AsyncGangJobHook.definition`): one cache per cluster and credentials, not per
        connection id, so an edited connection is never served by the old settings' cache.
    """
    loop = asyncio.get_running_loop()
    lock = _LOCKS.setdefault(loop, asyncio.Lock())
    async with lock:  # one hook and one set of followers, however many triggers start at once
        registry = _REGISTRIES.setdefault(loop, {})
        key: tuple[str, ...] = (cluster, namespace, job_kind.kind)
        cache = registry.get(key)
        if cache is None:
            heap.freeze_once()
            cache = WatchCache(key, hook, namespace, job_kind=job_kind)
            cache.start()
            registry[key] = cache
        cache.users += 1
        if cache._linger is not None:
            cache._linger.cancel()
            cache._linger = None
        return cache


def release(cache: WatchCache, linger: float | None = None) -> None:
    """A trigger is done with ``cache``; the last one leaving stops it after ``linger`` seconds
    (`LINGER_SECONDS` by default)."""
    linger = LINGER_SECONDS if linger is None else linger
    cache.users -= 1
    if cache.users > 0:
        return

    async def stop_later() -> None:
        await asyncio.sleep(linger)
        loop = asyncio.get_running_loop()
        registry = _REGISTRIES.get(loop, {})
        if cache.users == 0 and registry.get(cache.key) is cache:
            del registry[cache.key]
            cache._linger = None
            await cache.stop()

    cache._linger = asyncio.create_task(stop_later())


def caches() -> list[WatchCache]:
    """The running loop's caches (for tests and benchmarks)."""
    return list(_REGISTRIES.get(asyncio.get_running_loop(), {}).values())
