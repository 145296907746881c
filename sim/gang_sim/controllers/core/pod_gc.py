"""The simulated pod garbage collector (kube-controller-manager's ``podgc``).

Pods whose node's kubelet will never confirm their end would stay forever; upstream's
``pkg/controller/podgc`` force-deletes them, and so does this one:

- **Orphaned pods** (``gcOrphaned``): pods bound to a node that no longer exists — the cloud
  provider removed the Node of a VM that went away, or someone ran ``kubectl delete node``. A
  node missing from the cache is quarantined first (upstream waits 40 s, here ``quarantine``
  seconds) and asked for once more; then each of its pods that has not finished is marked
  ``Failed`` with the condition ``DisruptionTarget`` (reason ``DeletionByPodGC``, "PodGC: node no
  longer exists") and every one is deleted with grace period 0.
- **Terminating pods on an out-of-service node** (``gcTerminating``): a node that is not Ready
  and carries the ``node.kubernetes.io/out-of-service:NoExecute`` taint (an administrator's
  word that the machine is gone) has its pods being deleted marked ``Failed`` and force-deleted,
  without a condition.

Upstream runs a pass every 20 s (``gcCheckPeriod``; ``pkg/controller/podgc/gc_controller.go``,
its functions named above rather than lined); this one every ``period`` seconds and whenever a
Node changes. Not simulated: the threshold of terminated pods kept
(``--terminated-pod-gc-threshold``, 12500) and unscheduled terminating pods (the simulator's
API server deletes an unbound pod at once).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import NODES, PODS, Kind, object_key
from gang_sim.controllers.runner import Controller
from gang_sim.pod_conditions import POD_GC, disruption_target, status_patch

log = logging.getLogger(__name__)

OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
PODS_BY_NODE = "pod-gc/node"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
FINISHED = ("Succeeded", "Failed")


class PodGC(Controller):
    """Force-deletes pods no kubelet will end; see the module docstring."""

    name = "pod-gc"
    kinds = (NODES,)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        period: float | None = 1.0,
        quarantine: float = 1.0,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        super().__init__(client, cache, period)
        self.quarantine = quarantine
        self.clock = clock
        self._missing_since: dict[str, float] = {}  # node name -> when first seen missing
        cache[PODS].add_index(PODS_BY_NODE, _bound_to)

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        return True

    async def reconcile(self) -> None:
        nodes = {object_key(node)[1]: node for node in self.cache.items(NODES)}
        await self._orphaned(nodes)
        for name, node in nodes.items():
            if _out_of_service(node) and not _ready(node):
                for pod in self.cache[PODS].indexed(PODS_BY_NODE, name):
                    if deep_get(pod, "metadata", "deletionTimestamp") and _phase(pod) not in FINISHED:
                        await self._fail_and_delete(pod, None)

    async def _orphaned(self, nodes: dict[str, JsonDict]) -> None:
        now = time.monotonic()
        informer = self.cache[PODS]
        missing = {
            node
            for pod in self.cache.items(PODS)
            if (node := deep_get(pod, "spec", "nodeName")) and node not in nodes
        }
        self._missing_since = {node: self._missing_since.get(node, now) for node in missing}
        for node, since in list(self._missing_since.items()):
            if now - since < self.quarantine:
                continue
            try:
                await self.client.get(NODES, node)
                continue  # it exists after all: the cache was behind
            except ApiError as error:
                if error.status != 404:
                    raise
            for pod in informer.indexed(PODS_BY_NODE, node):
                await self._fail_and_delete(pod, disruption_target(*POD_GC))
            log.info("pod gc: deleted the pods of node %s, which no longer exists", node)

    async def _fail_and_delete(self, pod: JsonDict, condition: JsonDict | None) -> None:
        """``markFailedAndDeletePodWithCondition``: Failed (with the condition) unless already
        finished, then deleted with grace period 0."""
        namespace, name = object_key(pod)
        uid = deep_get(pod, "metadata", "uid")
        try:
            if _phase(pod) not in FINISHED:
                patch: JsonDict = {"metadata": {"uid": uid}, "status": {"phase": "Failed"}}
                if condition is not None:
                    patch = status_patch(pod, condition, rfc3339(self.clock()))
                    patch["status"]["phase"] = "Failed"
                await self.client.request(
                    "PATCH",
                    PODS.path(namespace, name, "status"),
                    body=patch,
                    content_type=STRATEGIC_MERGE_PATCH,
                )
            options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
            options["preconditions"] = {"uid": uid}
            await self.client.request("DELETE", PODS.path(namespace, name), body=options)
        except ApiError as error:
            if error.status not in (404, 409):  # gone already, or a successor took the name
                raise
            return
        log.info("pod gc: force-deleted pod %s/%s", namespace, name)


def _bound_to(pod: JsonDict) -> list[str]:
    node = deep_get(pod, "spec", "nodeName")
    return [str(node)] if node else []


def _phase(pod: JsonDict) -> str | None:
    phase = deep_get(pod, "status", "phase")
    return str(phase) if phase else None


def _ready(node: JsonDict) -> bool:
    conditions = deep_get(node, "status", "conditions", default=[]) or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _out_of_service(node: JsonDict) -> bool:
    taints = deep_get(node, "spec", "taints", default=[]) or []
    return any(t.get("key") == OUT_OF_SERVICE and t.get("effect") == "NoExecute" for t in taints)
