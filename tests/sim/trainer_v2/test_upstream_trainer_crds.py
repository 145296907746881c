"""What the simulator stores passes the real Trainer v2 and JobSet CRD schemas, and the upstream
examples pass the simulator's own (smaller) schemas: they are never stricter than upstream.

Needs the upstream CRD files beside the checkout (the ``trainer_crds`` fixture, and
``shared_crds`` for Volcano's PodGroup); every test here skips with the reason when they are
absent, as in a user's clone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.apiserver.server import ApiServerHandle, start_apiserver
from gang_sim.controllers.trainer.trainjob_build import build_jobset, build_podgroup
from gang_sim.trainer_runtimes import default_runtimes
from tests.sim.trainer_v2.manifests import JOBSET, TRAINER, VOLCANO, trainjob

# Only the CustomResourceDefinitions: the other files are a Helm template and an example.
CRD_FILES = (
    "trainer.kubeflow.org_trainjobs.yaml",
    "trainer.kubeflow.org_trainingruntimes.yaml",
    "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "jobset.x-k8s.io_jobsets.yaml",
)
PODGROUP_CRD = "scheduling.volcano.sh_podgroups.yaml"


def _custom(handle: ApiServerHandle) -> tuple[k8s.ApiClient, k8s.CustomObjectsApi]:
    client = k8s_config.new_client_from_config(config_file=handle.kubeconfig_path)
    return client, k8s.CustomObjectsApi(client)


@pytest.fixture(scope="module")
def upstream_server(trainer_crds: Path, shared_crds: Path) -> Iterator[ApiServerHandle]:
    """An API server whose Trainer, JobSet and PodGroup schemas are the upstream CRDs."""
    paths = [trainer_crds / name for name in CRD_FILES] + [shared_crds / PODGROUP_CRD]
    with start_apiserver(crd_paths=paths) as handle:
        yield handle


@pytest.fixture(scope="module")
def upstream(upstream_server: ApiServerHandle) -> Iterator[k8s.CustomObjectsApi]:
    client, custom = _custom(upstream_server)
    yield custom
    client.close()


@pytest.fixture(scope="module")
def built_in(trainer_crds: Path) -> Iterator[k8s.CustomObjectsApi]:
    """An API server with the simulator's own schemas (the ``trainer_crds`` skip applies)."""
    with start_apiserver() as handle:
        client, custom = _custom(handle)
        yield custom
        client.close()


def test_the_loaded_schemas_are_the_upstream_ones(upstream_server: ApiServerHandle) -> None:
    registry = upstream_server.state.registry
    info = registry.lookup(*TRAINER, "trainjobs")
    assert info is not None
    assert info.schema is not None
    trainer = info.schema["properties"]["spec"]["properties"]["trainer"]["properties"]
    assert "claims" in trainer["resourcesPerNode"]["properties"]  # upstream ResourceRequirements
    assert "x-kubernetes-validations" in info.schema  # upstream's CEL name rule (not evaluated here)
    jobsets = registry.lookup(*JOBSET, "jobsets")
    assert jobsets is not None
    assert "status" in jobsets.subresources
    assert jobsets.mutators, "the JobSet webhook's defaulting stays with the upstream schema"


def test_the_default_runtimes_and_a_trainjob_pass_the_upstream_schemas(
    upstream: k8s.CustomObjectsApi,
) -> None:
    for runtime in default_runtimes():
        stored = upstream.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
        assert stored["spec"]["mlPolicy"] == runtime["spec"]["mlPolicy"]  # nothing pruned
        assert stored["spec"].get("podGroupPolicy") == runtime["spec"].get("podGroupPolicy")
    body = trainjob("upstream", nodes=4, annotations={"sim.airflow-gang.io/duration": "1"})
    stored = upstream.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
    assert stored["spec"]["trainer"] == body["spec"]["trainer"]
    assert stored["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"  # upstream default
    assert stored["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"


def test_the_jobset_and_podgroup_the_trainer_builds_pass_the_upstream_schemas(
    upstream: k8s.CustomObjectsApi,
) -> None:
    upstream.create_cluster_custom_object(
        *VOLCANO,
        "queues",
        {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "metadata": {"name": "default"}},
    )
    runtime = default_runtimes()[0]
    job = trainjob("built", nodes=3)
    job["metadata"].update(namespace="default", uid="0b6f5a1e-1111-4a4a-9e9e-000000000001")
    jobset = build_jobset(job, runtime)
    stored = upstream.create_namespaced_custom_object(*JOBSET, "default", "jobsets", jobset)
    node = stored["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (node["parallelism"], node["completions"]) == (3, 3)
    env = {item["name"]: item for item in node["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("job-completion-index']")
    assert node["template"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "built"
    podgroup = build_podgroup(job, runtime, jobset)
    stored_group = upstream.create_namespaced_custom_object(*VOLCANO, "default", "podgroups", podgroup)
    assert stored_group["spec"]["minMember"] == 3
    assert stored_group["spec"]["minResources"] == {"cpu": "3", "nvidia.com/gpu": "3"}


def test_a_trainjob_without_runtime_ref_is_refused_by_both_schemas(
    upstream: k8s.CustomObjectsApi, built_in: k8s.CustomObjectsApi
) -> None:
    body = trainjob("no-ref")
    del body["spec"]["runtimeRef"]
    for api in (upstream, built_in):
        with pytest.raises(k8s.ApiException) as caught:
            api.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
        assert caught.value.status == 422
        causes = json.loads(caught.value.body)["details"]["causes"]
        assert {"reason": "FieldValueRequired", "field": "spec.runtimeRef"}.items() <= causes[0].items()


def test_the_upstream_volcano_example_passes_the_built_in_schemas(
    trainer_crds: Path, built_in: k8s.CustomObjectsApi
) -> None:
    documents: list[dict[str, Any]] = [
        d for d in yaml.safe_load_all((trainer_crds / "example.trainjob-volcano.yaml").read_text()) if d
    ]
    kinds = {document["kind"]: document for document in documents}
    sent = kinds["ClusterTrainingRuntime"]
    runtime = built_in.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", sent)
    expected = copy.deepcopy(sent["spec"]["template"])
    expected["spec"]["replicatedJobs"][0].update(groupName="default", replicas=1)  # schema defaults
    assert runtime["spec"]["template"] == expected  # nothing pruned
    stored = built_in.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", kinds["TrainJob"])
    assert stored["spec"]["trainer"] == kinds["TrainJob"]["spec"]["trainer"]
