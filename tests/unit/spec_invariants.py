"""The facts every manifest the builders return must satisfy (``docs/architecture.md#domain-facts``)."""

from __future__ import annotations

from typing import Any

from airflow_gang.model.naming import is_dns_1035_label
from airflow_gang.model.quantity import parse_quantity, sum_resources
from airflow_gang.spec import GangJobSpec, GangScheduling, pod_requests


def _pytorch_container(template: dict[str, Any]) -> dict[str, Any]:
    named = [c for c in template["spec"]["containers"] if c["name"] == "pytorch"]
    assert len(named) == 1, "exactly one container named pytorch"
    return named[0]


def assert_manifest_invariants(spec: GangJobSpec, name: str, namespace: str) -> None:
    job = spec.build_pytorchjob(name, namespace)
    podgroup = spec.build_podgroup(name, namespace)
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["kind"] == "PyTorchJob"
    assert job["metadata"]["name"] == name
    assert job["metadata"]["namespace"] == namespace
    assert is_dns_1035_label(name)

    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) <= {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1
    total = sum(r["replicas"] for r in replicas.values())
    assert total == spec.replica_count

    for replica in replicas.values():
        container = _pytorch_container(replica["template"])
        assert container["image"]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        assert ports["pytorchjob-port"] == spec.master_port
        if "master_port" not in spec.model_fields_set and spec.job_template is None:
            assert ports["pytorchjob-port"] == 23456

    _assert_gang_invariants(spec, name, namespace, job, podgroup)


def _assert_gang_invariants(
    spec: GangJobSpec, name: str, namespace: str, job: dict[str, Any], podgroup: dict[str, Any] | None
) -> None:
    replicas = job["spec"]["pytorchReplicaSpecs"]
    total = sum(r["replicas"] for r in replicas.values())
    pods = replicas.values()
    policy = job["spec"].get("runPolicy", {}).get("schedulingPolicy")
    mode = spec.gang_scheduling
    if mode is GangScheduling.DISABLED:
        assert podgroup is None
        assert policy is None
        for replica in pods:
            template = replica["template"]
            assert template["spec"].get("schedulerName") != "volcano"
            assert "scheduling.k8s.io/group-name" not in template.get("metadata", {}).get("annotations", {})
        return

    expected_min_member = spec.min_available if spec.min_available is not None else total
    assert policy is not None
    assert policy["minAvailable"] == expected_min_member
    assert policy["queue"] == spec.effective_queue
    if spec.priority_class is not None:
        assert policy["priorityClass"] == spec.priority_class
    ordered_pods: list[dict[str, Any]] = []
    for replica_type in ("Master", "Worker"):
        if replica_type in replicas:
            ordered_pods += [pod_requests(replicas[replica_type]["template"])] * replicas[replica_type][
                "replicas"
            ]
    expected_resources = (
        sum_resources([spec.min_resources])
        if spec.min_resources is not None
        else sum_resources(ordered_pods[:expected_min_member])
    )
    assert {k: parse_quantity(v) for k, v in policy["minResources"].items()} == {
        k: parse_quantity(v) for k, v in expected_resources.items()
    }

    if mode is GangScheduling.TRAINING_OPERATOR:
        assert podgroup is None
        return

    assert podgroup is not None
    assert podgroup["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert podgroup["kind"] == "PodGroup"
    assert podgroup["metadata"] == {**podgroup["metadata"], "name": name, "namespace": namespace}
    assert podgroup["spec"]["minMember"] == policy["minAvailable"]
    assert podgroup["spec"]["queue"] == policy["queue"]
    assert podgroup["spec"]["minResources"] == policy["minResources"]
    assert podgroup["spec"].get("priorityClassName") == policy.get("priorityClass")
    for replica in pods:
        template = replica["template"]
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == name
