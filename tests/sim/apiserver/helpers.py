"""Manifests and raw calls shared by the API server tests."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s


def call(
    api_client: k8s.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    query: list[tuple[str, Any]] | None = None,
    accept: str = "application/json",
) -> Any:
    """An authenticated request through the official client's transport; returns parsed JSON."""
    data = api_client.call_api(
        path,
        method,
        query_params=query or [],
        header_params={"Accept": accept, "Content-Type": content_type},
        body=body,
        response_types_map={200: "object", 201: "object", 202: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    return data


def status_of(error: k8s.ApiException) -> dict[str, Any]:
    """The Status object an ApiException carries."""
    status: dict[str, Any] = json.loads(error.body)
    return status


def pod_manifest(name: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", None)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    return body


def pytorchjob_manifest(name: str, workers: int = 1, **extra: Any) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}]}},
        }

    specs = {"Master": replica(1)}
    if workers:
        specs["Worker"] = replica(workers)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, **extra.pop("metadata", {})},
        "spec": {"pytorchReplicaSpecs": specs, **extra},
    }


def podgroup_manifest(name: str, queue: str = "default", min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue},
    }
