"""The simulated default kube-scheduler: binds every non-Volcano pod, one at a time, first fit.

It has no notion of a gang. Pods are taken in the order the scheduler first saw them (its
FIFO queue, after priority), each is bound to the first node that fits, and pods that fit
nowhere get ``PodScheduled=False``/``Unschedulable`` and a ``FailedScheduling`` event. With the
pods of several distributed jobs created interleaved, this binds a few replicas of every job and
none completely: the deadlock that gang scheduling exists to prevent.
"""

from __future__ import annotations

import itertools
import logging
from decimal import Decimal
from typing import ClassVar

from gang_sim.controllers import capacity
from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache
from gang_sim.controllers.kinds import NODES, PODS, PRIORITY_CLASSES, Kind
from gang_sim.controllers.runner import Controller

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
PENDING_INDEX = "kube-scheduler/pending"
PENDING = "pending"


def _pending_here(pod: JsonDict) -> list[str]:
    spec = pod.get("spec") or {}
    waiting = (
        spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
        and not spec.get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )
    return [PENDING] if waiting else []


class KubeScheduler(Controller):
    """Binds pods whose ``schedulerName`` is ``default-scheduler`` (the default)."""

    name: ClassVar[str] = "kube-scheduler"
    kinds: ClassVar[tuple[Kind, ...]] = (NODES, PODS, PRIORITY_CLASSES)

    def __init__(self, client: KubeClient, cache: Cache, *, period: float | None = 1.0) -> None:
        super().__init__(client, cache, period=period)
        self._arrival: dict[str, int] = {}
        self._counter = itertools.count()
        self._reported: dict[str, str] = {}
        self.events = EventRecorder(client, DEFAULT_SCHEDULER)
        cache[PODS].add_index(PENDING_INDEX, _pending_here)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.events.close()

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        # Only a pod waiting for this scheduler makes a round worth it; while one waits, any
        # change (a pod ending frees its node, a new node) may let it in.
        if kind == PODS and _pending_here(obj):
            return True
        return bool(self.cache[PODS].indexed(PENDING_INDEX, PENDING))

    def _queue(self) -> list[JsonDict]:
        """Unbound pods for this scheduler, highest priority first, then in arrival order."""
        priorities = {
            pc["metadata"]["name"]: int(pc.get("value", 0)) for pc in self.cache.items(PRIORITY_CLASSES)
        }
        pending = self.cache[PODS].indexed(PENDING_INDEX, PENDING)  # in the order they arrived
        waiting = {pod["metadata"].get("uid", "") for pod in pending}
        self._arrival = {uid: n for uid, n in self._arrival.items() if uid in waiting}
        for pod in pending:
            uid = pod["metadata"].get("uid", "")
            if uid not in self._arrival:
                self._arrival[uid] = next(self._counter)

        def order(pod: JsonDict) -> tuple[int, int]:
            spec = pod.get("spec") or {}
            priority = spec.get("priority")
            if priority is None:
                priority = priorities.get(spec.get("priorityClassName") or "", 0)
            return -int(priority), self._arrival[pod["metadata"].get("uid", "")]

        return sorted(pending, key=order)

    async def reconcile(self) -> None:
        if not self.cache[PODS].indexed(PENDING_INDEX, PENDING):
            return
        nodes = sorted(self.cache.items(NODES), key=lambda n: n["metadata"]["name"])
        free = capacity.node_free(nodes, self.cache.items(PODS))
        for pod in self._queue():
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            node, why = capacity.place(pod, nodes, free)
            if node is None:
                await self._report_unschedulable(pod, why)
                continue
            try:
                await self.client.bind(namespace, name, node)
            except ApiError as error:
                log.debug("kube-scheduler: bind %s/%s failed: %s", namespace, name, error)
                continue
            free[node] = capacity.subtract(free[node], {**capacity.pod_requests(pod), "pods": Decimal(1)})
            bound = {**pod, "spec": {**pod["spec"], "nodeName": node}}
            self.cache[PODS].observe(bound)
            self.events.record(
                pod, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to {node}"
            )
            log.debug("kube-scheduler: bound %s/%s to %s", namespace, name, node)

    async def _report_unschedulable(self, pod: JsonDict, message: str) -> None:
        uid = pod["metadata"].get("uid", "")
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": rfc3339(utc_now()),
            "lastProbeTime": None,
        }
        others = [
            c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"
        ]
        try:
            updated = await self.client.patch(
                PODS, name, {"status": {"conditions": [*others, condition]}}, namespace, subresource="status"
            )
            self.cache[PODS].observe(updated)
        except ApiError as error:
            log.debug("kube-scheduler: could not mark %s/%s unschedulable: %s", namespace, name, error)
            return
        self.events.record(pod, "Warning", "FailedScheduling", message)
