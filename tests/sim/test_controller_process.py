"""The controllers in child processes (`SimCluster(isolate_controllers=True)`).

What a user relies on: the cluster behaves the same (the seed scenario runs in this mode too,
in ``test_seed_scenario.py``), the controllers really run elsewhere, and nothing outlives the
cluster: not on ``stop()``, and not when the process that started it is killed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from kubernetes import client as k8s
from kubernetes.config import new_client_from_config

from gang_sim.cluster import SimCluster, Topology
from gang_sim.controller_process import ControllerProcess, ControllerProcesses
from tests.sim.cli_processes import CliProcesses
from tests.waiting import eventually


def test_the_controllers_run_in_children_that_stop_ends() -> None:
    with SimCluster(nodes=1, gpus_per_node=1, isolate_controllers=True) as cluster:
        assert isinstance(cluster.controllers, ControllerProcesses)
        children = cluster.controllers.pids
        assert len(children) == 2, "Volcano in one process, the other controllers in another"
        assert set(children) <= {p.pid for p in psutil.Process().children()}
        with cluster.api_client() as api:
            nodes = k8s.CoreV1Api(api).list_node().items
            assert [n.metadata.name for n in nodes] == ["sim-node-1"], "the child's kubelet registered"
            queues = k8s.CustomObjectsApi(api).list_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues"
            )
            assert {q["metadata"]["name"] for q in queues["items"]} == {"root", "default"}, "Volcano's"
    assert not any(_alive(pid) for pid in children)


def test_a_child_that_cannot_start_says_why() -> None:
    controllers = ControllerProcess("/nonexistent/kubeconfig", Topology(nodes=1))
    with pytest.raises(RuntimeError, match="controllers failed to start") as failure:
        controllers.start(timeout=5)
    assert "ConfigException: Invalid kube-config file" in str(failure.value), "the child's traceback"
    assert controllers.pid is None, "the failed child was reaped"


def test_the_controllers_stop_when_the_process_that_started_them_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from gang_sim.cluster import SimCluster

            cluster = SimCluster(nodes=1, gpus_per_node=1, isolate_controllers=True).start()
            print(*cluster.controllers.pids, flush=True)
            time.sleep(600)
            """
        )
    )
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        children = [int(pid) for pid in owner.stdout.readline().split()]
        assert len(children) == 2
        assert all(_alive(pid) for pid in children)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        eventually(
            lambda: not any(_alive(pid) for pid in children), timeout=20, message="controller children gone"
        )
    finally:
        owner.kill()
        owner.wait()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_sim_command_isolates_its_controllers_on_request(tmp_path: Path) -> None:
    kubeconfig, log = tmp_path / "sim.kubeconfig", tmp_path / "sim.log"
    with CliProcesses() as processes:
        sim = processes.start(
            "sim", "--nodes", "1", "--isolate-controllers", "--kubeconfig", str(kubeconfig), log=log
        )
        eventually(lambda: "Ctrl-C stops it" in log.read_text(), timeout=60, message="sim ready")
        children = psutil.Process(sim.pid).children()
        assert [c.cmdline()[-1] for c in children] == ["gang_sim.controller_process"] * 2
        with new_client_from_config(config_file=str(kubeconfig)) as api:
            assert [n.metadata.name for n in k8s.CoreV1Api(api).list_node().items] == ["sim-node-1"]
        assert processes.stop(sim) == 0, log.read_text()
        assert not any(_alive(c.pid) for c in children)
