"""``SimCluster(tls_sans=..., advertise_url=...)`` and the matching ``airflow-gang sim`` flags.

The container setup needs both: a certificate naming the service, and a kubeconfig naming it
while the simulator's own controllers keep reaching the API server locally.
"""

from __future__ import annotations

import base64
import socket
import ssl
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.config import new_client_from_config

from airflow_gang.cli import build_parser
from gang_sim import SimCluster
from gang_sim.apiserver.server import start_apiserver


def _server_and_ca(kubeconfig_path: str) -> tuple[str, bytes]:
    config = yaml.safe_load(Path(kubeconfig_path).read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"])


def _subject_alt_names(url: str, ca_pem: bytes, server_name: str) -> set[tuple[str, str]]:
    host_port = url.removeprefix("https://")
    host, _, port = host_port.rpartition(":")
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        certificate = tls.getpeercert()
    assert certificate is not None
    return set(certificate["subjectAltName"])


def test_advertised_url_goes_into_the_kubeconfig_and_every_name_into_the_certificate(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    with SimCluster(
        nodes=1,
        gpus_per_node=1,
        kubeconfig_path=kubeconfig,
        tls_sans=["extra-name.test", "10.1.2.3"],
        advertise_url="https://kube-sim:6443",
    ) as cluster:
        assert cluster.kubeconfig_path == str(kubeconfig)
        assert cluster.advertise_url == "https://kube-sim:6443"
        server, ca_pem = _server_and_ca(cluster.kubeconfig_path)
        assert server == "https://kube-sim:6443"
        names = _subject_alt_names(cluster.url, ca_pem, "kube-sim")
        assert {("DNS", "kube-sim"), ("DNS", "extra-name.test"), ("IP Address", "10.1.2.3")} <= names
        # Clients made here (and the controllers, which registered the node) use the local address.
        with cluster.api_client() as api:
            assert [node.metadata.name for node in k8s.CoreV1Api(api).list_node().items] == ["sim-node-1"]


def test_without_the_new_options_the_kubeconfig_names_the_bound_address(tmp_path: Path) -> None:
    with SimCluster(nodes=1, gpus_per_node=1, kubeconfig_path=tmp_path / "sim.kubeconfig") as cluster:
        server, _ = _server_and_ca(cluster.kubeconfig_path)
        assert server == cluster.url == cluster.advertise_url
        assert cluster.url.startswith("https://127.0.0.1:")


def test_sim_command_line_takes_repeated_tls_sans_and_an_advertise_url() -> None:
    args = build_parser().parse_args(
        ["sim", "--tls-san", "kube-sim", "--tls-san", "10.0.0.7", "--advertise-url", "https://kube-sim:6443/"]
    )
    assert args.tls_san == ["kube-sim", "10.0.0.7"]
    assert args.advertise_url == "https://kube-sim:6443"
    defaults = build_parser().parse_args(["sim"])
    assert defaults.tls_san == []
    assert defaults.advertise_url is None


@pytest.mark.parametrize(
    "url",
    [
        "http://kube-sim:6443",
        "kube-sim:6443",
        "https://:6443",
        "https://kube-sim:6443/api",
        "https://kube-sim:99999",
    ],
)
def test_sim_command_line_rejects_an_advertise_url_the_simulator_cannot_serve(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["sim", "--advertise-url", url])
    assert exit_info.value.code == 2
    assert "expected https://HOST[:PORT]" in capsys.readouterr().err


def test_on_every_interface_local_clients_use_the_loopback_address(tmp_path: Path) -> None:
    # What kube-sim does in its container: bind 0.0.0.0, advertise the service name.
    with start_apiserver(
        host="0.0.0.0", kubeconfig_path=tmp_path / "sim.kubeconfig", advertise_url="https://kube-sim:6443"
    ) as handle:
        port = handle.url.rsplit(":", 1)[1]
        assert _server_and_ca(handle.kubeconfig_path)[0] == "https://kube-sim:6443"
        local_server, _ = _server_and_ca(handle.local_kubeconfig_path)
        assert local_server == f"https://127.0.0.1:{port}"
        with new_client_from_config(config_file=handle.local_kubeconfig_path) as api:
            names = {item.metadata.name for item in k8s.CoreV1Api(api).list_namespace().items}
        assert "default" in names
