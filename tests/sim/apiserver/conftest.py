"""Fixtures for API server tests: real servers over HTTPS, the official clients, a namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from airflow_gang.sim.apiserver.server import ApiServerHandle, start_apiserver

# Short enough that bookmark tests run quickly; idle watches in other tests do not ask for them.
BOOKMARK_INTERVAL = 0.5


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ApiServerHandle]:
    with start_apiserver(bookmark_interval=BOOKMARK_INTERVAL) as handle:
        yield handle


@pytest.fixture(scope="session")
def api_client(apiserver: ApiServerHandle) -> Iterator[k8s.ApiClient]:
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


@pytest.fixture
async def async_client(apiserver: ApiServerHandle) -> AsyncIterator[aclient.ApiClient]:
    client = await aconfig.new_client_from_config(config_file=apiserver.kubeconfig_path)
    yield client
    await client.close()


@pytest.fixture(scope="module")
def small_window() -> Iterator[ApiServerHandle]:
    """A server that keeps only 20 events, so tests can outrun the window and see 410s."""
    with start_apiserver(event_window=20) as handle:
        yield handle
