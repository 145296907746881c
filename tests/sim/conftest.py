"""Fixtures shared by the simulator tests: official-client access to the ``apiserver`` fixture
(each test folder decides how its API server is started) and a fresh namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.apiserver.server import ApiServerHandle


@pytest.fixture(scope="module")
def api_client(apiserver: ApiServerHandle) -> Iterator[k8s.ApiClient]:
    # Module scope: each test folder defines its own session ``apiserver``.
    client = k8s_config.new_client_from_config(config_file=apiserver.kubeconfig_path)
    yield client
    client.close()


@pytest.fixture
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core: k8s.CoreV1Api) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except k8s.ApiException as error:
        if error.status != 404:
            raise
