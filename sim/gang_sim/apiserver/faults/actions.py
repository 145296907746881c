"""The timed faults that change stored objects: external deletions, node failures, evictions.

All go through the same verbs as any request (``Api.delete``, ``Api.patch``), so watchers,
garbage collection and admission see them exactly as if a person had run ``kubectl delete`` or
``kubectl annotate``. A node failure is only the `NODE_FAILURE_ANNOTATION` on the Node: the
simulator's kubelet of that node carries it out (the machine dies: its kubelet goes silent and
the node lifecycle controller takes it from there), as a machine that died would leave its
node; removing it is the recovery. Deleting the Node of a failed machine is what the cloud
provider's node controller does once the VM is gone. A kubelet eviction is the
`KUBELET_EVICTION_ANNOTATION` on the pod, which its node's kubelet carries out.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

from gang_sim.apiserver.errors import NotFound
from gang_sim.apiserver.operations import Api
from gang_sim.apiserver.options import DeleteOptions, ListOptions
from gang_sim.apiserver.patching import MERGE_PATCH
from gang_sim.apiserver.registry import Registry
from gang_sim.apiserver.selectors import parse_label_selector
from gang_sim.conventions import KUBELET_EVICTION_ANNOTATION, NODE_FAILURE_ANNOTATION
from gang_sim.faults import Deletion, KubeletEviction


class StoredObjects(Protocol):
    """What the timed faults change objects through (the API server's `ServerState`)."""

    @property
    def registry(self) -> Registry: ...

    @property
    def api(self) -> Api: ...


log = logging.getLogger(__name__)

# (group, version, plural) of each kind a deletion may name.
DELETABLE = {
    "pytorchjob": ("kubeflow.org", "v1", "pytorchjobs"),
    "podgroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
}
NODES_KEY = "/nodes"
PODS_KEY = "/pods"


def delete_objects(state: StoredObjects, deletion: Deletion) -> int:
    """Delete what ``deletion`` names, as ``kubectl delete`` would (background cascade).

    Returns how many objects were deleted; a name that does not exist is not an error.
    """
    info = state.registry.lookup(*DELETABLE[deletion.kind])
    if info is None:
        log.warning("fault injection: %s is not served; nothing deleted", deletion.kind)
        return 0
    if deletion.name is not None:
        names = [deletion.name]
    else:
        selector = ListOptions(labels=parse_label_selector(deletion.label_selector))
        items, _ = state.api.list_objects(info, deletion.namespace, selector)
        names = [item["metadata"]["name"] for item in items]
    deleted = 0
    for name in names:
        try:
            state.api.delete(info, deletion.namespace, name, DeleteOptions(propagation="Background"))
        except NotFound:
            continue
        deleted += 1
        log.info("fault injection: deleted %s %s/%s", info.resource, deletion.namespace, name)
    return deleted


def mark_node_failed(state: StoredObjects, node: str, failed: bool) -> bool:
    """Add (``failed``) or remove the node-failure annotation; False if the node does not exist."""
    info = state.registry.by_key(NODES_KEY)
    if info is None:  # pragma: no cover - nodes are always registered
        return False
    value = "injected by the simulator's fault spec" if failed else None
    patch = json.dumps({"metadata": {"annotations": {NODE_FAILURE_ANNOTATION: value}}}).encode()
    try:
        state.api.patch(info, "", node, MERGE_PATCH, patch)
    except NotFound:
        log.warning("fault injection: node %s does not exist; no node failure", node)
        return False
    log.info("fault injection: node %s %s", node, "failed" if failed else "recovered")
    return True


def delete_node(state: StoredObjects, node: str) -> bool:
    """Delete the Node object, as the cloud provider does for a VM that no longer exists."""
    info = state.registry.by_key(NODES_KEY)
    if info is None:  # pragma: no cover - nodes are always registered
        return False
    try:
        state.api.delete(info, "", node, DeleteOptions())
    except NotFound:
        log.warning("fault injection: node %s does not exist; nothing deleted", node)
        return False
    log.info("fault injection: node %s deleted", node)
    return True


def mark_pod_evicted(state: StoredObjects, eviction: KubeletEviction) -> bool:
    """Ask the pod's kubelet to evict it (`KUBELET_EVICTION_ANNOTATION`); False if there is no pod."""
    info = state.registry.by_key(PODS_KEY)
    if info is None:  # pragma: no cover - pods are always registered
        return False
    pressure = {
        "resource": eviction.resource,
        "threshold": eviction.threshold,
        "available": eviction.available,
    }
    if eviction.usage is not None:
        pressure["usage"] = eviction.usage
    value = json.dumps(pressure, sort_keys=True)
    patch = json.dumps({"metadata": {"annotations": {KUBELET_EVICTION_ANNOTATION: value}}}).encode()
    try:
        state.api.patch(info, eviction.namespace, eviction.pod, MERGE_PATCH, patch)
    except NotFound:
        log.warning(
            "fault injection: pod %s/%s does not exist; no eviction", eviction.namespace, eviction.pod
        )
        return False
    log.info("fault injection: kubelet eviction of pod %s/%s (%s)", eviction.namespace, eviction.pod, value)
    return True
