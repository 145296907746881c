"""kubectl (Debian's 1.20 client, plus any other kubectl on PATH) against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from gang_sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import pod_manifest, pytorchjob_manifest
from tests.sim.kubectl_binaries import find_kubectls

Kubectl = Callable[..., str]


@pytest.fixture(scope="module", params=["debian-1.20", "path"])
def kubectl(
    request: pytest.FixtureRequest, apiserver: ApiServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    available = dict(find_kubectls())
    if request.param == "debian-1.20":
        binary = available.get("v1.20")
        if binary is None:
            pytest.skip(
                "kubectl 1.20 unavailable: needs root, apt-get and dpkg-deb to unpack Debian's "
                "kubernetes-client package"
            )
    else:
        binary = next((b for v, b in available.items() if v != "v1.20"), None)
        if binary is None:
            pytest.skip("no other kubectl version on PATH")
    home = tmp_path_factory.mktemp("kubectl-home")

    def run(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [binary, "--kubeconfig", apiserver.kubeconfig_path, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(home)},  # private discovery cache
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    return run


def test_apply_get_and_delete_a_pytorchjob(
    kubectl: Kubectl, custom: k8s.CustomObjectsApi, namespace: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "job.yaml"
    job = pytorchjob_manifest("kubectl-job")
    manifest.write_text(yaml.safe_dump(job))
    assert "pytorchjob.kubeflow.org/kubectl-job created" in kubectl(
        "apply", "-n", namespace, "-f", str(manifest)
    )
    table = kubectl("get", "pytorchjobs", "-n", namespace)
    assert table.splitlines()[0].split() == ["NAME", "STATE", "AGE"]
    assert table.splitlines()[1].split()[0] == "kubectl-job"
    fetched = json.loads(kubectl("get", "pytorchjob", "kubectl-job", "-n", namespace, "-o", "json"))
    assert fetched["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1

    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    manifest.write_text(yaml.safe_dump(job))
    assert "configured" in kubectl("apply", "-n", namespace, "-f", str(manifest))
    stored = custom.get_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", "kubectl-job"
    )
    assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert stored["metadata"]["generation"] == 2

    assert 'pytorchjob.kubeflow.org "kubectl-job" deleted' in kubectl(
        "delete", "-n", namespace, "-f", str(manifest)
    )
    assert custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")["items"] == []


def test_kubectl_scale_sets_a_pytorchjobs_worker_count(
    kubectl: Kubectl, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", pytorchjob_manifest("scaled", workers=2)
    )
    # Through the scale subresource that discovery lists (autoscaling/v1 Scale).
    assert "pytorchjob.kubeflow.org/scaled scaled" in kubectl(
        "scale", "pytorchjob", "scaled", "-n", namespace, "--replicas=4"
    )
    stored = custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", "scaled")
    assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4


def test_list_pods(kubectl: Kubectl, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("listed-a", nodeName="node-1"))
    core.create_namespaced_pod(namespace, pod_manifest("listed-b"))
    lines = kubectl("get", "pods", "-n", namespace).splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["listed-a", "0/1", "Pending"],
        ["listed-b", "0/1", "Pending"],
    ]
    wide = kubectl("get", "pods", "-n", namespace, "-o", "wide").splitlines()
    assert "node-1" in wide[1]
    assert kubectl("get", "pods", "-n", namespace, "-o", "name").split() == ["pod/listed-a", "pod/listed-b"]
    assert kubectl("get", "pods", "-n", namespace, "-l", "missing=label", "-o", "name").strip() == ""


def test_rejections_reach_kubectl_users(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    job = pytorchjob_manifest("bad-job")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(job))
    with pytest.raises(
        AssertionError, match=r"denied the request: spec\.pytorchReplicaSpecs\[Master\]\.replicas"
    ):
        kubectl("apply", "-n", namespace, "-f", str(manifest))
