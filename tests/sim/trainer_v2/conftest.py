"""Fixtures for the Trainer v2 tests: one embedded cluster per test module (a namespace per test,
from tests/sim/conftest.py), and the upstream Trainer v2 CRD files when they are beside the
checkout (a clear skip otherwise: a user's clone has no ``../shared/crds-trainer-v2``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.cluster import SimCluster

TRAINER_CRDS = Path(__file__).resolve().parents[4] / "shared" / "crds-trainer-v2"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    # 2 nodes x 4 GPUs: room for a few small TrainJobs of one module at once.
    with SimCluster(nodes=2, gpus_per_node=4, schedule_period=0.2, queues={"research": None}) as running:
        yield running


@pytest.fixture(scope="module")
def apiserver(cluster: SimCluster) -> ApiServerHandle:
    """The cluster's API server, for the shared ``api_client``/``core``/``custom``/``namespace``."""
    assert cluster.apiserver is not None
    return cluster.apiserver


@pytest.fixture(scope="session")
def trainer_crds() -> Path:
    """The upstream Trainer v2 and JobSet CRDs (team reference data), or a skip."""
    if not TRAINER_CRDS.is_dir():
        pytest.skip(
            f"upstream Trainer v2 CRD schemas not found at {TRAINER_CRDS} "
            "(only present beside the team checkout)"
        )
    return TRAINER_CRDS
