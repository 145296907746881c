"""Create, read, update, delete through the official clients, with kube-apiserver's errors."""

from __future__ import annotations

import re

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import call, pod_manifest, pytorchjob_manifest, status_of

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def test_create_assigns_server_fields(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, pod_manifest("p"))
    meta = pod.metadata
    assert re.fullmatch(r"[0-9a-f-]{36}", meta.uid)
    assert int(meta.resource_version) > 0
    assert meta.creation_timestamp is not None
    assert meta.namespace == namespace
    assert meta.generation == 1
    fetched = core.read_namespaced_pod("p", namespace)
    assert (fetched.metadata.uid, fetched.metadata.resource_version) == (meta.uid, meta.resource_version)


def test_resource_versions_increase_across_kinds(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    first = core.create_namespaced_pod(namespace, pod_manifest("a")).metadata.resource_version
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("j"))
    second = core.create_namespaced_service(
        namespace, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert int(first) < int(job["metadata"]["resourceVersion"]) < int(second.metadata.resource_version)


def test_get_missing_custom_object_is_404_with_upstream_wording(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "x")
    status = status_of(caught.value)
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pytorchjobs.kubeflow.org "x" not found',
        "reason": "NotFound",
        "details": {"name": "x", "group": "kubeflow.org", "kind": "pytorchjobs"},
        "code": 404,
    }


def test_create_twice_is_409_already_exists(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("twice"))
    with pytest.raises(k8s.ApiException) as caught:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("twice")
        )
    status = status_of(caught.value)
    assert (caught.value.status, status["reason"]) == (409, "AlreadyExists")
    assert status["message"] == 'pytorchjobs.kubeflow.org "twice" already exists'


def test_create_in_missing_namespace_is_404_namespace_not_found(core: k8s.CoreV1Api) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.create_namespaced_pod("does-not-exist", pod_manifest("p"))
    status = status_of(caught.value)
    assert (status["code"], status["reason"], status["message"]) == (
        404,
        "NotFound",
        'namespaces "does-not-exist" not found',
    )
    assert status["details"] == {"name": "does-not-exist", "kind": "namespaces"}


def test_generate_name_gets_a_five_character_suffix(core: k8s.CoreV1Api, namespace: str) -> None:
    names = {
        core.create_namespaced_pod(
            namespace, {"metadata": {"generateName": "worker-"}, "spec": pod_manifest("x")["spec"]}
        ).metadata.name
        for _ in range(5)
    }
    assert len(names) == 5
    assert all(re.fullmatch(r"worker-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in names)


def test_missing_name_is_422_with_cause(core: k8s.CoreV1Api, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.create_namespaced_pod(namespace, {"metadata": {}, "spec": pod_manifest("x")["spec"]})
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


def test_namespace_mismatch_is_400_bad_request(core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("p")
    body["metadata"]["namespace"] = "elsewhere"
    with pytest.raises(k8s.ApiException) as caught:
        core.create_namespaced_pod(namespace, body)
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert (
        status["message"]
        == "the namespace of the provided object does not match the namespace sent on the request"
    )


def test_wrong_kind_and_bad_json_are_400(api_client: k8s.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    with pytest.raises(k8s.ApiException) as wrong_kind:
        call(api_client, "POST", path, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}})
    with pytest.raises(k8s.ApiException) as bad_json:
        call(api_client, "POST", path, "{not json")
    assert status_of(wrong_kind.value)["reason"] == "BadRequest"
    assert status_of(bad_json.value)["reason"] == "BadRequest"


def test_put_with_other_name_is_400(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, pod_manifest("p"))
    pod.metadata.name = "q"
    with pytest.raises(k8s.ApiException) as caught:
        core.replace_namespaced_pod("p", namespace, pod)
    assert (
        status_of(caught.value)["message"]
        == "the name of the object (q) does not match the name on the URL (p)"
    )


def test_unsupported_method_is_405_status(api_client: k8s.ApiClient, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods/p", pod_manifest("p"))
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (405, "MethodNotAllowed")


def test_update_and_delete_custom_object(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("u"))
    job["metadata"].setdefault("labels", {})["team"] = "ml"
    updated = custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "u", job)
    assert updated["metadata"]["labels"] == {"team": "ml"}
    assert int(updated["metadata"]["resourceVersion"]) > int(job["metadata"]["resourceVersion"])
    deleted = custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "u")
    assert deleted["metadata"]["uid"] == job["metadata"]["uid"]
    with pytest.raises(k8s.ApiException) as caught:
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "u")
    assert caught.value.status == 404


def test_noop_update_keeps_the_resource_version(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, pod_manifest("p"))
    again = core.replace_namespaced_pod("p", namespace, pod)
    assert again.metadata.resource_version == pod.metadata.resource_version


def test_dry_run_validates_without_storing(core: k8s.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_pod(namespace, pod_manifest("dry"), dry_run="All")
    assert created.metadata.name == "dry"
    assert core.list_namespaced_pod(namespace).items == []


def test_cluster_scoped_queue_crud(custom: k8s.CustomObjectsApi) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "crud-q"},
        "spec": {"capability": {"nvidia.com/gpu": 4}},
    }
    created = custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
    assert "namespace" not in created["metadata"]
    assert created["spec"]["weight"] == 1  # schema default
    assert created["spec"]["dequeueStrategy"] == "traverse"
    names = [
        q["metadata"]["name"]
        for q in custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")["items"]
    ]
    assert "crud-q" in names
    custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "crud-q")


def test_core_list_items_carry_kind_only_on_the_list(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("j"))
    pods = call(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods")
    jobs = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert (pods["kind"], pods["apiVersion"]) == ("PodList", "v1")
    assert "kind" not in pods["items"][0]
    assert (jobs["kind"], jobs["items"][0]["kind"]) == ("PyTorchJobList", "PyTorchJob")
    assert int(pods["metadata"]["resourceVersion"]) >= int(pods["items"][0]["metadata"]["resourceVersion"])


def test_default_and_kube_system_exist(core: k8s.CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system"} <= names
    assert core.read_namespace("default").status.phase == "Active"
