"""deploy/README.md stays true to the code: its YAML and connection strings are valid, and it
names every gang mode and every Airflow Variable the example DAGs read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from airflow_gang.spec import GangScheduling
from tests.unit.test_crd_schemas import _schema, pruned_fields

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "deploy" / "README.md"
CODE_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
CONNECTION = re.compile(r"AIRFLOW_CONN_KUBERNETES_DEFAULT='([^']+)'")
DAG_VARIABLE = re.compile(r"""setting\(\s*["'](\w+)["']""")
# The cncf.kubernetes connection extras KubernetesHook reads.
KUBERNETES_EXTRAS = {"in_cluster", "kube_config_path", "kube_config", "namespace", "cluster_context"}


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def yaml_blocks() -> list[Any]:
    return [yaml.safe_load(body) for kind, body in CODE_BLOCK.findall(guide()) if kind == "yaml"]


def test_the_queue_in_the_guide_is_a_valid_volcano_queue(shared_crds: Path) -> None:
    (queue,) = [doc for doc in yaml_blocks() if isinstance(doc, dict) and doc.get("kind") == "Queue"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    schema = _schema(shared_crds, "scheduling.volcano.sh_queues.yaml", "v1beta1")
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
        assert f"gang_{name}" in guide(), f"deploy/README.md does not mention the Variable gang_{name}"
