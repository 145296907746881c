"""The simulator's command line, run as separate processes the way a user runs them.

Attach mode proves the controllers are ordinary API clients: the API server runs alone in one
process (``airflow-gang sim apiserver``), the controllers in another (``airflow-gang sim
controllers``), and the seed scenario runs through both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.sim.seed import JOBS, run_to_completion, seed_spec, submit
from tests.waiting import eventually

CLI = str(Path(sys.executable).parent / "airflow-gang")


def start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen([CLI, *args], stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy())


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in reversed(started):
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_controllers_attached_to_a_separate_apiserver_run_the_seed_scenario(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    processes.append(
        start("sim", "apiserver", "--kubeconfig", str(kubeconfig), log=tmp_path / "apiserver.log")
    )
    eventually(kubeconfig.exists, timeout=20, message="apiserver wrote no kubeconfig")
    processes.append(
        start(
            "sim",
            "controllers",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            "2",
            "--gpus-per-node",
            "2",
            "--schedule-period",
            "0.2",
            log=tmp_path / "controllers.log",
        )
    )
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
        assert states == ["Succeeded"] * JOBS, (tmp_path / "controllers.log").read_text()[-3000:]
        assert most_running == 1
    finally:
        api.close()
    assert stop(processes[1]) == 0
    assert stop(processes[0]) == 0
    assert "controllers stopped" in (tmp_path / "controllers.log").read_text()


def test_sim_command_prints_the_kubeconfig_and_the_airflow_connection(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    kubeconfig = tmp_path / "k.kubeconfig"
    log = tmp_path / "sim.log"
    processes.append(start("sim", "--kubeconfig", str(kubeconfig), "--queue", "research=gpu:2", log=log))
    eventually(lambda: "Ctrl-C stops it." in log.read_text(), timeout=30)
    text = log.read_text()
    assert f"kubeconfig: {kubeconfig}" in text
    assert "AIRFLOW_CONN_KUBERNETES_DEFAULT=" in text
    assert '"kube_config_path": "' + str(kubeconfig) in text
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        queue = k8s.CustomObjectsApi(api).get_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", "research"
        )
        assert queue["spec"]["capability"] == {"nvidia.com/gpu": "2"}
    finally:
        api.close()
    assert stop(processes[0]) == 0
    assert "simulated cluster stopped" in log.read_text()
