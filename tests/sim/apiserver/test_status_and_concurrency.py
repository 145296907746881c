"""Status subresource rules, generation, and optimistic concurrency."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import call, podgroup_manifest, pytorchjob_manifest, status_of

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
VOLCANO, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"


@pytest.fixture
def open_queue(custom: k8s.CustomObjectsApi) -> str:
    name = "default"
    try:
        custom.create_cluster_custom_object(
            VOLCANO,
            VOLCANO_VERSION,
            "queues",
            {
                "apiVersion": f"{VOLCANO}/{VOLCANO_VERSION}",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {},
            },
        )
    except k8s.ApiException as error:
        if error.status != 409:
            raise
    return name


def test_status_in_create_is_dropped_for_status_subresource_kinds(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = pytorchjob_manifest("s")
    body["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert "status" not in created


def test_main_endpoint_ignores_status_and_status_endpoint_ignores_spec(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("s"))
    job["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    via_main = custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "s", job)
    assert "status" not in via_main

    via_main["status"] = {"conditions": [{"type": "Created", "status": "True"}]}
    via_main["spec"]["runPolicy"] = {"backoffLimit": 7}
    via_status = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "s", via_main
    )
    assert via_status["status"]["conditions"][0]["type"] == "Created"
    assert "backoffLimit" not in via_status["spec"].get("runPolicy", {})
    assert via_status["metadata"]["generation"] == 1

    patched = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "s",
        {"status": {"startTime": "2026-01-01T00:00:00Z"}, "spec": {"x": 1}},
    )
    assert patched["status"]["startTime"] == "2026-01-01T00:00:00Z"
    assert "x" not in patched["spec"]


def test_generation_bumps_on_spec_changes_only(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("g"))
    assert job["metadata"]["generation"] == 1
    labelled = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "g", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 1
    status = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "g", {"status": {"conditions": []}}
    )
    assert status["metadata"]["generation"] == 1
    spec = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "g", {"spec": {"runPolicy": {"backoffLimit": 3}}}
    )
    assert spec["metadata"]["generation"] == 2


def test_podgroup_has_no_status_subresource(
    api_client: k8s.ApiClient, custom: k8s.CustomObjectsApi, namespace: str, open_queue: str
) -> None:
    pg = custom.create_namespaced_custom_object(
        VOLCANO,
        VOLCANO_VERSION,
        namespace,
        "podgroups",
        {**podgroup_manifest("pg", open_queue), "status": {"phase": "Pending"}},
    )
    assert pg["status"] == {"phase": "Pending"}  # kept: no status subresource drops it
    pg["status"] = {"phase": "Inqueue"}
    updated = custom.replace_namespaced_custom_object(
        VOLCANO, VOLCANO_VERSION, namespace, "podgroups", "pg", pg
    )
    assert updated["status"]["phase"] == "Inqueue"
    # Without a status subresource upstream counts status as part of the spec for generation.
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(k8s.ApiException) as caught:
        call(
            api_client, "GET", f"/apis/{VOLCANO}/{VOLCANO_VERSION}/namespaces/{namespace}/podgroups/pg/status"
        )
    assert caught.value.status == 404


def test_queue_status_goes_through_its_subresource(custom: k8s.CustomObjectsApi) -> None:
    body = {
        "apiVersion": f"{VOLCANO}/{VOLCANO_VERSION}",
        "kind": "Queue",
        "metadata": {"name": "status-q"},
        "spec": {},
        "status": {"state": "Closed"},
    }
    created = custom.create_cluster_custom_object(VOLCANO, VOLCANO_VERSION, "queues", body)
    try:
        assert "status" not in created
        closed = custom.patch_cluster_custom_object_status(
            VOLCANO, VOLCANO_VERSION, "queues", "status-q", {"status": {"state": "Closed"}}
        )
        assert closed["status"]["state"] == "Closed"
    finally:
        custom.delete_cluster_custom_object(VOLCANO, VOLCANO_VERSION, "queues", "status-q")


def test_stale_update_is_409_conflict_with_upstream_message(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("x"))
    fresh = dict(job, metadata={**job["metadata"], "labels": {"v": "1"}})
    custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "x", fresh)
    job["metadata"]["labels"] = {"v": "2"}
    with pytest.raises(k8s.ApiException) as caught:
        custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "x", job)
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on pytorchjobs.kubeflow.org "x": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_stale_resource_version_in_a_patch_conflicts(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(
        namespace, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(k8s.ApiException) as caught:
        core.patch_namespaced_pod(
            "p",
            namespace,
            {"metadata": {"labels": {"a": "2"}, "resourceVersion": pod.metadata.resource_version}},
        )
    assert caught.value.status == 409


def test_concurrent_writers_of_one_version_have_exactly_one_winner(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    job = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("race")
    )
    outcomes: list[Any] = []
    barrier = threading.Barrier(8)

    def writer(index: int) -> None:
        body = dict(job, metadata={**job["metadata"], "labels": {"writer": str(index)}})
        barrier.wait()
        try:
            custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "race", body)
            outcomes.append("ok")
        except k8s.ApiException as error:
            outcomes.append(error.status)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str) == [409] * 7 + ["ok"]
