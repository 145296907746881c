"""What a connection resolves to (`airflow_gang.hooks.connection_identity`) and the pooled client
following it (`LoopClientPool.reload`): a change of server, trust or static credentials is a
change; a new temporary file with the same certificate, or a refreshed exec token, is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio.client import Configuration

from airflow_gang.hooks.client_pool import LoadedConfig, LoopClientPool
from airflow_gang.hooks.connection_identity import (
    client_fingerprint,
    definition_fingerprint,
    kubeconfig_path,
)


def configuration(
    host: str = "https://10.0.0.1:6443", ca: Path | None = None, token: str = "t1"
) -> Configuration:
    built = Configuration()
    built.host = host
    built.ssl_ca_cert = str(ca) if ca else None
    built.api_key = {"authorization": f"Bearer {token}"}
    return built


def test_the_same_certificate_in_another_temporary_file_is_the_same_trust(tmp_path: Path) -> None:
    first, second, rotated = tmp_path / "a.crt", tmp_path / "b.crt", tmp_path / "c.crt"
    first.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n")
    second.write_bytes(first.read_bytes())
    rotated.write_bytes(b"-----BEGIN CERTIFICATE-----\nBBBB\n")

    def of(ca: Path) -> str:
        return client_fingerprint(configuration(ca=ca), reloads_credentials=False)

    assert of(first) == of(second)
    assert of(first) != of(rotated)


def test_a_moved_server_or_a_new_static_token_is_a_change_a_refreshed_exec_token_is_not() -> None:
    base = client_fingerprint(configuration(), reloads_credentials=False)
    assert client_fingerprint(configuration(host="https://10.0.0.2:6443"), reloads_credentials=False) != base
    assert client_fingerprint(configuration(token="t2"), reloads_credentials=False) != base
    exec_auth = client_fingerprint(configuration(), reloads_credentials=True)
    assert client_fingerprint(configuration(token="t2"), reloads_credentials=True) == exec_auth


def test_the_definition_changes_with_the_kubeconfig_file_bytes_and_the_extras(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("server: https://a\n")
    extras = {"kube_config_path": str(kubeconfig)}
    before = definition_fingerprint(extras, {"conn_id": "k8s"})

    assert definition_fingerprint(dict(extras), {"conn_id": "k8s"}) == before
    kubeconfig.write_text("server: https://b\n")  # rewritten in place: same path, same extras
    rewritten = definition_fingerprint(extras, {"conn_id": "k8s"})
    assert rewritten != before
    assert definition_fingerprint({**extras, "cluster_context": "other"}, {"conn_id": "k8s"}) != rewritten


def test_the_kubeconfig_file_is_found_where_the_cncf_hook_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'first'}:{tmp_path / 'second'}")
    assert kubeconfig_path({}, {}) == str(tmp_path / "first")
    assert kubeconfig_path({"kube_config_path": "/conn"}, {}) == "/conn"
    assert kubeconfig_path({"extra__kubernetes__kube_config_path": "/old-style"}, {}) == "/old-style"
    assert kubeconfig_path({"kube_config_path": "/conn"}, {"config_file": "/hook"}) == "/hook"
    assert kubeconfig_path({"kube_config": "apiVersion: v1"}, {}) is None  # inline: in the extras
    assert kubeconfig_path({"in_cluster": True}, {}) is None
    assert kubeconfig_path({}, {"config_dict": {"clusters": []}}) is None


async def test_reload_switches_the_client_only_when_what_it_talks_to_changed() -> None:
    host = {"now": "https://10.0.0.1:6443"}

    def load() -> LoadedConfig:
        return LoadedConfig(configuration(host=host["now"]), reload_credentials=False)

    pool = LoopClientPool(load)
    try:
        first = await pool.client()
        assert await pool.reload(load) == "kept"
        assert await pool.client() is first
        assert pool.generation == 0

        host["now"] = "https://10.0.0.2:6443"
        assert await pool.reload(load) == "switched"
        second = await pool.client()
        assert second is not first
        assert second.configuration.host == "https://10.0.0.2:6443"
        assert pool.generation == 1
    finally:
        await pool.close()


async def test_reload_of_a_pool_without_a_client_builds_one() -> None:
    def load() -> LoadedConfig:
        return LoadedConfig(configuration(), reload_credentials=False)

    pool = LoopClientPool(load)
    try:
        assert await pool.reload(load) == "built"
        assert (await pool.client()).configuration.host == "https://10.0.0.1:6443"
        assert pool.generation == 0  # nothing was in use, so no call has to retry
    finally:
        await pool.close()
