"""Fixtures for API server tests: real servers over HTTPS, the official clients, a namespace per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
import pytest

from gang_sim.apiserver.server import ApiServerHandle, start_apiserver

# Short enough that bookmark tests run quickly; idle watches in other tests do not ask for them.
BOOKMARK_INTERVAL = 0.5


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ApiServerHandle]:
    with start_apiserver(bookmark_interval=BOOKMARK_INTERVAL) as handle:
        yield handle


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
