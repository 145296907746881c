"""Our objects pass the real upstream CRD schemas, and invalid ones fail them the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.apiserver.server import ApiServerHandle, start_apiserver
from tests.sim.apiserver.helpers import podgroup_manifest, pytorchjob_manifest, status_of

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture(scope="module")
def upstream(shared_crds: Path) -> Iterator[ApiServerHandle]:
    with start_apiserver(crd_paths=sorted(shared_crds.glob("*.yaml"))) as handle:
        yield handle


@pytest.fixture(scope="module")
def upstream_custom(upstream: ApiServerHandle) -> Iterator[k8s.CustomObjectsApi]:
    client = k8s_config.new_client_from_config(config_file=upstream.kubeconfig_path)
    api = k8s.CustomObjectsApi(client)
    api.create_cluster_custom_object(
        *VOLCANO,
        "queues",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )
    yield api
    client.close()


def rejected(api: k8s.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(k8s.ApiException) as caught:
        api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    return status_of(caught.value)


def test_loaded_schemas_replace_the_built_in_ones(upstream: ApiServerHandle) -> None:
    info = upstream.state.registry.lookup(GROUP, VERSION, PLURAL)
    assert info is not None
    assert info.schema is not None
    template = info.schema["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]["additionalProperties"]
    assert (
        "affinity" in template["properties"]["template"]["properties"]["spec"]["properties"]
    )  # upstream PodSpec
    queues = upstream.state.registry.lookup(*VOLCANO, "queues")
    assert queues is not None
    assert queues.short_names == ("q", "queue-v1beta1")
    assert "status" in queues.subresources


def test_valid_pytorchjob_and_podgroup_are_accepted(upstream_custom: k8s.CustomObjectsApi) -> None:
    job = pytorchjob_manifest(
        "valid",
        workers=2,
        runPolicy={
            "cleanPodPolicy": "None",
            "backoffLimit": 3,
            "schedulingPolicy": {
                "queue": "default",
                "minAvailable": 3,
                "minResources": {"nvidia.com/gpu": 3, "cpu": "6"},
            },
        },
    )
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1},
        "requests": {"cpu": "2", "memory": "4Gi"},
    }
    created = upstream_custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    assert created["spec"]["runPolicy"]["suspend"] is False  # upstream schema default
    group = podgroup_manifest("valid", min_member=3)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "3"}
    pg = upstream_custom.create_namespaced_custom_object(*VOLCANO, "default", "podgroups", group)
    assert pg["spec"]["queue"] == "default"


def test_string_replicas_are_rejected_naming_the_field(upstream_custom: k8s.CustomObjectsApi) -> None:
    job = pytorchjob_manifest("strings")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    status = rejected(upstream_custom, job)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.pytorchReplicaSpecs.Master.replicas"]


def test_master_without_containers_is_rejected_naming_the_field(
    upstream_custom: k8s.CustomObjectsApi,
) -> None:
    job = pytorchjob_manifest("hollow-master")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"] = {}
    status = rejected(upstream_custom, job)
    assert status["code"] == 422
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers"
    ]


def test_missing_replica_specs_are_rejected_naming_the_field(upstream_custom: k8s.CustomObjectsApi) -> None:
    job = pytorchjob_manifest("nothing")
    del job["spec"]["pytorchReplicaSpecs"]
    status = rejected(upstream_custom, job)
    assert status["code"] == 422
    assert status["details"]["causes"][0] == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.pytorchReplicaSpecs",
    }


def test_unknown_fields_are_pruned_as_upstream(upstream_custom: k8s.CustomObjectsApi) -> None:
    job = pytorchjob_manifest("pruned")
    job["spec"]["notAField"] = True
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = (
        "typo"
    )
    created = upstream_custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    assert "notAField" not in created["spec"]
    assert (
        "imagePullPolcy"
        not in created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    )


def test_webhooks_still_apply_with_upstream_schemas(upstream_custom: k8s.CustomObjectsApi) -> None:
    job = pytorchjob_manifest("two-masters")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert rejected(upstream_custom, job)["code"] == 403
    with pytest.raises(k8s.ApiException) as caught:
        upstream_custom.create_namespaced_custom_object(
            *VOLCANO, "default", "podgroups", podgroup_manifest("lost", queue="missing")
        )
    assert caught.value.status == 400
