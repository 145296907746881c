"""The node half of the simulated kubelet: register the Node, post heartbeats, simulate failure.

A real kubelet creates its Node (or adopts an existing one) with its address and kubelet port,
then heartbeats through its Lease in ``kube-node-lease`` (renewed every 10 s: a quarter of the
40 s lease) and posts the Node's status when it changes, or every 5 minutes
(``nodeStatusReportFrequency``) to refresh the conditions' ``lastHeartbeatTime``. Here the
Lease is renewed every ``lease_renew_interval`` seconds (a quarter of the simulated node
lifecycle controller's grace period in `SimCluster`), so that a node that stops renewing is
noticed as fast as a test wants.

`NodeAgent.set_ready` (False) simulates the machine dying, and True its return: a dead node's
kubelet writes nothing at all — no Lease, no status, no taints — exactly as a powered-off
machine, and the cluster finds out the way a real one does, from the silence: the node
lifecycle controller (``../core/node_lifecycle.py``) marks it ``Unknown`` and taints it
``node.kubernetes.io/unreachable``. Back, the kubelet posts ``Ready`` again (its conditions'
transition times from the Node as it finds it) and renews its Lease at once. The pod side of it
lives in `kubelet.Kubelet`. The same failure follows the simulator-only
`NODE_FAILURE_ANNOTATION` on the Node (how the API server's fault injection fails a node): the
node fails when it appears and recovers when it goes; only changes of the annotation count, so
`set_ready` keeps working. A Node deleted while its machine is dead (the cloud provider removed
a VM that went away) never comes back: its kubelet stays dead.
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
from gang_sim.controllers.kinds import LEASES, NODE_LEASE_NAMESPACE, NODES
from gang_sim.controllers.kubelet.status import (
    HOST_IP,
    node_conditions,
    node_lease,
    node_object,
)
from gang_sim.controllers.runner import Controller
from gang_sim.conventions import NODE_FAILURE_ANNOTATION

log = logging.getLogger(__name__)

LEASE_RENEW_SECONDS = 10.0  # the real kubelet's renew interval (a quarter of its 40 s lease)
STATUS_REPORT_SECONDS = 300.0


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
        lease_renew_interval: float = LEASE_RENEW_SECONDS,
    ) -> None:
        super().__init__(client, cache, period)
        self.lease_renew_interval = lease_renew_interval
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
        """Simulate the machine dying (False) or coming back (True). Safe to call from any thread."""
        self.ready = ready
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wakeup.set)

    def _follow_failure_annotation(self, changed: JsonDict | None) -> None:
        # Called on every Node change of the cluster: a dict lookup, and a wakeup only for ours.
        if changed is not None and deep_get(changed, "metadata", "name") != self.node_name:
            return
        node = self.cache.get(NODES, "", self.node_name)
        if node is None:
            return  # deleted: a dead machine stays dead, a live kubelet carries on as it was
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
        if not self.register_node or not self.ready:
            return  # a dead machine's kubelet is silent: no Lease, no status, nothing
        if not self._registered:
            await self._register()
        recovered = self._posted_ready is False
        if time.monotonic() - self._last_lease_renewal >= self.lease_renew_interval or recovered:
            await self._renew_lease()
        node = self.cache.get(NODES, "", self.node_name)
        # A live kubelet posts its status when the Node no longer says what it would post, as the
        # real one's tryUpdateNodeStatus does (nodeStatusHasChanged): the node lifecycle
        # controller marked it Unknown while the heartbeats could not get through (an API outage).
        marked_down = node is not None and _ready_of(node) not in (None, "True")
        if recovered or marked_down or time.monotonic() - self._last_status_report >= STATUS_REPORT_SECONDS:
            # Conditions as the Node has them now: someone may have marked them Unknown meanwhile.
            previous = deep_get(node, "status", "conditions", default=None) or self._conditions
            self._conditions = node_conditions(self.clock(), previous)
            await self.client.patch(
                NODES, self.node_name, {"status": {"conditions": self._conditions}}, subresource="status"
            )
            self._last_status_report = time.monotonic()
        if recovered:
            log.info("node %s is back", self.node_name)
        self._posted_ready = True

    def went_down(self) -> bool:
        """Note a failure once: True the first time this is called after the machine died."""
        if self.ready or self._posted_ready is False:
            return False
        self._posted_ready = False
        log.info("node %s: machine down", self.node_name)
        return True

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


def _ready_of(node: JsonDict) -> str | None:
    for condition in deep_get(node, "status", "conditions", default=None) or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None
