"""Fixtures for the Volcano Job (vcjob) tests: one embedded cluster per test module, a namespace
per test (from tests/sim/conftest.py).

2 nodes x 2 GPUs: room for one job of 3 GPUs at a time (the gang test needs a pool too small
for two), and a short scheduling period so that enqueue and allocate follow submissions quickly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.cluster import SimCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, queues={"research": None}) as running:
        yield running


@pytest.fixture(scope="module")
def apiserver(cluster: SimCluster) -> ApiServerHandle:
    """The cluster's API server, for the shared ``api_client``/``core``/``custom``/``namespace``."""
    assert cluster.apiserver is not None
    return cluster.apiserver
