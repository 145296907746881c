"""The real-cluster guide (docs/guides/real-cluster.md) stays true to the code: its YAML and
connection strings are valid, it names every gang mode and every Airflow Variable the example DAGs
read, and its Kubeflow Trainer v2 material (the runtime patch, the TrainingRuntime, the job name
limits) is what the provider and the upstream CRDs accept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from airflow_gang.exceptions import GangSpecError
from airflow_gang.model.naming import MAX_JOB_NAME_LENGTH
from airflow_gang.operators.train_job import runtime_gang_mode
from airflow_gang.spec import GangScheduling
from airflow_gang.trainjob_spec import (
    DEFAULT_RUNTIME,
    TRAINER_NODE,
    TRAINJOB_API_VERSION,
    check_trainjob_name,
)
from gang_sim.trainer_runtimes import torch_runtime
from tests.support.crd_schemas import crd_schema, pruned_fields

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guides" / "real-cluster.md"
CODE_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
CONNECTION = re.compile(r"AIRFLOW_CONN_KUBERNETES_DEFAULT='([^']+)'")
DAG_VARIABLE = re.compile(r"""setting\(\s*["'](\w+)["']""")
# The cncf.kubernetes connection extras KubernetesHook reads.
KUBERNETES_EXTRAS = {"in_cluster", "kube_config_path", "kube_config", "namespace", "cluster_context"}
RBAC_FILE = REPO / "deploy" / "rbac.yaml"
# Upstream Trainer v2.3.0 CRDs and runtime, beside the team checkout only.
TRAINER_CRDS = REPO.parent / "shared" / "crds-trainer-v2"
RUNTIME_PATCH = re.compile(
    rf"kubectl patch clustertrainingruntime {DEFAULT_RUNTIME} --type=json -p '([^']+)'", re.DOTALL
)
NAME_LIMITS = re.compile(r"at most (\d+) characters with up to (\d+) nodes, or (\d+) with up to (\d+)")


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def yaml_blocks() -> list[Any]:
    return [yaml.safe_load(body) for kind, body in CODE_BLOCK.findall(guide()) if kind == "yaml"]


@pytest.fixture(scope="module")
def trainer_crds() -> Path:
    if not TRAINER_CRDS.is_dir():
        pytest.skip(f"upstream Trainer v2 CRDs not found at {TRAINER_CRDS} (only beside the team checkout)")
    return TRAINER_CRDS


def trainer_schema(crds: Path, plural: str) -> dict[str, Any]:
    return crd_schema(crds, f"trainer.kubeflow.org_{plural}.yaml", TRAINJOB_API_VERSION.split("/")[1])


def json_patch_add(document: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 ``add`` operations applied in place (all the guide's patch uses)."""
    for operation in operations:
        assert operation["op"] == "add", operation
        *parents, last = [
            part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]
        ]
        target = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), operation["value"])
        else:
            target[last] = operation["value"]
    return document


def trainer_pod_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    (job,) = [
        job for job in runtime["spec"]["template"]["spec"]["replicatedJobs"] if job["name"] == TRAINER_NODE
    ]
    spec: dict[str, Any] = job["template"]["spec"]["template"]["spec"]
    return spec


def guide_runtime_patch() -> list[dict[str, Any]]:
    (text,) = RUNTIME_PATCH.findall(guide())
    operations = json.loads(text)
    assert isinstance(operations, list)
    return operations


def test_the_queue_in_the_guide_is_a_valid_volcano_queue(shared_crds: Path) -> None:
    (queue,) = [doc for doc in yaml_blocks() if isinstance(doc, dict) and doc.get("kind") == "Queue"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    schema = crd_schema(shared_crds, "scheduling.volcano.sh_queues.yaml", "v1beta1")
    jsonschema.validate(queue, schema)
    assert pruned_fields(queue, schema) == []
    assert queue["spec"]["capability"]


def test_the_connection_strings_in_the_guide_are_kubernetes_connections() -> None:
    found = CONNECTION.findall(guide())
    assert len(found) >= 2
    for text in found:
        connection = json.loads(text)
        assert connection["conn_type"] == "kubernetes"
        assert set(connection["extra"]) <= KUBERNETES_EXTRAS


def test_the_guide_names_every_gang_mode() -> None:
    for mode in GangScheduling:
        assert f'`"{mode.value}"`' in guide()


def test_the_guide_documents_every_variable_the_example_dags_read() -> None:
    dag_files = sorted((REPO / "dags").glob("*.py"))
    assert {path.stem for path in dag_files} >= {"retrain_daily", "param_sweep", "gang_vs_deadlock"}
    names = {name for path in dag_files for name in DAG_VARIABLE.findall(path.read_text(encoding="utf-8"))}
    assert names, "the example DAGs read no gang_* settings"
    for name in sorted(names):
        assert f"gang_{name}" in guide(), f"the guide does not mention the Variable gang_{name}"


def test_the_runtime_patch_in_the_guide_turns_the_plain_runtime_into_the_gang_one() -> None:
    """On the simulator's runtimes: the plain torch runtime (upstream's shape) patched is exactly
    the gang-scheduled ``torch-distributed`` the simulator tests ran against."""
    plain = torch_runtime(DEFAULT_RUNTIME, gang=False)
    assert runtime_gang_mode(plain) == "disabled"
    patched = json_patch_add(plain, guide_runtime_patch())
    assert patched == torch_runtime(DEFAULT_RUNTIME, gang=True)
    assert runtime_gang_mode(patched) == "trainer"


def test_the_runtime_patch_applies_to_the_upstream_torch_distributed(trainer_crds: Path) -> None:
    # A Helm template: its {{ }} lines are chart values, not YAML.
    template = (trainer_crds / "runtime.torch-distributed.yaml").read_text(encoding="utf-8")
    runtime = yaml.safe_load("\n".join(line for line in template.splitlines() if "{{" not in line))
    assert runtime["metadata"]["name"] == DEFAULT_RUNTIME
    assert runtime_gang_mode(runtime) == "disabled"
    # Index 0 of the patch paths is the trainer's replicated job, as the guide says.
    assert runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] == TRAINER_NODE
    patched = json_patch_add(runtime, guide_runtime_patch())
    assert runtime_gang_mode(patched) == "trainer"
    assert trainer_pod_spec(patched)["schedulerName"] == "volcano"
    schema = trainer_schema(trainer_crds, "clustertrainingruntimes")
    jsonschema.validate(patched, schema)
    assert pruned_fields(patched, schema) == []


def test_the_training_runtime_in_the_guide_is_a_gang_scheduled_runtime_with_a_priority(
    trainer_crds: Path,
) -> None:
    (runtime,) = [
        doc for doc in yaml_blocks() if isinstance(doc, dict) and doc.get("kind") == "TrainingRuntime"
    ]
    assert runtime["apiVersion"] == TRAINJOB_API_VERSION
    schema = trainer_schema(trainer_crds, "trainingruntimes")
    jsonschema.validate(runtime, schema)
    assert pruned_fields(runtime, schema) == []
    assert runtime_gang_mode(runtime) == "trainer"
    pod = trainer_pod_spec(runtime)
    assert pod["schedulerName"] == "volcano"
    assert pod["priorityClassName"]
    assert [container["name"] for container in pod["containers"]] == [TRAINER_NODE]
    # In the namespace the guide's Role is for: a TrainingRuntime is read from the job's namespace.
    (role,) = [
        doc
        for doc in yaml.safe_load_all(RBAC_FILE.read_text(encoding="utf-8"))
        if doc and doc["kind"] == "Role"
    ]
    assert runtime["metadata"]["namespace"] == role["metadata"]["namespace"]
    assert f'runtime="{runtime["metadata"]["name"]}", runtime_kind="TrainingRuntime"' in guide()


def test_the_job_name_limits_in_the_guide_are_the_ones_enforced() -> None:
    assert f"Derived job names are at most {MAX_JOB_NAME_LENGTH} characters" in " ".join(guide().split())
    (found,) = NAME_LIMITS.findall(" ".join(guide().split()))
    first, first_nodes, second, second_nodes = (int(value) for value in found)
    for limit, nodes in ((first, first_nodes), (second, second_nodes)):
        check_trainjob_name("a" * limit, nodes)
        with pytest.raises(GangSpecError):
            check_trainjob_name("a" * (limit + 1), nodes)
    # A derived name fits any gang up to 1000 nodes.
    check_trainjob_name("a" * MAX_JOB_NAME_LENGTH, 1000)
