"""labelSelector, fieldSelector and limit/continue over HTTP."""

from __future__ import annotations

import base64
import json

import pytest
from kubernetes import client as k8s

from gang_sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import pod_manifest, status_of


@pytest.fixture
def labelled_pods(core: k8s.CoreV1Api, namespace: str) -> str:
    for name, labels in {
        "a": {"app": "train", "tier": "gpu"},
        "b": {"app": "train", "tier": "cpu"},
        "c": {"app": "serve"},
        "d": {},
    }.items():
        core.create_namespaced_pod(namespace, pod_manifest(name, labels=labels))
    return namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=train", ["a", "b"]),
        ("app==train", ["a", "b"]),
        ("app!=train", ["c", "d"]),
        ("tier in (gpu,tpu)", ["a"]),
        ("tier notin (gpu)", ["b", "c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("app=train,tier!=gpu", ["b"]),
        ("", ["a", "b", "c", "d"]),
    ],
    ids=["equals", "double-equals", "not-equals", "in", "notin", "exists", "not-exists", "and", "empty"],
)
def test_label_selector_operators(
    core: k8s.CoreV1Api, labelled_pods: str, selector: str, expected: list[str]
) -> None:
    pods = core.list_namespaced_pod(labelled_pods, label_selector=selector).items
    assert [p.metadata.name for p in pods] == expected


def test_bad_label_selector_is_400(core: k8s.CoreV1Api, labelled_pods: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.list_namespaced_pod(labelled_pods, label_selector="app in (train")
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith("unable to parse requirement")


def test_pod_field_selectors(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("bound", nodeName="node-1"))
    core.create_namespaced_pod(namespace, pod_manifest("waiting"))
    core.patch_namespaced_pod_status("bound", namespace, {"status": {"phase": "Running"}})

    def names(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(namespace, field_selector=selector).items]

    assert names("spec.nodeName=node-1") == ["bound"]
    assert names("spec.nodeName=") == ["waiting"]
    assert names("status.phase=Pending") == ["waiting"]
    assert names("status.phase!=Pending,metadata.name=bound") == ["bound"]
    assert names(f"metadata.namespace={namespace}") == ["bound", "waiting"]
    everywhere = core.list_pod_for_all_namespaces(
        field_selector=f"metadata.name=bound,metadata.namespace={namespace}"
    )
    assert [p.metadata.namespace for p in everywhere.items] == [namespace]


def test_event_field_selector_on_involved_object(core: k8s.CoreV1Api, namespace: str) -> None:
    for name, target in (("e1", "pod-a"), ("e2", "pod-b")):
        core.create_namespaced_event(
            namespace,
            {
                "metadata": {"name": name},
                "reason": "Scheduled",
                "involvedObject": {"kind": "Pod", "name": target, "namespace": namespace},
            },
        )
    found = core.list_namespaced_event(namespace, field_selector="involvedObject.name=pod-b")
    assert [e.metadata.name for e in found.items] == ["e2"]


def test_unsupported_field_is_400(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.list_namespaced_pod(namespace, field_selector="spec.hostname=x")
    assert status_of(caught.value)["message"] == "field label not supported: spec.hostname"
    with pytest.raises(k8s.ApiException):
        custom.list_namespaced_custom_object(
            "kubeflow.org", "v1", namespace, "pytorchjobs", field_selector="status.phase=x"
        )


def test_pages_cover_everything_once_with_remaining_count(core: k8s.CoreV1Api, namespace: str) -> None:
    for i in range(7):
        core.create_namespaced_pod(namespace, pod_manifest(f"p{i}"))
    first = core.list_namespaced_pod(namespace, limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4
    seen = [p.metadata.name for p in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_pod(namespace, limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
    assert seen == [f"p{i}" for i in range(7)]


def test_continued_pages_are_a_consistent_snapshot(core: k8s.CoreV1Api, namespace: str) -> None:
    for i in range(4):
        core.create_namespaced_pod(namespace, pod_manifest(f"p{i}", labels={"v": "old"}))
    first = core.list_namespaced_pod(namespace, limit=2)
    core.delete_namespaced_pod("p3", namespace)
    core.create_namespaced_pod(namespace, pod_manifest("p4"))
    core.patch_namespaced_pod("p2", namespace, {"metadata": {"labels": {"v": "new"}}})
    rest = core.list_namespaced_pod(namespace, limit=10, _continue=first.metadata._continue)
    assert [(p.metadata.name, p.metadata.labels["v"]) for p in rest.items] == [("p2", "old"), ("p3", "old")]
    assert rest.metadata._continue is None


def test_label_selected_pages_have_no_remaining_count(core: k8s.CoreV1Api, labelled_pods: str) -> None:
    page = core.list_namespaced_pod(labelled_pods, label_selector="app", limit=1)
    assert [p.metadata.name for p in page.items] == ["a"]
    assert page.metadata._continue
    assert page.metadata.remaining_item_count is None


def test_continue_token_older_than_the_window_is_410_expired(small_window: ApiServerHandle) -> None:
    from kubernetes import config

    api = config.new_client_from_config(config_file=small_window.kubeconfig_path)
    core = k8s.CoreV1Api(api)
    for i in range(3):
        core.create_namespaced_pod("default", pod_manifest(f"old-{i}"))
    first = core.list_namespaced_pod("default", limit=1)
    for i in range(25):  # more writes than the 20-event window keeps
        core.patch_namespaced_pod("old-0", "default", {"metadata": {"labels": {"n": str(i)}}})
    with pytest.raises(k8s.ApiException) as caught:
        core.list_namespaced_pod("default", limit=1, _continue=first.metadata._continue)
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old")
    fresh = status["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(fresh + "=" * (-len(fresh) % 4)))["start"] == "default/old-0"
    resumed = core.list_namespaced_pod("default", _continue=fresh)
    assert [p.metadata.name for p in resumed.items] == ["old-1", "old-2"]
    for i in range(3):
        core.delete_namespaced_pod(f"old-{i}", "default")
    api.close()


def test_garbage_continue_token_is_400(core: k8s.CoreV1Api, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.list_namespaced_pod(namespace, limit=1, _continue="!!!")
    assert status_of(caught.value)["reason"] == "BadRequest"
