"""The simulated node lifecycle controller (kube-controller-manager's ``nodelifecycle``).

It watches each node's heartbeats — the kubelet's Lease in ``kube-node-lease`` and the
``lastHeartbeatTime`` of its status — and judges the node by what it sees, as upstream's
``monitorNodeHealth`` does, never by asking the kubelet:

- A node not heard from for ``node_monitor_grace_period`` (upstream's
  ``--node-monitor-grace-period``: 40 s, 50 s from v1.32; 10 s in the simulator, whose kubelets
  renew their Lease every quarter of it, as a real kubelet renews every 10 s of a 40 s lease)
  gets its ``Ready``, ``MemoryPressure``, ``DiskPressure`` and ``PIDPressure`` conditions set
  to ``Unknown``, reason ``NodeStatusUnknown``, "Kubelet stopped posting node status.", and
  the pods on it lose their ``Ready`` condition (``MarkPodsNotReady``). Time is counted from
  when this controller last saw a heartbeat change (or from its own start), not from the
  timestamps the kubelet wrote.
- NoExecute taints follow the ``Ready`` condition (``doNoExecuteTaintingPass``):
  ``node.kubernetes.io/not-ready`` while it is False, ``node.kubernetes.io/unreachable`` while
  it is Unknown, with ``timeAdded``; the taint eviction controller (``taint_eviction.py``)
  acts on them. NoSchedule taints follow the conditions and the spec
  (``doNoScheduleTaintingPass``): the same two keys, ``memory-pressure``, ``disk-pressure``,
  ``pid-pressure``, ``network-unavailable``, and ``node.kubernetes.io/unschedulable`` while
  ``spec.unschedulable`` is true (a cordoned node). A node that is Ready again loses them.

Sources: ``pkg/controller/nodelifecycle/node_lifecycle_controller.go`` (``tryUpdateNodeHealth``,
``processTaintBaseEviction``, ``doNoScheduleTaintingPass``, ``MarkPodsNotReady``; named, not
lined: kubernetes/kubernetes could not be read at a tag for this work), the 40 s default in
``pkg/controller/nodelifecycle/config/v1alpha1/defaults.go`` (a stored revision, 8932ffc9; the
50 s of recent releases is kubernetes#127352's word, not checked at a tag) and the taint keys of
k8s.io/api ``core/v1/well_known_taints.go:22,27,31,51@kubernetes-1.36.3``.

When every node is not Ready at once (an API server outage stops all heartbeats alike), the
controller does as upstream's ``handleDisruption`` in "master disruption mode": it lifts the
NoExecute taints and evicts nothing until a node is Ready again (the whole cluster is one zone).

Not simulated: the eviction rate limits per zone (a real controller slows down when a large
share of a zone is unhealthy), ``--node-startup-grace-period`` for nodes that never posted a
status (the simulator's kubelets post one as they register) and the node events.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import LEASES, NODE_LEASE_NAMESPACE, NODES, PODS, object_key
from gang_sim.controllers.runner import Controller

log = logging.getLogger(__name__)

# Seconds; upstream: 40 s (50 s from v1.32). Short enough for a test to lose a node in seconds,
# long enough that a busy machine's stalls (the kubelets share one event loop with the other
# controllers and often the test itself) never fail a node by accident: a 2 s grace did, under
# the two lanes of `make test`. Disruption tests that want it shorter say so.
DEFAULT_GRACE_PERIOD = 10.0
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_WATCHED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
# Condition (type, status) -> NoSchedule taint key (upstream's nodeConditionToTaintKeyStatusMap).
_NO_SCHEDULE = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
_MANAGED_NO_SCHEDULE = {*_NO_SCHEDULE.values(), UNSCHEDULABLE}
_NO_EXECUTE = {"False": NOT_READY, "Unknown": UNREACHABLE}
PODS_BY_NODE = "node-lifecycle/node"


@dataclass
class _Health:
    """What this controller last saw of a node: when, and the heartbeats it saw then."""

    probed: float  # time.monotonic() of the last heartbeat seen
    heartbeat: str | None
    renewed: str | None


class NodeLifecycleController(Controller):
    """Marks silent nodes Unknown and keeps the lifecycle taints; see the module docstring."""

    name = "node-lifecycle"
    kinds = (NODES,)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        node_monitor_grace_period: float = DEFAULT_GRACE_PERIOD,
        period: float | None = None,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        # upstream's --node-monitor-period is 5 s of a 40 s grace: look a few times per grace period
        super().__init__(
            client, cache, period if period is not None else max(0.05, node_monitor_grace_period / 4)
        )
        self.grace = node_monitor_grace_period
        self.clock = clock
        self._health: dict[str, _Health] = {}
        self._full_disruption = False
        cache[LEASES]  # read, not followed: a renewal every fraction of a second would only wake it
        cache[PODS].add_index(PODS_BY_NODE, _node_of)

    async def reconcile(self) -> None:
        names = set()
        monitored: list[JsonDict] = []
        for cached in self.cache.items(NODES):
            names.add(object_key(cached)[1])
            try:
                monitored.append(await self._monitor(cached))
            except ApiError as error:
                if error.status not in (404, 409):
                    raise
                self.requeue()  # changed or gone meanwhile: the next round sees it anew
        # Every node not Ready at once is the control plane's trouble, not the nodes' (an API
        # server outage stops every kubelet's heartbeats alike): upstream's handleDisruption
        # then enters "master disruption mode", lifts the NoExecute taints and stops evicting.
        full_disruption = bool(monitored) and all(_ready_status(node) != "True" for node in monitored)
        if full_disruption and not self._full_disruption:
            log.info("all nodes are not Ready: master disruption mode, no NoExecute taints, no evictions")
        self._full_disruption = full_disruption
        for node in monitored:
            name = object_key(node)[1]
            try:
                await self._taint(node, evicting=not full_disruption)
                if _ready_status(node) != "True":
                    await self._mark_pods_not_ready(name)
            except ApiError as error:
                if error.status not in (404, 409):
                    raise
                self.requeue()
        for gone in set(self._health) - names:
            del self._health[gone]

    async def _monitor(self, node: JsonDict) -> JsonDict:
        """``tryUpdateNodeHealth``: note heartbeats; past the grace period, conditions go Unknown."""
        name = object_key(node)[1]
        now = time.monotonic()
        ready = _condition(node, "Ready")
        heartbeat = ready.get("lastHeartbeatTime") if ready else None
        lease = self.cache.get(LEASES, NODE_LEASE_NAMESPACE, name)
        renewed = deep_get(lease, "spec", "renewTime")
        health = self._health.get(name)
        if health is None:
            self._health[name] = _Health(now, heartbeat, renewed)  # a full grace period from now
            return node
        if heartbeat != health.heartbeat or (renewed and (not health.renewed or renewed > health.renewed)):
            health.probed, health.heartbeat, health.renewed = now, heartbeat, renewed
            return node
        if now - health.probed <= self.grace:
            return node
        stamp = rfc3339(self.clock())
        conditions = [dict(c) for c in deep_get(node, "status", "conditions", default=[]) or []]
        changed = False
        for condition in conditions:
            if condition.get("type") in _WATCHED_CONDITIONS and condition.get("status") != "Unknown":
                condition.update(
                    status="Unknown",
                    reason="NodeStatusUnknown",
                    message="Kubelet stopped posting node status.",
                    lastTransitionTime=stamp,
                )
                changed = True
        if not changed:
            return node
        patch = {"metadata": {"resourceVersion": deep_get(node, "metadata", "resourceVersion")}}
        patch["status"] = {"conditions": conditions}
        updated = await self.client.patch(NODES, name, patch, subresource="status")
        self.cache[NODES].observe(updated)
        log.info("node %s: no heartbeat for %.1fs; Ready Unknown", name, now - health.probed)
        return updated

    async def _taint(self, node: JsonDict, *, evicting: bool = True) -> None:
        """Both tainting passes: the lifecycle taints the node should have, and no others (no
        NoExecute taint while not ``evicting``: master disruption mode)."""
        conditions = deep_get(node, "status", "conditions", default=[]) or []
        no_schedule = {
            _NO_SCHEDULE[key] for c in conditions if (key := (c.get("type"), c.get("status"))) in _NO_SCHEDULE
        }
        if deep_get(node, "spec", "unschedulable"):
            no_schedule.add(UNSCHEDULABLE)
        no_execute = _NO_EXECUTE.get(str(_ready_status(node))) if evicting else None
        taints = deep_get(node, "spec", "taints", default=[]) or []
        kept = [
            t
            for t in taints
            if not (
                t.get("effect") == "NoSchedule"
                and t.get("key") in _MANAGED_NO_SCHEDULE
                and t["key"] not in no_schedule
            )
            and not (
                t.get("effect") == "NoExecute"
                and t.get("key") in _NO_EXECUTE.values()
                and t["key"] != no_execute
            )
        ]
        present = {(t.get("key"), t.get("effect")) for t in kept}
        added = [
            {"key": key, "effect": "NoSchedule"}
            for key in sorted(no_schedule)
            if (key, "NoSchedule") not in present
        ]
        if no_execute and (no_execute, "NoExecute") not in present:
            added.append({"key": no_execute, "effect": "NoExecute", "timeAdded": rfc3339(self.clock())})
        if not added and len(kept) == len(taints):
            return
        name = object_key(node)[1]
        patch = {
            "metadata": {"resourceVersion": deep_get(node, "metadata", "resourceVersion")},
            "spec": {"taints": [*kept, *added] or None},
        }
        updated = await self.client.patch(NODES, name, patch)
        self.cache[NODES].observe(updated)
        log.info("node %s: taints %s", name, [f"{t['key']}:{t['effect']}" for t in [*kept, *added]])

    async def _mark_pods_not_ready(self, node: str) -> None:
        """``MarkPodsNotReady``: the pods of a node that is not Ready are not ready either."""
        for pod in self.cache[PODS].indexed(PODS_BY_NODE, node):
            ready = _condition(pod, "Ready")
            if ready is None or ready.get("status") != "True":
                continue
            namespace, name = object_key(pod)
            condition = {**ready, "status": "False", "lastTransitionTime": rfc3339(self.clock())}
            patch = {
                "metadata": {"uid": deep_get(pod, "metadata", "uid")},
                "status": {"conditions": [condition]},
            }
            try:
                updated = await self.client.request(
                    "PATCH",
                    PODS.path(namespace, name, "status"),
                    body=patch,
                    content_type=STRATEGIC_MERGE_PATCH,
                )
            except ApiError as error:
                if error.status in (404, 409):
                    continue
                raise
            self.cache[PODS].observe(updated)


def _condition(obj: JsonDict | None, ctype: str) -> JsonDict | None:
    conditions = deep_get(obj, "status", "conditions", default=[]) or []
    return next((c for c in conditions if c.get("type") == ctype), None)


def _ready_status(node: JsonDict) -> str | None:
    ready = _condition(node, "Ready")
    return str(ready.get("status")) if ready else None


def _node_of(pod: JsonDict) -> list[str]:
    node = deep_get(pod, "spec", "nodeName")
    phase = deep_get(pod, "status", "phase")
    return [str(node)] if node and phase not in ("Succeeded", "Failed") else []
