"""Attach mode against an API server that has nothing but the Kubernetes API.

The API server runs alone with its simulator-only endpoints off (``/sim/v1/...`` answers 404
like any path kube-apiserver does not know), and the controllers attach to it in two more
processes, as a user runs them next to a real cluster: one plays the cluster's schedulers
(``--only volcano,kube-scheduler``), the other brings simulated GPU nodes and the
training-operator (``--only training-operator,kubelet``, the documented "simulated nodes next
to a real Volcano"). The seed scenario must complete, the nodes heartbeat through Leases, and
``kubectl logs`` reads a replica's output through the API server's proxy to its node.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.controllers.kubelet.script_runtime import default_lines
from tests.sim.cli_processes import CliProcesses
from tests.sim.kubectl_binaries import find_kubectls
from tests.sim.seed import JOBS, run_to_completion, seed_spec, submit
from tests.waiting import eventually


@pytest.fixture
def processes() -> Iterator[CliProcesses]:
    with CliProcesses() as started:
        yield started


def sim_only_path(kubeconfig: Path, path: str) -> tuple[int, str]:
    """GET a path with the kubeconfig's token, trusting its CA; (status, body)."""
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    context = ssl._create_unverified_context()  # only the status matters here
    request = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def kubectl(kubeconfig: Path, home: Path, *args: str) -> str:
    found = find_kubectls()
    if not found:
        pytest.skip("no kubectl found (see tests/sim/kubectl_binaries.py)")
    result = subprocess.run(
        [found[-1][1], "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_controllers_attached_to_a_bare_kubernetes_api_run_the_seed_scenario_and_serve_logs(
    tmp_path: Path, processes: CliProcesses
) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    apiserver = processes.start(
        "sim",
        "apiserver",
        "--no-sim-endpoints",
        "--kubeconfig",
        str(kubeconfig),
        log=tmp_path / "apiserver.log",
    )
    eventually(kubeconfig.exists, timeout=20, message="apiserver wrote no kubeconfig")
    attach = ("sim", "controllers", "--kubeconfig", str(kubeconfig))
    schedulers = processes.start(
        *attach,
        "--only",
        "volcano,kube-scheduler",
        "--schedule-period",
        "0.2",
        log=tmp_path / "schedulers.log",
    )
    nodes = processes.start(
        *attach,
        "--only",
        "training-operator,kubelet",
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--schedule-period",
        "0.2",
        log=tmp_path / "nodes.log",
    )
    assert sim_only_path(kubeconfig, "/sim/v1/metrics") == (404, "404 page not found\n")
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        eventually(
            lambda: len(core.list_node().items) == 2, timeout=30, message="simulated nodes never registered"
        )
        eventually(
            lambda: custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "default"),
            timeout=30,
        )
        states, most_running = run_to_completion(api, submit(api, seed_spec("provider")), timeout=90)
        assert states == ["Succeeded"] * JOBS, (tmp_path / "nodes.log").read_text()[-3000:]
        assert most_running == 1
        leases = k8s.CoordinationV1Api(api).list_namespaced_lease("kube-node-lease").items
        assert sorted(lease.spec.holder_identity for lease in leases) == ["sim-node-1", "sim-node-2"]
    finally:
        api.close()

    printed = kubectl(kubeconfig, tmp_path, "logs", "seed-3-worker-1")
    # After a "waiting for rendezvous" line if the replica started before its peers.
    assert printed.splitlines()[-3:] == default_lines("seed-3-worker-1", "2", 0)
    assert kubectl(kubeconfig, tmp_path, "logs", "seed-3-master-0", "--tail=1") == "training complete\n"

    for process in (nodes, schedulers, apiserver):
        assert processes.stop(process) == 0
    node_log = (tmp_path / "nodes.log").read_text()
    assert "controllers stopped" in node_log
    assert "failed" not in node_log, node_log[-3000:]  # e.g. "running pod ... failed"
