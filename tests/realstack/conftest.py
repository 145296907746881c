"""A real Airflow deployment for end-to-end tests: scheduler (LocalExecutor), dag-processor,
triggerer and api-server from this installation (`gang_stack.AirflowStack`), against an
embedded 2 x 2-GPU cluster, with DAG runs triggered over the REST API.

``dag.test()`` runs mapped tasks one after another and triggers inline; here deferral, the
triggerer, retries, kills and parallel tasks behave as in production. One stack serves the whole
package (starting one takes ~30 s on two cores); every scenario owns its own DAG file, written
before the stack starts, and each test ends with nothing left on the cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from gang_stack.settings import kubernetes_connection
from tests.realstack.dags import DAG_FILES, GANG_FLAG_CONNECTION
from tests.realstack.vcjob_dags import VCJOB_DAG_FILES
from tests.support.benchmarks import benchmark_module
from tests.support.cluster import NOTHING, PODGROUPS, PYTORCHJOBS, leftovers
from tests.waiting import eventually

# Nothing of either job kind: PyTorchJobs, TrainJobs and their JobSets, PodGroups, pods.
EMPTY: dict[str, list[str]] = NOTHING
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs")
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "default", "jobsets")
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = (
    "gang_vs_deadlock",
    "gang_vs_deadlock_trainjob",
    "gang_vs_deadlock_vcjob",
    "param_sweep",
    "retrain_daily",
)
# The scheduler's reaper sweeps this often here (default 30 s) so tests wait seconds, not minutes.
REAPER_INTERVAL = 3
# The chaos engine's DAGs (benchmarks/chaos.py; tests/realstack/test_chaos.py runs it here).
CHAOS_DAG_FILES: dict[str, str] = benchmark_module("chaos").CHAOS_DAG_FILES


@pytest.fixture(scope="package")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.5, queues={"research": None}) as running:
        yield running


@pytest.fixture(scope="package")
def gang_flag_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where `gang_flag_cluster` writes its kubeconfig; the stack's ``kubernetes_gang_flag``
    connection names it from the start (a connection is read when a task runs)."""
    return tmp_path_factory.mktemp("gang-flag") / "kubeconfig"


@pytest.fixture
def gang_flag_cluster(gang_flag_kubeconfig: Path) -> Iterator[SimCluster]:
    """A second 2 x 2-GPU cluster whose training-operator runs with ``--gang-scheduler-name=volcano``
    (the seed's setup), only while the test that needs it runs."""
    with SimCluster(
        nodes=2,
        gpus_per_node=2,
        schedule_period=0.5,
        training_operator_gang="volcano",
        kubeconfig_path=str(gang_flag_kubeconfig),
    ) as running:
        yield running


@pytest.fixture(scope="package")
def stack(
    cluster: SimCluster, gang_flag_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowStack]:
    dags = tmp_path_factory.mktemp("realstack-dags")
    for name, source in {**DAG_FILES, **VCJOB_DAG_FILES, **CHAOS_DAG_FILES}.items():
        (dags / f"{name}.py").write_text(source)
    for example in EXAMPLE_DAGS:  # the repository's example DAGs, as `make airflow` serves them
        shutil.copyfile(REPO / "dags" / f"{example}.py", dags / f"{example}.py")
    env = {
        "AIRFLOW__GANG__ORPHAN_REAPER_INTERVAL": str(REAPER_INTERVAL),
        # The real hold (default 10 s) unless a developer measures without it.
        "AIRFLOW__GANG__RESUME_HOLD_SECONDS": os.environ.get("GANG_REALSTACK_HOLD", "10"),
        f"AIRFLOW_CONN_{GANG_FLAG_CONNECTION.upper()}": kubernetes_connection(gang_flag_kubeconfig),
    }
    # A home under pytest's basetemp (kept for the last runs): the components' logs and task logs
    # stay readable after a failure.
    home = tmp_path_factory.mktemp("realstack-home")
    # On PostgreSQL, as teams run Airflow (issue 24): every real-stack test is production-shaped
    # in its database; the SQLite stack of `make airflow` has its own tests (tests/stack).
    with AirflowStack(
        dags,
        home=home,
        database="postgres",
        kubeconfig=cluster.kubeconfig_path,
        extra_env=env,
        parallelism=8,
    ) as running:
        for dag_id in (*DAG_FILES, *VCJOB_DAG_FILES, *CHAOS_DAG_FILES, *EXAMPLE_DAGS):
            running.client.wait_for_dag(dag_id, timeout=120)
        yield running


@pytest.fixture
def api(cluster: SimCluster) -> Iterator[k8s.ApiClient]:
    with cluster.api_client() as client:
        yield client


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    if "cluster" not in request.fixturenames:
        yield
        return
    cluster: SimCluster = request.getfixturevalue("cluster")
    yield
    with cluster.api_client() as client:
        try:
            eventually(
                lambda: leftovers(client) == EMPTY, timeout=30, message=f"left behind: {leftovers(client)}"
            )
        except AssertionError:
            # Fail this test, not the ones after it: a leaked 600 s job would hold the pool's
            # GPUs and starve every later scenario.
            sweep(client)
            raise


def sweep(client: k8s.ApiClient) -> None:
    """Delete every job, PodGroup and pod a failed test left behind, and wait until they are gone."""
    custom, core = k8s.CustomObjectsApi(client), k8s.CoreV1Api(client)
    left = leftovers(client)
    # Background for TrainJobs: Trainer re-applies the children of one that lingers in a foreground
    # deletion (docs/trainer-v2.md).
    for kind, plural, policy in (
        (PYTORCHJOBS, "pytorchjobs", "Foreground"),
        (TRAINJOBS, "trainjobs", "Background"),
        (JOBSETS, "jobsets", "Background"),
    ):
        for name in left[plural]:
            with contextlib.suppress(k8s.ApiException):
                custom.delete_namespaced_custom_object(*kind, name, body={"propagationPolicy": policy})
    for name in left["podgroups"]:
        with contextlib.suppress(k8s.ApiException):
            custom.delete_namespaced_custom_object(*PODGROUPS, name)
    for name in left["pods"]:
        with contextlib.suppress(k8s.ApiException):
            core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    eventually(lambda: leftovers(client) == EMPTY, timeout=60, message=f"could not sweep {leftovers(client)}")


def stack_dir(stack: AirflowStack) -> Path:
    return stack.home
