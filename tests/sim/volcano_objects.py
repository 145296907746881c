"""Hand-built wire objects for Volcano session tests: nodes, PodGroups, their pods, queues.

Namespace ``ml``, pods of the volcano scheduler named like a PyTorchJob's replicas
(``<group>-master-0``, ``<group>-worker-N``), GPUs as the resource that runs short.
"""

from __future__ import annotations

from typing import Any

JsonDict = dict[str, Any]


def node(name: str, gpus: int = 2, cpu: str = "16", memory: str = "64Gi") -> JsonDict:
    allocatable = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {
        "metadata": {"name": name},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def podgroup(
    name: str,
    members: int,
    gpus_each: int = 1,
    queue: str = "default",
    *,
    created: str = "2026-01-01T00:00:00Z",
    priority_class: str | None = None,
    phase: str | None = None,
    min_resources: bool = True,
) -> JsonDict:
    spec: JsonDict = {"minMember": members, "queue": queue}
    if min_resources:
        spec["minResources"] = {"nvidia.com/gpu": str(members * gpus_each)}
    if priority_class:
        spec["priorityClassName"] = priority_class
    group: JsonDict = {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created, "uid": name},
        "spec": spec,
    }
    if phase:
        group["status"] = {"phase": phase}
    return group


def pods(
    group: str, count: int, gpus: int = 1, *, node_names: list[str] | None = None, phase: str = "Pending"
) -> list[JsonDict]:
    result = []
    for index in range(count):
        spec: JsonDict = {
            "schedulerName": "volcano",
            "containers": [{"name": "pytorch", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        }
        if node_names:
            spec["nodeName"] = node_names[index]
        result.append(
            {
                "metadata": {
                    "name": f"{group}-master-0" if index == 0 else f"{group}-worker-{index - 1}",
                    "namespace": "ml",
                    "uid": f"{group}-{index}",
                    "annotations": {"scheduling.k8s.io/group-name": group},
                },
                "spec": spec,
                "status": {"phase": phase},
            }
        )
    return result


def queue(name: str, capability: JsonDict | None = None, state: str | None = None) -> JsonDict:
    q: JsonDict = {"metadata": {"name": name}, "spec": {"capability": capability} if capability else {}}
    if state:
        q["status"] = {"state": state}
    return q
