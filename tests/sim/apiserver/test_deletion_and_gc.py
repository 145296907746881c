"""Deletion: propagation policies, finalizers, graceful pod deletion, namespaces, collections."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import pod_manifest, podgroup_manifest, pytorchjob_manifest, status_of
from tests.waiting import eventually

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def owned_by(owner: dict[str, Any], block: bool = True) -> list[dict[str, Any]]:
    meta = owner["metadata"]
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": block,
        }
    ]


def exists(read: Any, *args: Any) -> bool:
    try:
        read(*args)
    except k8s.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture
def job_with_pods(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str) -> dict[str, Any]:
    job = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("job")
    )
    for name in ("job-master-0", "job-worker-0"):
        body = pod_manifest(name)
        body["metadata"]["ownerReferences"] = owned_by(job)
        core.create_namespaced_pod(namespace, body)
    return job


def test_background_deletion_removes_dependents(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str, job_with_pods: dict[str, Any]
) -> None:
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Background"
    )
    assert not exists(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, "job")
    eventually(lambda: core.list_namespaced_pod(namespace).items == [], timeout=5)


def test_orphan_deletion_keeps_dependents_without_the_reference(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str, job_with_pods: dict[str, Any]
) -> None:
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Orphan"
    )
    pods = core.list_namespaced_pod(namespace).items
    assert [p.metadata.name for p in pods] == ["job-master-0", "job-worker-0"]
    assert all(not p.metadata.owner_references for p in pods)


def hold_worker(core: k8s.CoreV1Api, namespace: str) -> None:
    """A finalizer keeps ``job-worker-0`` (a blocking dependent of ``job``) alive."""
    core.patch_namespaced_pod("job-worker-0", namespace, {"metadata": {"finalizers": ["example.com/hold"]}})


def release_worker_and_wait_for_the_job_to_go(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """Drop ``hold_worker``'s finalizer: the foreground deletion of ``job`` completes, no pod left."""
    core.patch_namespaced_pod(
        "job-worker-0", namespace, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/hold"]}}
    )
    eventually(
        lambda: not exists(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, "job"),
        timeout=5,
    )
    assert core.list_namespaced_pod(namespace).items == []


def test_foreground_waits_for_blocking_dependents(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str, job_with_pods: dict[str, Any]
) -> None:
    # A finalizer keeps one dependent alive, so the owner must stay, marked for deletion.
    hold_worker(core, namespace)
    response = custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Foreground"
    )
    assert response["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in response["metadata"]["finalizers"]
    # The collector (asynchronous, as kube-controller-manager's) then deletes the dependents.
    eventually(lambda: not exists(core.read_namespaced_pod, "job-master-0", namespace), timeout=5)
    job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "job")
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"]
    worker = core.read_namespaced_pod("job-worker-0", namespace)
    assert worker.metadata.deletion_timestamp is not None
    release_worker_and_wait_for_the_job_to_go(core, custom, namespace)


def test_a_blocking_dependent_created_during_a_foreground_deletion_is_deleted_too(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str, job_with_pods: dict[str, Any]
) -> None:
    """A controller that has not seen the deletion yet recreates a pod: the owner must not wait for
    it forever (the upstream collector deletes blocking dependents while the owner waits)."""
    hold_worker(core, namespace)
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Foreground"
    )
    eventually(lambda: not exists(core.read_namespaced_pod, "job-master-0", namespace), timeout=5)
    late = pod_manifest("job-master-0")
    late["metadata"]["ownerReferences"] = owned_by(job_with_pods)
    core.create_namespaced_pod(namespace, late)
    eventually(lambda: not exists(core.read_namespaced_pod, "job-master-0", namespace), timeout=5)
    release_worker_and_wait_for_the_job_to_go(core, custom, namespace)


def test_foreground_does_not_wait_for_non_blocking_dependents(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    job = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("job")
    )
    body = pod_manifest("loose")
    body["metadata"]["ownerReferences"] = owned_by(job, block=False)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, body)
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Foreground"
    )
    eventually(
        lambda: not exists(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, "job"),
        timeout=5,
    )
    assert core.read_namespaced_pod("loose", namespace).metadata.deletion_timestamp is not None
    core.patch_namespaced_pod("loose", namespace, {"metadata": {"finalizers": None}})


def test_finalizers_hold_deletion_until_removed(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        pytorchjob_manifest("held", metadata={"finalizers": ["example.com/x"]}),
    )
    marked = custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    assert marked["metadata"]["deletionTimestamp"]
    assert custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")["metadata"][
        "finalizers"
    ]
    with pytest.raises(k8s.ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "held",
            {"metadata": {"finalizers": ["example.com/x", "example.com/y"]}},
        )
    assert caught.value.status == 422  # no new finalizers while deleting
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "held", {"metadata": {"finalizers": None}}
    )
    assert not exists(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, "held")


def test_podgroup_owned_by_job_goes_with_it(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    try:
        custom.create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
        )
    except k8s.ApiException as error:
        if error.status != 409:  # another test made it already
            raise
    custom.create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", podgroup_manifest("job")
    )
    job = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("job")
    )
    custom.patch_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        namespace,
        "podgroups",
        "job",
        {"metadata": {"ownerReferences": owned_by(job)}},
    )
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "job", propagation_policy="Foreground"
    )
    eventually(
        lambda: (
            not exists(
                custom.get_namespaced_custom_object,
                "scheduling.volcano.sh",
                "v1beta1",
                namespace,
                "podgroups",
                "job",
            )
        ),
        timeout=5,
    )


def test_dangling_owner_reference_is_collected(core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("orphan")
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "gone",
            "uid": "00000000-0000-0000-0000-000000000000",
        }
    ]
    core.create_namespaced_pod(namespace, body)
    eventually(lambda: not exists(core.read_namespaced_pod, "orphan", namespace), timeout=5)


def test_bound_pod_deletes_gracefully_until_its_kubelet_confirms(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("bound", nodeName="node-1"))
    core.create_namespaced_pod(namespace, pod_manifest("unbound"))
    core.delete_namespaced_pod("unbound", namespace)
    assert not exists(core.read_namespaced_pod, "unbound", namespace)
    marked = core.delete_namespaced_pod("bound", namespace, grace_period_seconds=20)
    assert marked.metadata.deletion_grace_period_seconds == 20
    assert core.read_namespaced_pod("bound", namespace).metadata.deletion_timestamp is not None
    core.delete_namespaced_pod("bound", namespace, grace_period_seconds=0)  # what a kubelet sends when done
    assert not exists(core.read_namespaced_pod, "bound", namespace)


def test_delete_preconditions(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, pod_manifest("p"))
    with pytest.raises(k8s.ApiException) as caught:
        core.delete_namespaced_pod(
            "p", namespace, body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid="wrong"))
        )
    assert status_of(caught.value)["reason"] == "Conflict"
    core.delete_namespaced_pod(
        "p", namespace, body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=pod.metadata.uid))
    )


def test_bad_propagation_policy_is_422(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    with pytest.raises(k8s.ApiException) as caught:
        core.delete_namespaced_pod("p", namespace, propagation_policy="Sideways")
    assert status_of(caught.value)["code"] == 422


def test_delete_collection_honours_selectors(core: k8s.CoreV1Api, namespace: str) -> None:
    for name, role in (("a", "worker"), ("b", "worker"), ("c", "master")):
        core.create_namespaced_pod(namespace, pod_manifest(name, labels={"role": role}))
    core.delete_collection_namespaced_pod(namespace, label_selector="role=worker")
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace).items] == ["c"]


def test_namespace_deletion_cascades_and_blocks_new_content(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi
) -> None:
    name = "doomed-ns"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_pod(name, pod_manifest("plain"))
    held = pod_manifest("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(name, held)
    custom.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, pytorchjob_manifest("job"))
    core.delete_namespace(name)
    assert core.read_namespace(name).status.phase == "Terminating"
    assert [p.metadata.name for p in core.list_namespaced_pod(name).items] == ["held"]
    assert custom.list_namespaced_custom_object(GROUP, VERSION, name, PLURAL)["items"] == []
    with pytest.raises(k8s.ApiException) as caught:
        core.create_namespaced_pod(name, pod_manifest("late"))
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        f'pods "late" is forbidden: unable to create new content in namespace {name} '
        "because it is being terminated"
    )
    core.patch_namespaced_pod("held", name, {"metadata": {"finalizers": None}})
    eventually(lambda: not exists(core.read_namespace, name), timeout=5)


def test_system_namespaces_cannot_be_deleted(core: k8s.CoreV1Api) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        core.delete_namespace("default")
    status = status_of(caught.value)
    assert (status["code"], status["message"]) == (
        403,
        'namespaces "default" is forbidden: this namespace may not be deleted',
    )
