"""Resource arithmetic both schedulers share: what a pod asks for, what a node has left, why it won't fit.

Pure functions over wire dicts. Amounts are exact decimals (`gang_sim.quantity`), so
"500m" + "500m" is exactly one CPU and a 4-GPU node is full after four 1-GPU pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from gang_sim.quantity import parse_quantity

Resources = dict[str, Decimal]
JsonDict = dict[str, Any]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# What a scheduler reports when comparing; "pods" is a node capacity, not a request.
_PODS = "pods"


def parse_resources(amounts: Mapping[str, Any] | None) -> Resources:
    parsed: Resources = {}
    for name, amount in (amounts or {}).items():
        try:
            parsed[name] = parse_quantity(amount)
        except ValueError:
            continue  # the API server validated it; an odd value is ignored rather than fatal
    return parsed


def add(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Resources:
    total = dict(left)
    for name, amount in right.items():
        total[name] = total.get(name, Decimal(0)) + amount
    return total


def subtract(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Resources:
    return add(left, {name: -amount for name, amount in right.items()})


def scale(amounts: Mapping[str, Decimal], factor: Decimal) -> Resources:
    return {name: amount * factor for name, amount in amounts.items()}


def total(resource_lists: Iterable[Mapping[str, Decimal]]) -> Resources:
    result: Resources = {}
    for resources in resource_lists:
        result = add(result, resources)
    return result


def shortfall(request: Mapping[str, Decimal], available: Mapping[str, Decimal]) -> list[str]:
    """Resource names where ``request`` exceeds ``available`` (only names the request uses)."""
    return sorted(
        name for name, amount in request.items() if amount > 0 and amount > available.get(name, Decimal(0))
    )


def pod_requests(pod: JsonDict) -> Resources:
    """The scheduler's view of a pod: the sum of its containers' requests (limits where none)."""
    spec = pod.get("spec") or {}
    requests: Resources = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests = add(requests, parse_resources(resources.get("requests") or resources.get("limits")))
    # Init containers run one at a time before the others: the pod needs the larger of the two.
    for container in spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        init = parse_resources(resources.get("requests") or resources.get("limits"))
        for name, amount in init.items():
            requests[name] = max(requests.get(name, Decimal(0)), amount)
    return requests


def holds_resources(pod: JsonDict) -> bool:
    """A pod bound to a node holds its requests until it terminates."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in TERMINAL_PHASES


def node_allocatable(node: JsonDict) -> Resources:
    status = node.get("status") or {}
    return parse_resources(status.get("allocatable") or status.get("capacity"))


def node_is_schedulable(node: JsonDict) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    return ready is None or ready.get("status") == "True"


def node_free(nodes: Iterable[JsonDict], pods: Iterable[JsonDict]) -> dict[str, Resources]:
    """What each node has left after the pods bound to it (a ``pods`` count included)."""
    free = {node["metadata"]["name"]: node_allocatable(node) for node in nodes}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in free and holds_resources(pod):
            free[node] = subtract(free[node], {**pod_requests(pod), _PODS: Decimal(1)})
    return free


def matches_node(pod: JsonDict, node: JsonDict) -> str | None:
    """Why the pod cannot go to the node regardless of resources (None when it can)."""
    if not node_is_schedulable(node):
        return "node(s) were unschedulable or not ready"
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None


def _tolerates(tolerations: list[JsonDict], taint: JsonDict) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def place(pod: JsonDict, nodes: list[JsonDict], free: dict[str, Resources]) -> tuple[str | None, str]:
    """First node (in the given order) that fits the pod, or None plus kube-scheduler's reason text.

    The reason reads like the real one: ``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.``
    """
    request = {**pod_requests(pod), _PODS: Decimal(1)}
    reasons: Counter[str] = Counter()
    for node in nodes:
        name = node["metadata"]["name"]
        mismatch = matches_node(pod, node)
        if mismatch is not None:
            reasons[mismatch] += 1
            continue
        missing = shortfall(request, free.get(name, {}))
        if not missing:
            return name, ""
        for resource in missing:
            reasons["Too many pods" if resource == _PODS else f"Insufficient {resource}"] += 1
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return (
        None,
        f"0/{len(nodes)} nodes are available: {detail}."
        if detail
        else f"0/{len(nodes)} nodes are available.",
    )


def format_resources(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))
