"""Built manifests against the upstream CRD schemas a real kube-apiserver enforces.

The schemas live in the team's shared folder beside the repository; the tests skip when it is
absent (a user's clone). Two checks per manifest: it validates (types, enums, required), and no
field would be pruned by the apiserver's structural-schema pruning (which would silently drop a
misspelled field instead of rejecting it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from airflow_gang.spec import GangJobSpec
from tests.support.crd_schemas import crd_schema, pruned_fields


@pytest.fixture(scope="module")
def pytorchjob_schema(shared_crds: Path) -> dict[str, Any]:
    return crd_schema(shared_crds, "kubeflow.org_pytorchjobs.yaml", "v1")


@pytest.fixture(scope="module")
def podgroup_schema(shared_crds: Path) -> dict[str, Any]:
    return crd_schema(shared_crds, "scheduling.volcano.sh_podgroups.yaml", "v1beta1")


RICH = GangJobSpec(
    image="ghcr.io/acme/train:1",
    command=["python", "train.py"],
    args=["--epochs", "3"],
    env={"LR": "0.1", "TOKEN": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    workers=3,
    resources={"nvidia.com/gpu": 1, "cpu": "4", "memory": "16Gi"},
    nproc_per_node=2,
    queue="research",
    priority_class="high",
    min_available=2,
    labels={"team": "vision"},
    annotations={"acme.io/owner": "ada"},
    node_selector={"gpu": "a100"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
    volume_mounts=[{"name": "data", "mountPath": "/data"}],
    service_account_name="trainer",
    image_pull_secrets=["regcred"],
    pod_template={"spec": {"hostIPC": True}},
    run_policy={
        "clean_pod_policy": "All",
        "backoff_limit": 2,
        "active_deadline_seconds": 600,
        "ttl_seconds_after_finished": 60,
    },
    restart_policy="ExitCode",
)
SPECS = {
    "seed-provider": GangJobSpec(image="img:1", workers=1, resources={"nvidia.com/gpu": 1}),
    "rich-provider": RICH,
    "training-operator": GangJobSpec(image="img:1", workers=2, gang_scheduling="training-operator"),
    "disabled": GangJobSpec(image="img:1", workers=2, gang_scheduling="disabled"),
}


@pytest.mark.parametrize("spec", list(SPECS.values()), ids=list(SPECS))
def test_pytorchjob_validates_against_the_upstream_crd_and_loses_no_field(
    spec: GangJobSpec, pytorchjob_schema: dict[str, Any]
) -> None:
    job = spec.build_pytorchjob("train-1a2b3c4d", "ml", labels={"airflow-gang.io/managed-by": "airflow-gang"})
    jsonschema.validate(job, pytorchjob_schema)
    assert pruned_fields(job, pytorchjob_schema) == []


@pytest.mark.parametrize("spec", [SPECS["seed-provider"], RICH], ids=["seed", "rich"])
def test_podgroup_validates_against_the_upstream_crd_and_loses_no_field(
    spec: GangJobSpec, podgroup_schema: dict[str, Any]
) -> None:
    podgroup = spec.build_podgroup("train-1a2b3c4d", "ml")
    assert podgroup is not None
    jsonschema.validate(podgroup, podgroup_schema)
    assert pruned_fields(podgroup, podgroup_schema) == []


def test_the_schema_check_itself_catches_a_wrong_type_and_a_misspelled_field(
    pytorchjob_schema: dict[str, Any],
) -> None:
    job = SPECS["seed-provider"].build_pytorchjob("train-1", "ml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError, match="'two' is not of type 'integer'"):
        jsonschema.validate(job, pytorchjob_schema)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    job["spec"]["runPolicy"]["cleanPodPolicyy"] = "All"
    assert pruned_fields(job, pytorchjob_schema) == [".spec.runPolicy.cleanPodPolicyy"]
