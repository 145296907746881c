"""kubectl (Debian's 1.20 client, plus any other kubectl on PATH) against the simulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from airflow_gang.sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import pod_manifest, pytorchjob_manifest

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "airflow-gang" / "kubectl-1.20"
EXTRACTED = CACHE / "usr" / "bin" / "kubectl"


def _version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return str(json.loads(out)["clientVersion"]["gitVersion"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return ""


def _debian_kubectl() -> str | None:
    """Debian's ``kubernetes-client`` (kubectl 1.20), unpacked into a private cache directory.

    Unpacking with ``dpkg-deb -x`` instead of ``apt-get install`` avoids clashing with another
    package that owns /usr/bin/kubectl, and leaves the system untouched.
    """
    if EXTRACTED.exists():
        return str(EXTRACTED)
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")) or os.geteuid() != 0:
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = sorted(Path("/var/cache/apt/archives").glob("kubernetes-client_*.deb"))
    for refresh in (False, True):
        if cached:
            break
        if refresh:  # a fresh machine has no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=300, check=False)
        subprocess.run(
            ["apt-get", "download", "kubernetes-client"],
            cwd=CACHE,
            capture_output=True,
            timeout=300,
            check=False,
        )
        cached = sorted(CACHE.glob("kubernetes-client_*.deb"))
    if not cached:
        return None
    subprocess.run(["dpkg-deb", "-x", str(cached[-1]), str(CACHE)], check=True, timeout=120)
    return str(EXTRACTED) if EXTRACTED.exists() else None


def _kubectls() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    debian = _debian_kubectl()
    if debian and _version(debian).startswith("v1.20"):
        found["v1.20"] = debian
    on_path = shutil.which("kubectl")
    if on_path:
        version = _version(on_path)
        if version and not version.startswith("v1.20"):
            found[version] = on_path
    return sorted(found.items())


Kubectl = Callable[..., str]


@pytest.fixture(scope="module", params=["debian-1.20", "path"])
def kubectl(
    request: pytest.FixtureRequest, apiserver: ApiServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    available = dict(_kubectls())
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
