"""The node half of the simulated kubelet: register the Node, post heartbeats, simulate failure.

A real kubelet creates its Node (or adopts an existing one) with its address and kubelet port,
then heartbeats through its Lease in ``kube-node-lease`` (renewed every 10 s: a quarter of the
40 s lease) and posts the Node's status when it changes, or every 5 minutes
(``nodeStatusReportFrequency``) to refresh the conditions' ``lastHeartbeatTime``. A real
cluster's node lifecycle controller marks a node whose Lease goes stale NotReady; here the
node lifecycle controller's part (the ``node.kubernetes.io/not-ready`` taints) is done by the
kubelet itself when the node stops being Ready. `NodeAgent.set_ready` simulates that failure
(and recovery): a failed node renews nothing until it recovers. The pod side of it lives in
`kubelet.Kubelet`. The same failure follows the simulator-only `NODE_FAILURE_ANNOTATION`
on the Node (how the API server's fault injection fails a node): the node fails when it appears
and recovers when it goes. Only changes of the annotation count, so `set_ready` keeps working.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import utc_now
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import LEASES, NODES
from gang_sim.controllers.kubelet_status import (
    HOST_IP,
    NODE_LEASE_NAMESPACE,
    node_conditions,
    node_lease,
    node_object,
)
from gang_sim.controllers.runner import Controller
from gang_sim.conventions import NODE_FAILURE_ANNOTATION

log = logging.getLogger(__name__)

LEASE_RENEW_SECONDS = 10.0
STATUS_REPORT_SECONDS = 300.0
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class NodeAgent(Controller):
    """Keeps one Node object current; `reconcile` implementations call `sync_node` first."""

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        node_name: str,
        capacity: dict[str, str],
        register_node: bool = True,
        period: float | None = 0.2,
        clock: Callable[[], dt.datetime] = utc_now,
        address: str = HOST_IP,
    ) -> None:
        super().__init__(client, cache, period)
        self.node_name = node_name
        self.capacity = dict(capacity)
        self.register_node = register_node
        self.clock = clock
        self.address = address
        self.kubelet_port = 10250  # the kubelet API's port, advertised on the Node; set before run()
        self.ready = True
        self._registered = False
        self._node_uid = ""
        self._posted_ready: bool | None = None
        self._conditions: list[JsonDict] = []
        self._last_status_report = float("-inf")
        self._last_lease_renewal = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._annotated_failure = False
        cache[NODES].subscribe(self._follow_failure_annotation)

    def set_ready(self, ready: bool) -> None:
        """Simulate node failure (False) or recovery (True). Safe to call from any thread."""
        self.ready = ready
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wakeup.set)

    def _follow_failure_annotation(self, changed: JsonDict | None) -> None:
        # Called on every Node change of the cluster: a dict lookup, and a wakeup only for ours.
        if changed is not None and deep_get(changed, "metadata", "name") != self.node_name:
            return
        node = self.cache.get(NODES, "", self.node_name)
        annotations = deep_get(node, "metadata", "annotations", default=None) or {}
        failed = NODE_FAILURE_ANNOTATION in annotations
        if failed != self._annotated_failure:
            self._annotated_failure = failed
            self.ready = not failed
            self.wakeup.set()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        await super().run()

    async def sync_node(self) -> None:
        if not self.register_node:
            return
        if not self._registered:
            await self._register()
        changed = self._posted_ready != self.ready
        # A failed node's kubelet is silent: no heartbeats until it recovers.
        if self.ready and time.monotonic() - self._last_lease_renewal >= LEASE_RENEW_SECONDS:
            await self._renew_lease()
        due = self.ready and time.monotonic() - self._last_status_report >= STATUS_REPORT_SECONDS
        if changed or due:
            self._conditions = node_conditions(self.ready, self.clock(), self._conditions)
            await self.client.patch(
                NODES, self.node_name, {"status": {"conditions": self._conditions}}, subresource="status"
            )
            self._last_status_report = time.monotonic()
        if changed:
            await self._set_taints()
            log.info("node %s ready=%s", self.node_name, self.ready)
            self._posted_ready = self.ready

    async def _register(self) -> None:
        body = node_object(
            self.node_name, self.capacity, self.clock(), address=self.address, port=self.kubelet_port
        )
        try:
            node = await self.client.create(NODES, body)
        except ApiError as error:
            if error.status != 409:
                raise
            # Adopt the existing Node as a restarted kubelet does: our labels, capacity, address
            # and port (the old kubelet's port is gone with it).
            await self.client.patch(
                NODES, self.node_name, {"metadata": {"labels": body["metadata"]["labels"]}}
            )
            node = await self.client.patch(
                NODES, self.node_name, {"status": body["status"]}, subresource="status"
            )
        self._node_uid = str(deep_get(node, "metadata", "uid", default=""))
        self._conditions = body["status"]["conditions"]
        self._posted_ready = True
        self._last_status_report = time.monotonic()
        self._registered = True
        log.info(
            "node registered node=%s capacity=%s kubelet=%s:%d",
            self.node_name,
            body["status"]["capacity"],
            self.address,
            self.kubelet_port,
        )

    async def _renew_lease(self) -> None:
        lease = node_lease(self.node_name, self._node_uid, self.clock())
        try:
            await self.client.patch(LEASES, self.node_name, {"spec": lease["spec"]}, NODE_LEASE_NAMESPACE)
        except ApiError as error:
            if error.status != 404:
                raise
            try:
                await self.client.create(LEASES, lease, NODE_LEASE_NAMESPACE)
            except ApiError as conflict:
                if conflict.status != 409:  # created meanwhile: renewed next time
                    raise
        self._last_lease_renewal = time.monotonic()

    async def _set_taints(self) -> None:
        node = await self.client.get(NODES, self.node_name)
        taints = [
            t for t in deep_get(node, "spec", "taints", default=[]) or [] if t.get("key") != NOT_READY_TAINT
        ]
        if not self.ready:
            stamp = node_conditions(False, self.clock())[-1]["lastTransitionTime"]
            taints += [
                {"key": NOT_READY_TAINT, "effect": "NoSchedule"},
                {"key": NOT_READY_TAINT, "effect": "NoExecute", "timeAdded": stamp},
            ]
        await self.client.patch(NODES, self.node_name, {"spec": {"taints": taints or None}})
