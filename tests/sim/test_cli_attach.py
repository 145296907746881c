"""The simulator's command line, run as a separate process the way a user runs it.

Attach mode (``sim apiserver`` and ``sim controllers`` in separate processes) is in
``test_attach_mode.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.sim.cli_processes import CliProcesses
from tests.waiting import eventually


@pytest.fixture
def processes() -> Iterator[CliProcesses]:
    with CliProcesses() as started:
        yield started


def test_sim_command_prints_the_kubeconfig_and_the_airflow_connection(
    tmp_path: Path, processes: CliProcesses
) -> None:
    kubeconfig = tmp_path / "k.kubeconfig"
    log = tmp_path / "sim.log"
    sim = processes.start("sim", "--kubeconfig", str(kubeconfig), "--queue", "research=gpu:2", log=log)
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
    assert processes.stop(sim) == 0
    assert "simulated cluster stopped" in log.read_text()
