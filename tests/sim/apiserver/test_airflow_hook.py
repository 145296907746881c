"""Airflow's own KubernetesHook, configured through a connection, talks to the simulator."""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s

from gang_sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import pod_manifest, pytorchjob_manifest


def test_kubernetes_hook_gets_and_lists(
    apiserver: ApiServerHandle,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    monkeypatch.setenv(
        "AIRFLOW_CONN_GANG_SIM",
        json.dumps(
            {
                "conn_type": "kubernetes",
                "extra": {"kube_config_path": apiserver.kubeconfig_path, "namespace": namespace},
            }
        ),
    )
    core.create_namespaced_pod(namespace, pod_manifest("hooked", labels={"app": "train"}))
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", pytorchjob_manifest("job")
    )

    hook = KubernetesHook(conn_id="gang_sim")
    assert hook.get_namespace() == namespace
    assert hook.get_pod("hooked", namespace).metadata.labels == {"app": "train"}
    raw = hook.get_namespaced_pod_list(
        label_selector="app=train", namespace=namespace
    )  # an unparsed response
    assert [p["metadata"]["name"] for p in json.loads(raw.data)["items"]] == ["hooked"]
    job = hook.get_custom_object(group="kubeflow.org", version="v1", plural="pytorchjobs", name="job")
    assert job["metadata"]["namespace"] == namespace
    assert {n.metadata.name for n in hook.core_v1_client.list_namespace().items} >= {"default", namespace}
