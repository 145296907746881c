"""The simulated Volcano scheduler: default queues, then one scheduling session per period.

Each session reads the informer cache, asks `session.run_session` (pure) what to do,
and applies it over the API like vc-scheduler does: ``pods/binding`` for placements, a whole
PodGroup ``PUT`` for its status (PodGroups have no status subresource), the queue's ``/status``,
``PodScheduled=False`` on pods left pending, and events on PodGroups and pods.

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

from gang_sim.controllers.capacity import TERMINAL_PHASES, holds_resources
from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.concurrency import BackgroundWrites, in_parallel
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, Informer, deep_get
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
from gang_sim.controllers.volcano.model import Key
from gang_sim.controllers.volcano.session import (
    GROUP_ANNOTATION,
    GroupEvent,
    PodEvent,
    SessionConfig,
    SessionMemo,
    Snapshot,
    run_session,
)

log = logging.getLogger(__name__)

COMPONENT = "volcano"
GROUP_INDEX = "volcano/group"
UNFINISHED_INDEX = "volcano/unfinished-group"
HOLDING_INDEX = "volcano/holding"
HOLDING = "holding"
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
        cache[PODS].add_index(GROUP_INDEX, functools.partial(_group_of, self.config.scheduler_name))
        cache[PODS].add_index(
            UNFINISHED_INDEX, functools.partial(_unfinished_group_of, self.config.scheduler_name)
        )
        cache[PODS].add_index(HOLDING_INDEX, _holding)
        # The gangs whose PodGroup or pods the cache changed since the last session (None: any,
        # as before the first session and after a re-list): the others are the memo's as they are.
        self._changed: set[Key] | None = None
        cache[PODGROUPS].subscribe_stores(self._podgroup_stored)
        cache[PODS].subscribe_stores(self._pod_stored)
        self._queues_ready = False
        self.timings: deque[SessionTiming] = deque(maxlen=10_000)

    async def run(self) -> None:
        try:
            await self._run_sessions()
        finally:
            await self.status_writes.close()
            await self.pod_writes.close()
            await self.evictor.close()
            await self.events.close()

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

    def _podgroup_stored(self, before: JsonDict | None, after: JsonDict | None) -> None:
        if self._changed is not None:
            obj = after if after is not None else before
            if obj is None:
                self._changed = None  # re-listed
            else:
                self._changed.add(object_key(obj))

    def _pod_stored(self, before: JsonDict | None, after: JsonDict | None) -> None:
        if self._changed is None:
            return
        if before is None and after is None:
            self._changed = None  # re-listed
            return
        for pod in (before, after):
            for group in _group_of(self.config.scheduler_name, pod) if pod is not None else ():
                namespace, _, name = group.partition("/")
                self._changed.add((namespace, name))

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
        changed, self._changed = self._changed, set()
        snapshot = Snapshot(
            nodes=self.cache.items(NODES),
            pods=index.indexed(HOLDING_INDEX, HOLDING),
            podgroups=podgroups,
            queues=self.cache.items(QUEUES),
            priority_classes=self.cache.items(PRIORITY_CLASSES),
            tasks_by_group=_GroupTasks(index),
            changed=changed,
        )
        try:
            result = run_session(snapshot, self.config, self.memo)
        except BaseException:
            self._changed = None  # the memo may be half updated: look at every gang next time
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
            if self._podgroup_update(key, status, transition, now)[0] is not None:
                write = functools.partial(self._write_podgroup, key, status, transition, now)
                self.status_writes.submit((PODGROUPS, key), write)
        for name, status in result.queue_status.items():
            self.status_writes.submit(
                (QUEUES, name), functools.partial(self._write_queue_status, name, status)
            )
        for (namespace, name), message in result.pod_unschedulable.items():
            pod = self.cache.get(PODS, namespace, name)
            nominated = result.nominated.get((namespace, name), "")
            if pod is not None and _not_yet_unschedulable(pod, message, nominated):
                write = functools.partial(self._mark_unschedulable, namespace, name, message, nominated, now)
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

    def _podgroup_update(
        self, key: tuple[str, str], status: JsonDict, transition: str, now: dt.datetime
    ) -> tuple[JsonDict | None, JsonDict]:
        """The PodGroup and its new status, or (None, {}) when the session changes nothing."""
        current = self.cache.get(PODGROUPS, *key)
        if current is None:
            return None, {}
        old = current.get("status") or {}
        conditions = []
        for condition in status["conditions"]:
            previous = next(
                (c for c in old.get("conditions") or [] if c.get("type") == condition["type"]), None
            )
            same = previous is not None and all(previous.get(k) == v for k, v in condition.items())
            conditions.append(
                previous
                if same
                else {**condition, "transitionID": transition, "lastTransitionTime": rfc3339(now)}
            )
        new_status = {**old, **status, "conditions": conditions}
        if not conditions:
            new_status.pop("conditions")
        if new_status == old:
            return None, {}  # vc-scheduler rewrites every session; writing only changes keeps watches quiet
        return current, new_status

    async def _write_podgroup(
        self, key: tuple[str, str], status: JsonDict, transition: str, now: dt.datetime
    ) -> None:
        current, new_status = self._podgroup_update(key, status, transition, now)  # as cached now
        if current is None:
            return
        old = current.get("status") or {}
        if old.get("phase") != new_status["phase"]:
            log.info(
                "podgroup %s/%s phase %s->%s",
                key[0],
                key[1],
                old.get("phase") or "(none)",
                new_status["phase"],
            )
        try:
            self.cache[PODGROUPS].observe(
                await self.client.replace(PODGROUPS, {**current, "status": new_status})
            )
        except ApiError as error:
            if error.status not in (404, 409):  # 409: it changed, so the next session decides anew
                self.memo.forget(key)
                raise
        except (aiohttp.ClientError, OSError):
            self.memo.forget(key)
            raise

    async def _mark_unschedulable(
        self, namespace: str, name: str, message: str, nominated: str, now: dt.datetime
    ) -> None:
        pod = self.cache.get(PODS, namespace, name)  # as cached now, not as the session saw it
        if (
            pod is None
            or deep_get(pod, "spec", "nodeName")
            or not _not_yet_unschedulable(pod, message, nominated)
        ):
            return  # gone, bound since the session decided, or already marked
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": rfc3339(now),
            "lastProbeTime": None,
        }
        current = deep_get(pod, "status", "conditions") or []
        conditions = [*(c for c in current if c.get("type") != "PodScheduled"), condition]
        # The resourceVersion makes it a compare-and-swap, as vc-scheduler's UpdateStatus is: a
        # pod the kubelet or a binding changed meanwhile is left for the next session to judge.
        status: JsonDict = {"conditions": conditions}
        if nominated:  # only ever set, never cleared (cache.go:1092-1097)
            status["nominatedNodeName"] = nominated
        body = {
            "metadata": {"resourceVersion": deep_get(pod, "metadata", "resourceVersion")},
            "status": status,
        }
        try:
            updated = await self.client.patch(PODS, name, body, namespace, subresource="status")
            self.cache[PODS].observe(updated)
        except ApiError as error:
            if error.status not in (404, 409):
                self._decide_again(pod)
                raise
        except (aiohttp.ClientError, OSError):
            self._decide_again(pod)
            raise

    def _decide_again(self, pod: JsonDict) -> None:
        """A pod's condition did not get written: its gang must not count as settled next session."""
        for group in _group_of(self.config.scheduler_name, pod):
            namespace, _, name = group.partition("/")
            self.memo.forget((namespace, name))

    async def _write_queue_status(self, name: str, status: JsonDict) -> None:
        queue = self.cache.get(QUEUES, "", name)
        if queue is None:
            return
        old = queue.get("status") or {}
        if {**old, **status} == old:
            return
        try:
            updated = await self.client.replace(
                QUEUES, {**queue, "status": {**old, **status}}, subresource="status"
            )
            self.cache[QUEUES].observe(updated)
        except ApiError as error:
            if error.status not in (404, 409):
                raise

    def _emit(self, event: GroupEvent) -> None:
        podgroup = self.cache.get(PODGROUPS, *event.podgroup)
        if podgroup is not None:
            self.events.record(podgroup, event.type, event.reason, event.message)

    def _emit_on_pod(self, event: PodEvent) -> None:
        pod = self.cache.get(PODS, *event.pod)
        if pod is not None:
            self.events.record(pod, event.type, event.reason, event.message)


class _GroupTasks:
    """`Snapshot.tasks_by_group` read from the pods' group index as the session asks."""

    def __init__(self, pods: Informer) -> None:
        self._pods = pods

    def get(self, key: Key, default: list[JsonDict], /) -> list[JsonDict]:
        return self._pods.indexed(GROUP_INDEX, f"{key[0]}/{key[1]}") or default


def _group_of(scheduler_name: str, pod: JsonDict) -> list[str]:
    """``namespace/group`` of a pod this scheduler places as part of a PodGroup."""
    group = deep_get(pod, "metadata", "annotations", GROUP_ANNOTATION)
    if not group or deep_get(pod, "spec", "schedulerName") != scheduler_name:
        return []
    return [f"{object_key(pod)[0]}/{group}"]


def _unfinished_group_of(scheduler_name: str, pod: JsonDict) -> list[str]:
    """Like `_group_of`, for pods that have not finished: a gang without any has settled."""
    if deep_get(pod, "status", "phase") in TERMINAL_PHASES:
        return []
    return _group_of(scheduler_name, pod)


def _holding(pod: JsonDict) -> list[str]:
    """Pods that hold node resources: all a session needs to know beyond the gangs' own pods."""
    return [HOLDING] if holds_resources(pod) else []


def _not_yet_unschedulable(pod: JsonDict, message: str, nominated: str = "") -> bool:
    """Whether the pod lacks ``PodScheduled=False`` with this message, or the node it is
    nominated to (a write is due)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if nominated and (pod.get("status") or {}).get("nominatedNodeName") != nominated:
        return True
    return not (current and current.get("status") == "False" and current.get("message") == message)
