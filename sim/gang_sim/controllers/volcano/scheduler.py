"""The simulated Volcano scheduler: default queues, then one scheduling session per period.

Each session reads the informer cache by gang (`gang_cache`), asks `session.run_session`
(pure) what to do, and applies it over the API like vc-scheduler does: ``pods/binding`` for
placements, a whole PodGroup ``PUT`` for its status (PodGroups have no status subresource), the
queue's ``/status``, ``PodScheduled=False`` on pods left pending (those statuses:
`status_updater`), and events on PodGroups and pods.

With ``preempt`` or ``reclaim`` in its configuration (`conf`, ``scheduler_conf=``), a
session may also evict pods: `evictor.Evictor` does what vc-scheduler's evictor does.

Like vc-scheduler, whose binder and status updater run in goroutines, a session does not write
one object at a time: its bindings go out together (`concurrency.in_parallel`) and the session
waits for them; then the statuses it changed (PodGroups, pod conditions, queues) go out in the
background (`concurrency.BackgroundWrites`, one in flight per object) and so do events (an
`EventRecorder`), so a long queue's status writes never stretch the session period.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import utc_now
from gang_sim.controllers.concurrency import BackgroundWrites, in_parallel
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import (
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    Kind,
    object_key,
)
from gang_sim.controllers.runner import Controller
from gang_sim.controllers.volcano.conf import SchedulerConf, load_scheduler_conf
from gang_sim.controllers.volcano.evictor import Evictor
from gang_sim.controllers.volcano.gang_cache import (
    HOLDING,
    HOLDING_INDEX,
    UNFINISHED_INDEX,
    ChangedGangs,
    GroupTasks,
    group_of,
    index_pods,
)
from gang_sim.controllers.volcano.session import (
    GroupEvent,
    PodEvent,
    SessionConfig,
    SessionMemo,
    Snapshot,
    run_session,
)
from gang_sim.controllers.volcano.status_updater import StatusUpdater, not_yet_unschedulable

log = logging.getLogger(__name__)

COMPONENT = "volcano"
DEFAULT_QUEUES: dict[str, JsonDict] = {
    "root": {"reclaimable": False, "weight": 1},
    "default": {"reclaimable": True, "weight": 1, "parent": "root"},
}


@dataclass(frozen=True)
class SessionTiming:
    """One session's cost, kept for benchmarks (`Volcano.timings`); times are `time.monotonic`."""

    started: float
    seconds: float
    """The whole session: snapshot, decisions, its bindings, and handing out its writes."""
    binding: float
    """Of it, waiting for its bindings (the rest is this process's own work)."""
    podgroups: int
    """The live PodGroups it looked at."""
    bindings: int


class Volcano(Controller):
    """vc-scheduler's sessions every ``schedule_period`` seconds (Volcano's default 1 s): enqueue
    and allocate, then preempt and reclaim when ``scheduler_conf`` lists them."""

    name: ClassVar[str] = "volcano"
    kinds: ClassVar[tuple[Kind, ...]] = (NODES, PODS, PODGROUPS, QUEUES, PRIORITY_CLASSES)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        schedule_period: float = 1.0,
        overcommit_factor: float = 1.2,
        queues: dict[str, dict[str, Any] | None] | None = None,
        clock: Callable[[], dt.datetime] = utc_now,
        scheduler_conf: SchedulerConf | Mapping[str, Any] | str | None = None,
    ) -> None:
        super().__init__(client, cache, period=schedule_period)
        self.config = SessionConfig(
            overcommit_factor=Decimal(str(overcommit_factor)),
            scheduler=load_scheduler_conf(scheduler_conf),
        )
        self.schedule_period = schedule_period
        self.extra_queues = queues or {}
        self.clock = clock
        self.sessions = 0
        self.events = EventRecorder(client, COMPONENT, clock)
        # Two lanes, so that thousands of queued pods' conditions never hold up a PodGroup phase.
        self.status_writes = BackgroundWrites()
        self.pod_writes = BackgroundWrites(limit=4)
        self.evictor = Evictor(client, cache, self.events, self.config.scheduler_name, self._decide_again)
        self.memo = SessionMemo()
        self.status_updater = StatusUpdater(client, cache, self.memo, self._decide_again)
        index_pods(cache, self.config.scheduler_name)
        # The gangs the cache changed since the last session: the others are the memo's as they are.
        self._changed = ChangedGangs(cache, self.config.scheduler_name)
        self._queues_ready = False
        self.timings: deque[SessionTiming] = deque(maxlen=10_000)

    async def run(self) -> None:
        try:
            await self._run_sessions()
        finally:
            # Events first: they are best-effort, and their writers must be cancelled even when a
            # write below outlasts the manager's stop timeout under load (then the loop closes
            # under whatever is still pending: "Task was destroyed but it is pending!").
            await self.events.close()
            await self.status_writes.close()
            await self.pod_writes.close()
            await self.evictor.close()

    async def _run_sessions(self) -> None:
        await self.cache.wait_synced()
        await self._ensure_queues()
        # Sessions run on a fixed period like vc-scheduler's; cache changes do not start extra
        # sessions, which is what makes "bound one period before Running" observable.
        while True:
            started = asyncio.get_running_loop().time()
            try:
                await self.reconcile()
            except (ApiError, aiohttp.ClientError, OSError) as error:
                log.debug("volcano session failed: %s", error)
            self.reconciles += 1
            elapsed = asyncio.get_running_loop().time() - started
            await asyncio.sleep(max(0.0, self.schedule_period - elapsed))

    async def _ensure_queues(self) -> None:
        wanted: dict[str, JsonDict] = {name: dict(spec) for name, spec in DEFAULT_QUEUES.items()}
        for name, capability in self.extra_queues.items():
            spec: JsonDict = {"reclaimable": True, "weight": 1, "parent": "root"}
            if capability:
                spec["capability"] = {key: str(value) for key, value in capability.items()}
            wanted[name] = spec
        for name, spec in wanted.items():
            if self.cache.get(QUEUES, "", name) is not None:
                continue
            body = {
                "apiVersion": QUEUES.api_version,
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": spec,
            }
            try:
                self.cache[QUEUES].observe(await self.client.create(QUEUES, body))
            except ApiError as error:
                if error.status != 409:
                    raise

    def _settled(self) -> tuple[list[JsonDict], Counter[str]]:
        """The PodGroups a session must look at, and the settled groups per queue.

        A Completed group whose pods have all finished can change no more (its pods hold
        nothing, its status stays): leaving it out keeps a session's cost proportional to the
        live work, not to every job the cluster ever ran.
        """
        pods = self.cache[PODS]
        live_groups: list[JsonDict] = []
        settled_per_queue: Counter[str] = Counter()
        for podgroup in self.cache[PODGROUPS].objects.values():
            if (podgroup.get("status") or {}).get("phase") == "Completed":
                namespace, name = object_key(podgroup)
                if not pods.indexed(UNFINISHED_INDEX, f"{namespace}/{name}"):
                    settled_per_queue[deep_get(podgroup, "spec", "queue") or "default"] += 1
                    continue
            live_groups.append(podgroup)
        return live_groups, settled_per_queue

    async def reconcile(self) -> None:
        self.sessions += 1
        started = time.monotonic()
        now = self.clock()
        podgroups, settled = self._settled()
        index = self.cache[PODS]
        changed = self._changed.take()
        snapshot = Snapshot(
            nodes=self.cache.items(NODES),
            pods=index.indexed(HOLDING_INDEX, HOLDING),
            podgroups=podgroups,
            queues=self.cache.items(QUEUES),
            priority_classes=self.cache.items(PRIORITY_CLASSES),
            tasks_by_group=GroupTasks(index),
            changed=changed,
        )
        try:
            result = run_session(snapshot, self.config, self.memo)
        except BaseException:
            self._changed.all_changed()  # the memo may be half updated: look at every gang next time
            raise
        for queue, count in settled.items():
            if queue in result.queue_status:
                result.queue_status[queue]["completed"] += count
        decided = time.monotonic()
        await in_parallel(self._bind(namespace, pod, node) for namespace, pod, node in result.bindings)
        bound = time.monotonic()
        for eviction in result.evictions:
            self.evictor.evict(eviction, now)
        transition = str(uuid.uuid4())
        # Statuses go out in the background (`BackgroundWrites`): the next session does not wait
        # for them. A session restates every waiting gang; only what changed is written, checked
        # here before any coroutine exists (thousands of queued pods would cost a task each).
        for key, status in result.podgroup_status.items():
            if key in result.unchanged:
                continue  # its status was written (or is being written) after an earlier session
            if self.status_updater.podgroup_update(key, status, transition, now)[0] is not None:
                write = functools.partial(self.status_updater.write_podgroup, key, status, transition, now)
                self.status_writes.submit((PODGROUPS, key), write)
        for name, status in result.queue_status.items():
            self.status_writes.submit(
                (QUEUES, name), functools.partial(self.status_updater.write_queue_status, name, status)
            )
        for (namespace, name), message in result.pod_unschedulable.items():
            pod = self.cache.get(PODS, namespace, name)
            nominated = result.nominated.get((namespace, name), "")
            if pod is not None and not_yet_unschedulable(pod, message, nominated):
                write = functools.partial(
                    self.status_updater.mark_unschedulable, namespace, name, message, nominated, now
                )
                self.pod_writes.submit((namespace, name), write)
        for event in result.events:
            self._emit(event)
        for pod_event in result.pod_events:
            self._emit_on_pod(pod_event)
        seconds = time.monotonic() - started
        timing = SessionTiming(started, seconds, bound - decided, len(podgroups), len(result.bindings))
        self.timings.append(timing)
        log.debug("volcano session %d: %s", self.sessions, timing)

    async def _bind(self, namespace: str, pod: str, node: str) -> None:
        try:
            await self.client.bind(namespace, pod, node)
        except ApiError as error:  # deleted or bound meanwhile: the next session sees it
            log.debug("volcano: bind %s/%s -> %s failed: %s", namespace, pod, node, error)
            return
        cached = self.cache.get(PODS, namespace, pod)
        if cached is not None:
            message = f"Successfully assigned {namespace}/{pod} to {node}"
            self.events.record(cached, "Normal", "Scheduled", message)

    def _decide_again(self, pod: JsonDict) -> None:
        """A pod's condition did not get written: its gang must not count as settled next session."""
        for group in group_of(self.config.scheduler_name, pod):
            namespace, _, name = group.partition("/")
            self.memo.forget((namespace, name))

    def _emit(self, event: GroupEvent) -> None:
        podgroup = self.cache.get(PODGROUPS, *event.podgroup)
        if podgroup is not None:
            self.events.record(podgroup, event.type, event.reason, event.message)

    def _emit_on_pod(self, event: PodEvent) -> None:
        pod = self.cache.get(PODS, *event.pod)
        if pod is not None:
            self.events.record(pod, event.type, event.reason, event.message)
