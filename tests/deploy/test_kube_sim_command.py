"""kube-sim's exact command from docker-compose.yaml, run here as a process.

Only what ties it to the container changes: the kubeconfig goes to a temporary directory, the
server binds 127.0.0.1 on a free port. Everything else — the advertised URL, the certificate
names, the topology — is the compose file's, so this proves what the Airflow containers will
meet: a kubeconfig naming ``https://kube-sim:6443``, a certificate valid for that name, a
healthcheck that passes, and a clean stop on SIGTERM (what ``docker stop`` sends).
"""

from __future__ import annotations

import base64
import ipaddress
import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.deploy.compose_file import KUBE_SIM, command, kube_sim_arguments, services
from tests.waiting import eventually

CLI = str(Path(sys.executable).parent / "airflow-gang")
READY = re.compile(r"API at https://127\.0\.0\.1:(\d+)")


def _replace_option(argv: list[str], option: str, value: str) -> list[str]:
    assert argv.count(option) == 1, f"{option} should appear once in {argv}"
    index = argv.index(option)
    return [*argv[: index + 1], value, *argv[index + 2 :]]


class RunningSim:
    def __init__(self, process: subprocess.Popen[bytes], log: Path, kubeconfig: Path, port: int):
        self.process, self.log, self.kubeconfig, self.port = process, log, kubeconfig, port

    def read_kubeconfig(self) -> dict[str, Any]:
        loaded = yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8"))
        assert isinstance(loaded, dict)
        return loaded

    def ca_pem(self) -> bytes:
        cluster = self.read_kubeconfig()["clusters"][0]["cluster"]
        return base64.b64decode(cluster["certificate-authority-data"])

    def local_kubeconfig(self, path: Path, server_name: str) -> Path:
        """The written kubeconfig, connecting to 127.0.0.1 while verifying ``server_name``.

        What a container resolving ``kube-sim`` to the simulator's address would do.
        """
        config = self.read_kubeconfig()
        cluster = config["clusters"][0]["cluster"]
        cluster["server"] = f"https://127.0.0.1:{self.port}"
        cluster["tls-server-name"] = server_name
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path


@pytest.fixture
def compose_kube_sim() -> dict[str, Any]:
    return services()[KUBE_SIM]


@pytest.fixture
def running_sim(tmp_path: Path, compose_kube_sim: dict[str, Any]) -> Iterator[RunningSim]:
    argv = command(compose_kube_sim)
    written = kube_sim_arguments(compose_kube_sim).kubeconfig
    kubeconfig = tmp_path / "volume" / Path(written).name
    argv = _replace_option(argv, "--kubeconfig", str(kubeconfig))
    argv = _replace_option(argv, "--host", "127.0.0.1")
    argv = _replace_option(argv, "--port", "0")
    log = tmp_path / "kube-sim.log"
    with log.open("wb") as output:
        process = subprocess.Popen([CLI, *argv[1:]], stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        ready = eventually(
            lambda: process.poll() is None and READY.search(log.read_text(errors="replace")),
            timeout=60,
            interval=0.1,
            message=f"kube-sim never reported ready; log:\n{log.read_text(errors='replace')}",
        )
        yield RunningSim(process, log, kubeconfig, int(ready.group(1)))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def _handshake(port: int, server_name: str, ca_pem: bytes) -> dict[str, Any]:
    """TLS to 127.0.0.1:port as a client that expects ``server_name``; the peer certificate."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        certificate = tls.getpeercert()
    assert certificate is not None
    return certificate


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def test_kube_sim_command_advertises_its_service_name_and_serves_a_certificate_for_it(
    running_sim: RunningSim, compose_kube_sim: dict[str, Any], tmp_path: Path
) -> None:
    args = kube_sim_arguments(compose_kube_sim)
    kubeconfig = running_sim.read_kubeconfig()
    assert kubeconfig["clusters"][0]["cluster"]["server"] == args.advertise_url

    ca_pem = running_sim.ca_pem()
    advertised_host = urlsplit(args.advertise_url).hostname
    assert advertised_host is not None
    for name in {*args.tls_san, advertised_host}:
        certificate = _handshake(running_sim.port, name, ca_pem)  # verifies the name
        kind = "IP Address" if _is_ip(name) else "DNS"
        assert (kind, name) in certificate["subjectAltName"]
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(running_sim.port, "not-kube-sim.example", ca_pem)

    # The cluster behind that name works: the controllers (which use the loopback address, not
    # the advertised one) registered the nodes the command asks for.
    local = running_sim.local_kubeconfig(tmp_path / "as-seen-from-airflow", advertised_host)
    api = k8s_config.new_client_from_config(config_file=str(local))
    try:
        nodes = k8s.CoreV1Api(api).list_node().items
    finally:
        api.close()
    assert len(nodes) == args.nodes


def test_kube_sim_healthcheck_passes_once_the_kubeconfig_is_there(
    running_sim: RunningSim, compose_kube_sim: dict[str, Any], tmp_path: Path
) -> None:
    args = kube_sim_arguments(compose_kube_sim)
    test = compose_kube_sim["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1] == "python"

    def healthcheck(kubeconfig: Path) -> int:
        argv = [sys.executable, *(part.replace(args.kubeconfig, str(kubeconfig)) for part in test[2:])]
        return subprocess.run(argv, check=False, capture_output=True, timeout=60).returncode

    host = urlsplit(args.advertise_url).hostname
    assert host is not None
    assert healthcheck(running_sim.local_kubeconfig(tmp_path / "kubeconfig", host)) == 0
    assert healthcheck(tmp_path / "missing" / "kubeconfig") != 0


def test_kube_sim_stops_cleanly_on_sigterm(running_sim: RunningSim) -> None:
    running_sim.process.send_signal(signal.SIGTERM)
    assert running_sim.process.wait(timeout=20) == 0
    assert "simulated cluster stopped" in running_sim.log.read_text()
