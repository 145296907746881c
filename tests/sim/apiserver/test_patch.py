"""The three patch formats as the official client sends them."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import call, pod_manifest, pytorchjob_manifest, status_of

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def test_merge_patch_on_custom_resource_merges_maps_and_null_deletes(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("m", metadata={"labels": {"a": "1", "b": "2"}})
    )
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "m", {"metadata": {"labels": {"a": None, "c": "3"}}}
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_strategic_merge_patch_merges_containers_by_name(core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("p")
    body["spec"]["containers"] = [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:1"}]
    core.create_namespaced_pod(namespace, body)
    patched = core.patch_namespaced_pod(
        "p", namespace, {"spec": {"containers": [{"name": "b", "image": "img:2"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "img:1"), ("b", "img:2")]


def test_strategic_merge_patch_merges_conditions_by_type(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    core.patch_namespaced_pod_status(
        "p",
        namespace,
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"},
                ]
            }
        },
    )
    patched = core.patch_namespaced_pod_status(
        "p", namespace, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert [(c.type, c.status) for c in patched.status.conditions] == [
        ("PodScheduled", "True"),
        ("Ready", "True"),
    ]


def test_strategic_merge_patch_merges_service_ports_by_port(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "svc"},
            "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
        },
    )
    patched = core.patch_namespaced_service(
        "svc", namespace, {"spec": {"ports": [{"name": "c", "port": 81}, {"name": "d", "port": 82}]}}
    )
    assert [(p.name, p.port) for p in patched.spec.ports] == [("a", 80), ("c", 81), ("d", 82)]


def test_strategic_merge_patch_delete_directive_and_finalizer_union(
    core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(
        namespace, {**pod_manifest("p"), "metadata": {"name": "p", "finalizers": ["a.io/x"]}}
    )
    patched = core.patch_namespaced_pod("p", namespace, {"metadata": {"finalizers": ["b.io/y"]}})
    assert patched.metadata.finalizers == ["a.io/x", "b.io/y"]
    removed = core.patch_namespaced_pod(
        "p", namespace, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x", "b.io/y"]}}
    )
    assert not removed.metadata.finalizers


def test_strategic_merge_patch_on_custom_resource_is_415(
    api_client: k8s.ApiClient, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("s"))
    with pytest.raises(k8s.ApiException) as caught:
        call(
            api_client,
            "PATCH",
            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/s",
            {"metadata": {"labels": {"a": "b"}}},
            content_type="application/strategic-merge-patch+json",
        )
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (415, "UnsupportedMediaType")


def test_json_patch_ops_and_failed_test_is_422(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p", labels={"a": "1"}))
    patched = core.patch_namespaced_pod(
        "p",
        namespace,
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "3"},
        ],
    )
    assert patched.metadata.labels == {"a": "2", "b/c": "3"}
    with pytest.raises(k8s.ApiException) as caught:
        core.patch_namespaced_pod(
            "p", namespace, [{"op": "test", "path": "/metadata/labels/a", "value": "9"}]
        )
    assert caught.value.status == 422
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("j"))
    job = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "j",
        [{"op": "add", "path": "/spec/runPolicy", "value": {"backoffLimit": 2}}],
        _content_type="application/json-patch+json",
    )
    assert job["spec"]["runPolicy"]["backoffLimit"] == 2


def test_malformed_patch_is_400_and_missing_object_is_404(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    with pytest.raises(k8s.ApiException) as bad:
        call(
            api_client,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/p",
            [{"op": "nonsense", "path": "/x"}],
            content_type="application/json-patch+json",
        )
    assert status_of(bad.value)["reason"] == "BadRequest"
    with pytest.raises(k8s.ApiException) as missing:
        core.patch_namespaced_pod("nope", namespace, {"metadata": {"labels": {"a": "b"}}})
    assert status_of(missing.value)["message"] == 'pods "nope" not found'


def test_patch_that_breaks_validation_is_422(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("v"))
    with pytest.raises(k8s.ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "v", {"spec": {"runPolicy": {"backoffLimit": "many"}}}
        )
    status = status_of(caught.value)
    assert status["details"]["causes"][0]["field"] == "spec.runPolicy.backoffLimit"
