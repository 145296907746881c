"""The simulated taint eviction controller (kube-controller-manager's ``taint-eviction-controller``,
the node lifecycle controller's "taint manager" before v1.29).

A pod bound to a node with ``NoExecute`` taints must tolerate every one of them to stay:

- a pod that does not tolerate them all is deleted at once;
- a pod that tolerates them all stays for the smallest ``tolerationSeconds`` of the tolerations
  it uses (forever when none has one), counted from when this controller first found it
  there, as upstream's timed queue counts from when it scheduled the eviction; the clock
  stops when the taints go.

Every deletion first adds the pod condition ``DisruptionTarget`` (reason
``DeletionByTaintManager``, "Taint manager: deleting due to NoExecute taint"), then deletes the
pod with its own grace period and records a ``TaintManagerEviction`` event, as upstream's
``addConditionAndDeletePod``. On a node whose kubelet is dead nobody confirms the deletion, so
the pod stays ``Terminating`` until the node comes back or its Node object is deleted (then pod
GC removes it, ``pod_gc.py``). Every pod gets ``not-ready`` and ``unreachable`` tolerations
from the API server's DefaultTolerationSeconds admission (3 s in the simulator, 300 s upstream).

Upstream: ``pkg/controller/tainteviction/taint_eviction.go`` (``processPodOnNode``,
``getMinTolerationTime``, ``addConditionAndDeletePod``; named, not lined: kubernetes/kubernetes
could not be read at a tag for this work).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import NODES, PODS, Kind, object_key
from gang_sim.controllers.runner import Controller
from gang_sim.pod_conditions import TAINT_MANAGER, disruption_target, status_patch

log = logging.getLogger(__name__)

COMPONENT = "taint-eviction-controller"
PODS_BY_NODE = "taint-eviction/node"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def tolerates(toleration: JsonDict, taint: JsonDict) -> bool:
    """``Toleration.ToleratesTaint``."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("operator") in (None, "", "Equal") and (toleration.get("value") or "") == (
        taint.get("value") or ""
    )


def toleration_time(tolerations: list[JsonDict], taints: list[JsonDict]) -> float | None:
    """Seconds the pod may stay: 0 when a taint is not tolerated, None for ever
    (``getMatchingTolerations`` and ``getMinTolerationTime``)."""
    used: list[JsonDict] = []
    for taint in taints:
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return 0.0
        used += matching
    seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    return float(max(0, min(int(s) for s in seconds)))


class TaintEvictionController(Controller):
    """Deletes pods that do not tolerate their node's NoExecute taints; see the module docstring."""

    name = "taint-eviction"
    kinds = (NODES, PODS)

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
        self._since: dict[str, float] = {}  # pod UID -> monotonic time its eviction was scheduled
        self._tainted: set[str] = set()
        cache[PODS].add_index(PODS_BY_NODE, _bound_to)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.events.close()

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        if kind == NODES:
            return bool(_no_execute(obj)) or object_key(obj)[1] in self._tainted
        return deep_get(obj, "spec", "nodeName") in self._tainted

    async def reconcile(self) -> None:
        now = time.monotonic()
        tainted = {
            object_key(node)[1]: taints for node in self.cache.items(NODES) if (taints := _no_execute(node))
        }
        self._tainted = set(tainted)
        waiting: set[str] = set()
        next_due: float | None = None
        for node, taints in tainted.items():
            for pod in self.cache[PODS].indexed(PODS_BY_NODE, node):
                if deep_get(pod, "metadata", "deletionTimestamp"):
                    continue
                uid = str(deep_get(pod, "metadata", "uid"))
                seconds = toleration_time(deep_get(pod, "spec", "tolerations", default=[]) or [], taints)
                if seconds is None:
                    continue
                due = self._since.setdefault(uid, now) + seconds
                if due <= now:
                    await self._evict(pod, node)
                    continue
                waiting.add(uid)
                next_due = due if next_due is None else min(next_due, due)
        self._since = {uid: since for uid, since in self._since.items() if uid in waiting}
        if next_due is not None:
            asyncio.get_running_loop().call_later(max(0.0, next_due - now), self.wakeup.set)

    async def _evict(self, pod: JsonDict, node: str) -> None:
        namespace, name = object_key(pod)
        uid = deep_get(pod, "metadata", "uid")
        patch = status_patch(pod, disruption_target(*TAINT_MANAGER), rfc3339(self.clock()))
        try:
            await self.client.request(
                "PATCH", PODS.path(namespace, name, "status"), body=patch, content_type=STRATEGIC_MERGE_PATCH
            )
            deleted = await self.client.request(
                "DELETE",
                PODS.path(namespace, name),
                body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}},
            )
        except ApiError as error:
            if error.status in (404, 409):  # gone, or a successor took the name
                return
            raise
        if deep_get(deleted, "metadata", "deletionTimestamp"):
            self.cache[PODS].observe(deleted)  # Terminating: not to be deleted again next round
        self.events.record(
            pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}"
        )
        log.info("taint eviction: deleting pod %s/%s from node %s", namespace, name, node)


def _no_execute(node: JsonDict) -> list[JsonDict]:
    return [t for t in deep_get(node, "spec", "taints", default=[]) or [] if t.get("effect") == "NoExecute"]


def _bound_to(pod: JsonDict) -> list[str]:
    node = deep_get(pod, "spec", "nodeName")
    return [str(node)] if node else []
