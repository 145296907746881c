"""Pods and budgets the disruption tests make, and how they read them back."""

from __future__ import annotations

import json
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from tests.waiting import eventually

Json = dict[str, Any]
DURATION = "sim.airflow-gang.io/duration"


def pod(
    name: str,
    node: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    seconds: int = 600,
    tolerations: list[Json] | None = None,
    **metadata: Any,
) -> Json:
    """A pod that runs ``seconds`` on the simulated kubelet (bound to ``node`` if given)."""
    spec: Json = {
        "restartPolicy": "Never",
        "containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}],
    }
    if node is not None:
        spec["nodeName"] = node
    if tolerations is not None:
        spec["tolerations"] = tolerations
    annotations = {DURATION: str(seconds), **metadata.pop("annotations", {})}
    meta: Json = {"name": name, "labels": labels or {}, "annotations": annotations, **metadata}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def budget(name: str, labels: dict[str, str], **spec: Any) -> Json:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, **spec},
    }


def pod_json(core: k8s.CoreV1Api, namespace: str, name: str) -> Json:
    response = core.read_namespaced_pod(name, namespace, _preload_content=False)
    return cast(Json, json.loads(response.data))


def condition(pod_body: Json, ctype: str) -> Json | None:
    return next((c for c in pod_body["status"].get("conditions") or [] if c["type"] == ctype), None)


def gone(core: k8s.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except k8s.ApiException as error:
        return bool(error.status == 404)
    return False


def start_running(core: k8s.CoreV1Api, namespace: str, *bodies: Json) -> None:
    """Create the pods and wait until each runs (and is Ready)."""
    for body in bodies:
        core.create_namespaced_pod(namespace, body)
    for body in bodies:
        name = body["metadata"]["name"]
        eventually(
            lambda name=name: (
                (condition(pod_json(core, namespace, name), "Ready") or {}).get("status") == "True"
            ),
            timeout=15,
            message=f"{name} ready",
        )


def evict(core: k8s.CoreV1Api, namespace: str, name: str, **options: Any) -> Any:
    body = k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=k8s.V1DeleteOptions(**options) if options else None,
    )
    return core.create_namespaced_pod_eviction(name, namespace, body)


def budget_status(policy: k8s.PolicyV1Api, namespace: str, name: str) -> Json:
    response = policy.read_namespaced_pod_disruption_budget(name, namespace, _preload_content=False)
    return cast(Json, json.loads(response.data).get("status") or {})


def states_until_gone(
    core: k8s.CoreV1Api, namespace: str, names: set[str], resource_version: str, timeout: float = 30
) -> dict[str, list[Json]]:
    """Every state of the named pods a watch from ``resource_version`` sees until all are deleted
    (the last one is the state they were deleted in): what a controller of those pods sees."""
    seen: dict[str, list[Json]] = {name: [] for name in names}
    left = set(names)
    stream = k8s_watch.Watch().stream(
        core.list_namespaced_pod, namespace, resource_version=resource_version, timeout_seconds=int(timeout)
    )
    for event in stream:
        obj = event["raw_object"]
        name = obj["metadata"]["name"]
        if name in seen:
            seen[name].append(obj)
            if event["type"] == "DELETED":
                left.discard(name)
        if not left:
            break
    assert not left, f"still there after {timeout}s: {sorted(left)}"
    return seen
