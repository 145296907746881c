"""A production-shaped Airflow for end-to-end tests (issue 24): PostgreSQL, two schedulers and two
triggerers (LocalExecutor), with an api-server and a dag-processor, against an embedded 2 x 2-GPU
cluster. A package of its own, after `tests/realstack`: pytest ends that package's stack before
this one starts, so two stacks never share the 2 cores.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack

# The real-stack package's `api` and `nothing_left_behind` (autouse) fixtures, for this cluster.
from tests.realstack.conftest import REAPER_INTERVAL, api, nothing_left_behind  # noqa: F401
from tests.realstack.dags import DAG_FILES

SWEEP = "rs_gang_sweep"


@pytest.fixture(scope="package")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.5) as running:
        yield running


@pytest.fixture(scope="package")
def stack(cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    dags = tmp_path_factory.mktemp("production-dags")
    (dags / f"{SWEEP}.py").write_text(DAG_FILES[SWEEP])
    env = {"AIRFLOW__GANG__ORPHAN_REAPER_INTERVAL": str(REAPER_INTERVAL)}
    with AirflowStack(
        dags,
        home=tmp_path_factory.mktemp("production-home"),
        database="postgres",
        schedulers=2,
        triggerers=2,
        kubeconfig=cluster.kubeconfig_path,
        extra_env=env,
        parallelism=8,
    ) as running:
        running.client.wait_for_dag(SWEEP, timeout=120)
        yield running
