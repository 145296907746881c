"""Fixtures for the disruption tests: one simulated cluster per module (node failures start their
own), with the official client and a namespace per test from tests/sim/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.cluster import SimCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    # A short node grace period (the default is 10 s): these tests fail nodes on purpose.
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, node_monitor_grace_period=2.0) as running:
        yield running


@pytest.fixture(scope="module")
def apiserver(cluster: SimCluster) -> ApiServerHandle:
    assert cluster.apiserver is not None
    return cluster.apiserver
