"""Defaulting, validation (422) and admission webhooks (403/400) as a real cluster applies them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import pod_manifest, podgroup_manifest, pytorchjob_manifest, status_of

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
VOLCANO, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
PYTORCH_WEBHOOK = (
    'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
)
PODGROUP_WEBHOOK = 'admission webhook "validatepodgroup.volcano.sh" denied the request: '


def rejected(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(k8s.ApiException) as caught:
        call(*args)
    return status_of(caught.value)


def make_queue(custom: k8s.CustomObjectsApi, name: str, state: str | None) -> None:
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
    if state is not None:
        custom.patch_cluster_custom_object_status(
            VOLCANO, VOLCANO_VERSION, "queues", name, {"status": {"state": state}}
        )


# --- pods -------------------------------------------------------------------------------------------


def test_new_pod_gets_the_defaults_clients_see(core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("p")
    body["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1, "cpu": "1", "memory": "1Gi"}
    }
    body["status"] = {"phase": "Running"}
    pod = core.create_namespaced_pod(namespace, body)
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "Guaranteed"
    spec = pod.spec
    assert (spec.restart_policy, spec.scheduler_name, spec.dns_policy) == (
        "Always",
        "default-scheduler",
        "ClusterFirst",
    )
    assert spec.termination_grace_period_seconds == 30
    assert spec.priority == 0
    assert spec.containers[0].resources.requests == {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    assert spec.containers[0].image_pull_policy == "IfNotPresent"


def test_pod_keeps_what_it_was_given(core: k8s.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(
        namespace, pod_manifest("p", restartPolicy="Never", schedulerName="volcano", dnsPolicy="Default")
    )
    assert (pod.spec.restart_policy, pod.spec.scheduler_name, pod.spec.dns_policy) == (
        "Never",
        "volcano",
        "Default",
    )


def test_pod_without_containers_is_422_naming_the_field(core: k8s.CoreV1Api, namespace: str) -> None:
    status = rejected(
        core.create_namespaced_pod, namespace, {"metadata": {"name": "p"}, "spec": {"containers": []}}
    )
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == 'Pod "p" is invalid: spec.containers: Required value'
    assert status["details"]["kind"] == "Pod"
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.containers"]


def test_pod_spec_is_immutable_except_images(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    image = core.patch_namespaced_pod(
        "p", namespace, {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}
    )
    assert image.spec.containers[0].image == "busybox:2"
    status = rejected(core.patch_namespaced_pod, "p", namespace, {"spec": {"restartPolicy": "Never"}})
    assert status["code"] == 422
    assert status["details"]["causes"][0]["field"] == "spec"
    assert status["details"]["causes"][0]["reason"] == "FieldValueForbidden"


def test_invalid_names_and_labels_are_422(core: k8s.CoreV1Api, namespace: str) -> None:
    status = rejected(core.create_namespaced_pod, namespace, pod_manifest("Bad_Name"))
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert "RFC 1123 subdomain" in status["details"]["causes"][0]["message"]
    status = rejected(core.create_namespaced_pod, namespace, pod_manifest("p", labels={"ok": "not ok!"}))
    assert status["details"]["causes"][0]["field"] == "metadata.labels"


def test_priority_class_resolves_into_pod_priority(
    core: k8s.CoreV1Api, namespace: str, api_client: k8s.ApiClient
) -> None:
    scheduling = k8s.SchedulingV1Api(api_client)
    name = f"{namespace}-high"
    scheduling.create_priority_class({"metadata": {"name": name}, "value": 1000})
    try:
        pod = core.create_namespaced_pod(namespace, pod_manifest("p", priorityClassName=name))
        assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "PreemptLowerPriority")
        status = rejected(
            core.create_namespaced_pod, namespace, pod_manifest("q", priorityClassName="missing")
        )
        assert (status["code"], status["reason"]) == (403, "Forbidden")
        assert status["message"] == 'pods "q" is forbidden: no PriorityClass with name missing was found'
    finally:
        scheduling.delete_priority_class(name)


def test_system_priority_classes_exist(api_client: k8s.ApiClient) -> None:
    classes = {
        pc.metadata.name: pc.value for pc in k8s.SchedulingV1Api(api_client).list_priority_class().items
    }
    assert classes["system-node-critical"] == 2000001000


def test_service_gets_a_cluster_ip(core: k8s.CoreV1Api, namespace: str) -> None:
    svc = core.create_namespaced_service(
        namespace, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 23456}], "selector": {"a": "b"}}}
    )
    assert svc.spec.type == "ClusterIP"
    assert svc.spec.cluster_ip.startswith("10.96.")
    assert svc.spec.ports[0].target_port == 23456
    headless = core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "job-master-0"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}},
    )
    assert headless.spec.cluster_ip == "None"


# --- PyTorchJob ---------------------------------------------------------------------------------------


def test_pytorchjob_defaults_port_and_normalises_replica_keys(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = pytorchjob_manifest("norm", workers=2)
    specs = body["spec"]["pytorchReplicaSpecs"]
    body["spec"]["pytorchReplicaSpecs"] = {"master": specs["Master"], "WORKER": specs["Worker"]}
    job = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    ports = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]


def test_string_replicas_fail_the_schema_with_422(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = pytorchjob_manifest("bad")
    body["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "1"
    status = rejected(custom.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "message": 'Invalid value: "string": spec.pytorchReplicaSpecs.Master.replicas in body must be '
            'of type integer: "string"',
            "field": "spec.pytorchReplicaSpecs.Master.replicas",
        }
    ]
    assert status["details"]["group"] == "kubeflow.org"
    assert status["details"]["kind"] == "PyTorchJob"


def test_missing_replica_specs_fail_the_schema(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = pytorchjob_manifest("empty")
    del body["spec"]["pytorchReplicaSpecs"]
    status = rejected(custom.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
    assert (
        status["message"]
        == 'PyTorchJob.kubeflow.org "empty" is invalid: spec.pytorchReplicaSpecs: Required value'
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
            "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"].update(
                Chief=b["spec"]["pytorchReplicaSpecs"]["Worker"]
            ),
            'spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: '
            '"Master", "Worker"',
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
                name="x"
            ),
            "spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must have at "
            "least one container with name pytorch",
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
                image=""
            ),
            "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: Required value: "
            "must be required",
        ),
        (
            lambda b: b["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=0),
            "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1",
        ),
        (
            lambda b: b["metadata"].update(name="1st-job"),
            'metadata.name: Invalid value: "1st-job": should match: a DNS-1035 label must consist of '
            "lower case",
        ),
    ],
    ids=[
        "master-replicas-2",
        "unknown-replica-type",
        "no-pytorch-container",
        "empty-image",
        "zero-workers",
        "not-dns-1035",
    ],
)
def test_pytorchjob_webhook_denies_with_403(
    custom: k8s.CustomObjectsApi, namespace: str, mutate: Any, message: str
) -> None:
    body = pytorchjob_manifest("hook")
    mutate(body)
    status = rejected(custom.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith(PYTORCH_WEBHOOK + message)


def test_worker_only_job_is_accepted_as_upstream(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = pytorchjob_manifest("workers-only")
    del body["spec"]["pytorchReplicaSpecs"]["Master"]
    assert custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)["metadata"]["uid"]


def test_webhook_also_checks_updates(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("upd"))
    status = rejected(
        custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "upd",
        {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 3}}}},
    )
    assert status["code"] == 403


# --- PodGroup and Queue -------------------------------------------------------------------------------


def test_podgroup_in_missing_queue_is_denied(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    status = rejected(
        custom.create_namespaced_custom_object,
        VOLCANO,
        VOLCANO_VERSION,
        namespace,
        "podgroups",
        podgroup_manifest("pg", queue="nowhere"),
    )
    assert status["code"] == 400
    assert "reason" not in status  # Volcano's webhook answers with a bare message
    assert (
        status["message"]
        == PODGROUP_WEBHOOK + 'unable to find queue: queues.scheduling.volcano.sh "nowhere" not found'
    )


def test_podgroup_in_closed_queue_is_denied_and_open_queue_admits(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    closed, fresh = f"{namespace}-closed", f"{namespace}-fresh"
    make_queue(custom, closed, "Closed")
    make_queue(custom, fresh, None)
    try:
        status = rejected(
            custom.create_namespaced_custom_object,
            VOLCANO,
            VOLCANO_VERSION,
            namespace,
            "podgroups",
            podgroup_manifest("pg", queue=closed),
        )
        assert status["message"] == PODGROUP_WEBHOOK + (
            f"can only submit PodGroup to queue with state `Open`, queue `{closed}` status is `Closed`."
        )
        admitted = custom.create_namespaced_custom_object(
            VOLCANO, VOLCANO_VERSION, namespace, "podgroups", podgroup_manifest("pg", queue=fresh)
        )
        assert admitted["spec"]["queue"] == fresh
        # CREATE only: closing the queue later does not block updates of admitted groups.
        make_queue(custom, fresh, "Closed")
        custom.patch_namespaced_custom_object(
            VOLCANO, VOLCANO_VERSION, namespace, "podgroups", "pg", {"spec": {"minMember": 3}}
        )
    finally:
        for name in (closed, fresh):
            custom.delete_cluster_custom_object(VOLCANO, VOLCANO_VERSION, "queues", name)


def test_podgroup_schema_defaults_and_rejects_negative_min_member(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    make_queue(custom, "default", None)
    body = podgroup_manifest("pg")
    del body["spec"]["queue"]
    created = custom.create_namespaced_custom_object(VOLCANO, VOLCANO_VERSION, namespace, "podgroups", body)
    assert created["spec"]["queue"] == "default"
    bad = podgroup_manifest("neg", min_member=-1)
    status = rejected(
        custom.create_namespaced_custom_object, VOLCANO, VOLCANO_VERSION, namespace, "podgroups", bad
    )
    assert status["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "field": "spec.minMember",
        "message": "Invalid value: -1: spec.minMember in body should be greater than or equal to 0",
    }


def test_namespace_queue_annotation_moves_default_podgroups(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    team = f"{namespace}-team"
    make_queue(custom, team, None)
    try:
        core.patch_namespace(
            namespace, {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": team}}}
        )
        created = custom.create_namespaced_custom_object(
            VOLCANO, VOLCANO_VERSION, namespace, "podgroups", podgroup_manifest("pg", queue="default")
        )
        assert created["spec"]["queue"] == team
    finally:
        custom.delete_cluster_custom_object(VOLCANO, VOLCANO_VERSION, "queues", team)
