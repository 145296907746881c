"""pytorchjobs/scale as the PyTorchJob CRD declares it, and 404s for subresources a kind lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from gang_sim.apiserver.crd_loader import crd_resources
from gang_sim.apiserver.resources import PYTORCHJOBS, builtin_registry
from tests.sim.apiserver.helpers import call, pod_manifest, podgroup_manifest, pytorchjob_manifest, status_of

GROUP = ("kubeflow.org", "v1")
UPSTREAM_CRD = "kubeflow.org_pytorchjobs.yaml"


def create_job(custom: k8s.CustomObjectsApi, namespace: str, name: str, workers: int = 3) -> dict[str, Any]:
    job: dict[str, Any] = custom.create_namespaced_custom_object(
        *GROUP, namespace, "pytorchjobs", pytorchjob_manifest(name, workers=workers)
    )
    return job


def test_discovery_lists_the_scale_subresource_as_kube_apiserver_does(api_client: k8s.ApiClient) -> None:
    resources = {r["name"]: r for r in call(api_client, "GET", "/apis/kubeflow.org/v1")["resources"]}
    assert resources["pytorchjobs/scale"] == {
        "name": "pytorchjobs/scale",
        "singularName": "",
        "namespaced": True,
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
        "verbs": ["get", "patch", "update"],
    }
    volcano = {r["name"] for r in call(api_client, "GET", "/apis/batch.volcano.sh/v1alpha1")["resources"]}
    assert "jobs/scale" not in volcano  # its CRD declares no scale


def test_the_built_in_scale_paths_are_the_upstream_crds(shared_crds: Path) -> None:
    (loaded,) = crd_resources(
        [yaml.load((shared_crds / UPSTREAM_CRD).read_text(), Loader=yaml.CSafeLoader)], builtin_registry()
    )
    assert loaded.scale == PYTORCHJOBS.scale
    assert loaded.subresources == PYTORCHJOBS.subresources == {"status", "scale"}


def test_get_scale_reads_the_worker_replicas(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    job = create_job(custom, namespace, "sized")
    custom.patch_namespaced_custom_object_status(
        *GROUP,
        namespace,
        "pytorchjobs",
        "sized",
        {"status": {"replicaStatuses": {"Worker": {"active": 2, "selector": "job=sized"}}}},
    )

    scale = custom.get_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "sized")

    current = custom.get_namespaced_custom_object(*GROUP, namespace, "pytorchjobs", "sized")
    assert scale == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": "sized",
            "namespace": namespace,
            "uid": job["metadata"]["uid"],
            "resourceVersion": current["metadata"]["resourceVersion"],
            "creationTimestamp": job["metadata"]["creationTimestamp"],
        },
        "spec": {"replicas": 3},
        "status": {"replicas": 2, "selector": "job=sized"},
    }


def test_put_and_patch_scale_set_the_worker_replicas(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    job = create_job(custom, namespace, "elastic")
    scale = custom.get_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "elastic")
    scale["spec"]["replicas"] = 5

    replaced = custom.replace_namespaced_custom_object_scale(
        *GROUP, namespace, "pytorchjobs", "elastic", scale
    )

    stored = custom.get_namespaced_custom_object(*GROUP, namespace, "pytorchjobs", "elastic")
    assert replaced["spec"] == {"replicas": 5}
    assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    assert stored["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert stored["metadata"]["generation"] == job["metadata"]["generation"] + 1
    assert replaced["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

    patched = custom.patch_namespaced_custom_object_scale(
        *GROUP, namespace, "pytorchjobs", "elastic", {"spec": {"replicas": 2}}
    )

    assert patched["spec"] == {"replicas": 2}
    assert (
        custom.get_namespaced_custom_object(*GROUP, namespace, "pytorchjobs", "elastic")["spec"][
            "pytorchReplicaSpecs"
        ]["Worker"]["replicas"]
        == 2
    )


def test_a_stale_scale_is_a_conflict_and_negative_replicas_are_invalid(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create_job(custom, namespace, "guarded")
    stale = custom.get_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "guarded")
    custom.patch_namespaced_custom_object_scale(
        *GROUP, namespace, "pytorchjobs", "guarded", {"spec": {"replicas": 4}}
    )
    stale["spec"]["replicas"] = 1

    with pytest.raises(k8s.ApiException) as conflict:
        custom.replace_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "guarded", stale)
    with pytest.raises(k8s.ApiException) as negative:
        custom.patch_namespaced_custom_object_scale(
            *GROUP, namespace, "pytorchjobs", "guarded", {"spec": {"replicas": -1}}
        )

    assert status_of(conflict.value)["message"] == (
        'Operation cannot be fulfilled on pytorchjobs.kubeflow.org "guarded": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert (negative.value.status, status_of(negative.value)["message"]) == (
        422,
        'Scale.autoscaling "guarded" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0",
    )
    assert custom.get_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "guarded")["spec"] == {
        "replicas": 4
    }


def test_a_job_without_workers_has_no_scale_to_read(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    create_job(custom, namespace, "solo", workers=0)

    with pytest.raises(k8s.ApiException) as caught:
        custom.get_namespaced_custom_object_scale(*GROUP, namespace, "pytorchjobs", "solo")

    assert (caught.value.status, status_of(caught.value)["message"]) == (
        500,
        'Internal error occurred: the spec replicas field ".spec.pytorchReplicaSpecs.Worker.replicas" '
        "does not exist",
    )


def test_a_subresource_a_custom_resource_lacks_is_a_404_naming_the_object(
    api_client: k8s.ApiClient, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    queue = f"q-{namespace}"
    custom.create_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", {"metadata": {"name": queue}, "spec": {"weight": 1}}
    )
    try:
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", podgroup_manifest("pg", queue=queue)
        )
        for name in ("pg", "absent"):  # whether or not the object exists
            with pytest.raises(k8s.ApiException) as caught:
                call(
                    api_client,
                    "GET",
                    f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/{name}/status",
                )
            assert status_of(caught.value) == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f'podgroups.scheduling.volcano.sh "{name}" not found',
                "reason": "NotFound",
                "details": {"name": name, "group": "scheduling.volcano.sh", "kind": "podgroups"},
                "code": 404,
            }
        with pytest.raises(k8s.ApiException) as queue_scale:
            call(api_client, "PUT", f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}/scale", {})
        assert status_of(queue_scale.value)["details"] == {
            "name": queue,
            "group": "scheduling.volcano.sh",
            "kind": "queues",
        }
    finally:
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)


def test_a_subresource_a_built_in_kind_lacks_is_the_generic_404(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/p/scale")
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (404, "NotFound")
    assert status["message"] == "the server could not find the requested resource"
