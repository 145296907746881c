"""deploy/rbac.yaml grants exactly what the hooks use: airflow_gang.hooks.REQUIRED_PERMISSIONS, plus
the UI page's cluster-wide capacity reads in its ClusterRole (`CLUSTER_READ_PERMISSIONS`).

REQUIRED_PERMISSIONS itself is proven against the requests the hooks really make
(tests/provider/test_hooks.py), so equality here means the Role neither misses a permission
(a 403 in production) nor grants one the provider never needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_gang.hooks import REQUIRED_PERMISSIONS
from airflow_gang.hooks.kinds import CLUSTER_TRAINING_RUNTIMES, QUEUES, TRAINING_RUNTIMES
from airflow_gang.plugins.capacity_reader import CLUSTER_READ_PERMISSIONS

RBAC_FILE = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
RBAC_API = "rbac.authorization.k8s.io/v1"
Permission = tuple[str, str, str]

# Cluster-scoped resources cannot be granted by a namespaced Role.
CLUSTER_SCOPED = {(kind.group, kind.plural) for kind in (QUEUES, CLUSTER_TRAINING_RUNTIMES)}


def documents() -> list[dict[str, Any]]:
    loaded = [doc for doc in yaml.safe_load_all(RBAC_FILE.read_text(encoding="utf-8")) if doc is not None]
    assert all(isinstance(doc, dict) for doc in loaded)
    return loaded


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents() if doc["kind"] == kind]


def granted(role: dict[str, Any]) -> set[Permission]:
    """Every (apiGroup, resource, verb) a Role or ClusterRole grants, expanded rule by rule."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_every_document_is_an_rbac_object() -> None:
    kinds = []
    for doc in documents():
        assert doc["apiVersion"] == RBAC_API
        assert doc["metadata"]["name"]
        kinds.append(doc["kind"])
        if doc["kind"] in ("Role", "RoleBinding"):
            assert doc["metadata"]["namespace"]
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in doc["metadata"]
    assert sorted(kinds) == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]


def test_roles_grant_exactly_the_required_permissions() -> None:
    (role,) = of_kind("Role")
    (cluster_role,) = of_kind("ClusterRole")
    required = set(REQUIRED_PERMISSIONS)
    namespaced = {p for p in required if (p[0], p[1]) not in CLUSTER_SCOPED}
    assert granted(role) == namespaced
    assert required - namespaced == {
        ("scheduling.volcano.sh", "queues", "get"),
        ("scheduling.volcano.sh", "queues", "list"),
        ("trainer.kubeflow.org", "clustertrainingruntimes", "get"),
    }
    assert granted(cluster_role) == (required - namespaced) | set(CLUSTER_READ_PERMISSIONS)
    assert set(CLUSTER_READ_PERMISSIONS) == {
        ("", "nodes", "list"),
        ("", "pods", "list"),
        ("scheduling.k8s.io", "priorityclasses", "list"),
    }


def test_rules_use_no_wildcards_or_names() -> None:
    for role in (*of_kind("Role"), *of_kind("ClusterRole")):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], rule
            assert "resourceNames" not in rule
            assert "nonResourceURLs" not in rule


@pytest.mark.parametrize(
    ("binding_kind", "role_kind"), [("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")]
)
def test_each_binding_grants_its_role_to_a_service_account(binding_kind: str, role_kind: str) -> None:
    (binding,) = of_kind(binding_kind)
    (role,) = of_kind(role_kind)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": role["metadata"]["name"],
    }
    if binding_kind == "RoleBinding":
        assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    (subject,) = binding["subjects"]
    assert subject["kind"] == "ServiceAccount"
    assert subject["name"]
    assert subject["namespace"]
    assert "apiGroup" not in subject  # ServiceAccount subjects belong to the core group


def test_both_bindings_name_the_same_service_account() -> None:
    (namespaced,) = of_kind("RoleBinding")
    (cluster,) = of_kind("ClusterRoleBinding")
    assert namespaced["subjects"] == cluster["subjects"]


def test_the_scopes_assumed_here_are_the_kinds_own() -> None:
    assert not QUEUES.namespaced
    assert not CLUSTER_TRAINING_RUNTIMES.namespaced
    assert TRAINING_RUNTIMES.namespaced


def test_trainjobs_get_the_same_lifecycle_verbs_as_pytorchjobs() -> None:
    """TrainJobOperator goes through the same submit/take-over/wait/delete/suspend steps."""
    (role,) = of_kind("Role")
    verbs: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb in granted(role):
        verbs.setdefault((group, resource), set()).add(verb)
    assert verbs[("trainer.kubeflow.org", "trainjobs")] == verbs[("kubeflow.org", "pytorchjobs")]
    assert verbs[("trainer.kubeflow.org", "trainingruntimes")] == {"get"}
