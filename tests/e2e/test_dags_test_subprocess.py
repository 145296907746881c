"""A DAG run by ``airflow dags test <dag_id>`` in a subprocess, as a user runs it from a shell.

One ordinary success proves the CLI path: its own interpreter, the connection from the
environment, the master log in its output, the trigger run inline. Six jobs submitted at once
(with and without gangs) run under a real scheduler in tests/realstack/test_deployment.py, where
the mapped tasks really are concurrent; the process is bounded by a timeout and killed if it
overruns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.support.cluster import delete_job, jobs_of

pytestmark = pytest.mark.usefixtures("kube_connection")
AIRFLOW = Path(sys.executable).parent / "airflow"
PROCESS_TIMEOUT = 240.0
STAGGER = 0.3
EMPTY: dict[str, list[str]] = {"pytorchjobs": [], "podgroups": [], "pods": []}


@dataclass
class DagsTest:
    """One ``airflow dags test`` subprocess, its output in files (no pipe can fill up)."""

    dag_id: str
    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def dags_test(tmp_path: Path, cluster: SimCluster) -> Iterator[Callable[[str], DagsTest]]:
    """Start ``airflow dags test <dag_id>``; every process still running at teardown is killed."""
    started: list[DagsTest] = []

    def start(dag_id: str) -> DagsTest:
        env = os.environ.copy()  # AIRFLOW_HOME, DAGS_FOLDER, SQL_ALCHEMY_CONN, the connection
        assert "AIRFLOW_CONN_KUBERNETES_DEFAULT" in env
        out, err = tmp_path / f"{dag_id}.out", tmp_path / f"{dag_id}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [str(AIRFLOW), "dags", "test", dag_id], stdout=stdout, stderr=stderr, env=env
            )
        run = DagsTest(dag_id, process, out, err)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait(10)
    # A killed process leaves its job behind: delete it, so the leftover check judges the rest.
    with cluster.api_client() as api:
        for run in started:
            for job in jobs_of(api, run.dag_id):
                delete_job(api, job["metadata"]["name"])


def finish(runs: list[DagsTest], timeout: float = PROCESS_TIMEOUT) -> None:
    """Wait for every process (together at most ``timeout`` seconds); kill and fail on overrun."""
    deadline = time.monotonic() + timeout
    for run in runs:
        try:
            run.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in runs:
                if other.process.poll() is None:
                    other.process.kill()
            pytest.fail(
                f"airflow dags test {run.dag_id} still running after {timeout:.0f}s:\n{run.stdout[-3000:]}"
            )


def run_states(dag_id: str) -> tuple[str | None, dict[str, str | None]]:
    """The DAG run's state and its task states, read from the shared metadata database."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        (dag_run,) = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)).all()
        tasks = {
            ti.task_id: str(ti.state) if ti.state else None
            for ti in dag_run.get_task_instances(session=session)
        }
        return (str(dag_run.state) if dag_run.state else None), tasks


def register_dags() -> None:
    """Write the DAGs folder's DAGs to the metadata database once, as ``dag.test()`` does.

    Every ``airflow dags test`` parses the whole folder and inserts the DAGs it does not find in
    the database; six processes doing that at once race on the same new rows (``UNIQUE
    constraint failed``). Registered first, the processes find them and write nothing.
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    manager = DagBundlesManager()  # type: ignore[no-untyped-call]
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        dagbag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(dagbag, bundle.name, bundle.version)


# --- one ordinary success ---------------------------------------------------------------------

SUCCESS_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=True, poll_interval=0.2, admission_timeout=60,
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": "0.5",
            "sim.airflow-gang.io/log": "epoch 1/1\\nMASTER-LOG-MARKER from the CLI run",
        }}},
    )
"""


@pytest.mark.slow  # every run takes `make demo`, which is an `airflow dags test` subprocess too
def test_a_job_succeeds_through_an_airflow_dags_test_subprocess(
    write_dag: Callable[..., Any], dags_test: Callable[[str], DagsTest], api: k8s.ApiClient
) -> None:
    """Deferrable, so the CLI process also runs the trigger (inline, as ``dag.test()`` does)."""
    dag = write_dag(SUCCESS_DAG)
    run = dags_test(dag.dag_id)
    finish([run], timeout=120)
    assert run.process.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "MASTER-LOG-MARKER from the CLI run" in run.stdout
    assert run_states(dag.dag_id) == ("success", {"train": "success"})
