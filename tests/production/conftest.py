"""A production-shaped Airflow for end-to-end tests (issue 24): PostgreSQL, the CeleryExecutor
with a Redis broker and two Celery workers, two schedulers and two triggerers, with an api-server
and a dag-processor, against an embedded 2 x 2-GPU cluster. A package of its own, after
`tests/realstack`: pytest ends that package's stack before this one starts, so two stacks never
share the 2 cores.

Two of Airflow's production settings are shorter here, so a lost component is noticed in
seconds rather than minutes (both are documented in docs/guides/real-cluster.md):

- ``[scheduler] task_instance_heartbeat_timeout`` 30 s (default 300): a task whose worker died
  is failed (or retried) once its heartbeat is this old;
- ``[scheduler] orphaned_tasks_check_interval`` 10 s (default 300): how often a scheduler adopts
  the queued and running tasks of a scheduler whose heartbeat is 30 s old.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from tests.production.dags import DAG_FILES as PRODUCTION_DAG_FILES

# The real-stack package's `api` and `nothing_left_behind` (autouse) fixtures, for this cluster.
from tests.realstack.conftest import REAPER_INTERVAL, api, nothing_left_behind  # noqa: F401
from tests.realstack.dags import DAG_FILES

SWEEP = "rs_gang_sweep"
HEARTBEAT_TIMEOUT = 30


@pytest.fixture(scope="package")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.5) as running:
        yield running


@pytest.fixture(scope="package")
def stack(cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    dags = tmp_path_factory.mktemp("production-dags")
    files = {SWEEP: DAG_FILES[SWEEP], **PRODUCTION_DAG_FILES}
    for dag_id, source in files.items():
        (dags / f"{dag_id}.py").write_text(source)
    env = {
        "AIRFLOW__GANG__ORPHAN_REAPER_INTERVAL": str(REAPER_INTERVAL),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
    }
    with AirflowStack(
        dags,
        home=tmp_path_factory.mktemp("production-home"),
        database="postgres",
        schedulers=2,
        triggerers=2,
        executor="celery",
        celery_workers=2,
        kubeconfig=cluster.kubeconfig_path,
        extra_env=env,
        parallelism=8,
    ) as running:
        for dag_id in files:
            running.client.wait_for_dag(dag_id, timeout=120)
        yield running
