"""``airflow-gang sim apiserver``: parser wiring, and a real foreground run stopped by signals."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim import cli, cli_cluster
from tests.waiting import eventually


def test_register_adds_sim_apiserver_with_its_options() -> None:
    parser = argparse.ArgumentParser(prog="airflow-gang")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "sim",
            "apiserver",
            "--port",
            "6443",
            "--kubeconfig",
            "k.yaml",
            "--no-auth",
            "--host",
            "0.0.0.0",
            "--crd",
            "a.yaml",
            "--crd",
            "b.yaml",
        ]
    )
    assert args.func is cli.run_apiserver
    assert (args.port, args.kubeconfig, args.no_auth, args.host, args.crd) == (
        6443,
        "k.yaml",
        True,
        "0.0.0.0",
        ["a.yaml", "b.yaml"],
    )
    bare = parser.parse_args(["sim"])
    assert bare.func is cli_cluster.run_cluster, "bare `sim` runs the whole embedded cluster"


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_foreground_server_serves_and_stops_cleanly(tmp_path: Path, stop_signal: signal.Signals) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gang_sim.cli",
            "apiserver",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(kubeconfig.exists, timeout=30, message="kubeconfig written")
        api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        names = {ns.metadata.name for ns in k8s.CoreV1Api(api).list_namespace().items}
        api.close()
        assert "default" in names
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        process.send_signal(stop_signal)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert f"kubeconfig: {kubeconfig}" in out
    assert out.rstrip().endswith("API server stopped")
