"""DAGs run by ``airflow dags test <dag_id>`` in subprocesses, as a user runs them from a shell.

One ordinary success proves the CLI path (its own interpreter, the connection from the
environment, the master log in its output). Then the seed scenario concurrently: ``dag.test()``
runs mapped tasks one at a time, so six jobs submitted *at the same time* need six processes.
Each runs its own DAG with one PyTorchJobOperator (Master + 3 Workers, 1 GPU each, on a 4-GPU
pool). A barrier in ``pre_execute`` releases all six submissions together, so the simulated
training-operator (which holds back the pods of jobs that arrive within 0.25 s of each other and
then creates them round-robin, like the real operator's parallel workers) interleaves their pods:

- ``gang_scheduling="disabled"``: the kube-scheduler binds the first four pods in arrival order,
  the masters of four different jobs, and no job can ever start. Each job's admission timeout
  deletes it; as the deleted jobs free GPUs, pending pods of the others are bound in arrival
  order, and the last job standing may happen to get its whole gang before its own deadline. So
  at least five of six time out with `GangAdmissionTimeout`, any other succeeds, and nothing is
  left behind.
- ``gang_scheduling="provider"``: Volcano admits one whole gang at a time; all six succeed.

All processes share the session's SQLite metadata database (the environment carries
``AIRFLOW_HOME``, the DAGs folder and ``SQL_ALCHEMY_CONN``); each is bounded by a timeout and
killed if it overruns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.sim.cluster import SimCluster
from tests.e2e.conftest import leftovers
from tests.e2e.test_scenarios import delete_job, jobs_of
from tests.waiting import eventually

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


# --- the seed scenario, six jobs submitted at once --------------------------------------------

CONCURRENT_DAG = """
import datetime as dt, pathlib, time
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

def all_together(context):
    # Submit only once every process has got this far: the six jobs reach the cluster together.
    folder = pathlib.Path(__BARRIER__)
    (folder / context["dag"].dag_id).touch()
    deadline = time.monotonic() + 120
    while len(list(folder.iterdir())) < __COUNT__:
        if time.monotonic() > deadline:
            raise TimeoutError("the other dags test processes never arrived")
        time.sleep(0.01)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        gang_scheduling=__GANG__, admission_timeout=__ADMISSION_TIMEOUT__, poll_interval=0.2,
        pre_execute=all_together,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "0.5"}}},
    )
"""
JOBS = 6


def run_six_at_once(
    write_dag: Callable[..., Any],
    dags_test: Callable[[str], DagsTest],
    tmp_path: Path,
    *,
    gang: str,
    admission_timeout: float,
) -> list[DagsTest]:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    dags = [
        write_dag(
            CONCURRENT_DAG, barrier=str(barrier), count=JOBS, gang=gang, admission_timeout=admission_timeout
        )
        for _ in range(JOBS)
    ]
    register_dags()
    runs = []
    for dag in dags:
        runs.append(dags_test(dag.dag_id))
        time.sleep(STAGGER)  # only the start-up: the barrier releases the submissions together
    eventually(
        lambda: len(list(barrier.iterdir())) == JOBS or any(run.process.poll() is not None for run in runs),
        timeout=PROCESS_TIMEOUT,
        interval=0.2,
        message="the processes never reached the barrier",
    )
    # From the submissions on, every task must end within its admission timeout plus a margin
    # for deleting its job (disabled) or for the jobs ahead of it in the queue (provider), and
    # for six Airflow processes sharing a loaded 2-core machine (a 30 s margin was seen to overrun).
    finish(runs, timeout=admission_timeout + 60)
    for run in runs:
        assert "database is locked" not in run.stdout + run.stderr
    return runs


def test_six_jobs_at_once_with_gang_scheduling_disabled_deadlock_and_time_out_leaving_nothing(
    write_dag: Callable[..., Any], dags_test: Callable[[str], DagsTest], api: k8s.ApiClient, tmp_path: Path
) -> None:
    runs = run_six_at_once(write_dag, dags_test, tmp_path, gang="disabled", admission_timeout=15)
    outcomes = {run.dag_id: run_states(run.dag_id) for run in runs}
    timed_out = [
        run
        for run in runs
        if outcomes[run.dag_id] == ("failed", {"train": "failed"})
        and run.process.returncode == 1
        and "GangAdmissionTimeout" in run.stdout
    ]
    succeeded = [run for run in runs if outcomes[run.dag_id] == ("success", {"train": "success"})]
    assert len(timed_out) >= JOBS - 1, outcomes
    assert len(timed_out) + len(succeeded) == JOBS, outcomes
    # The deadlock itself: jobs that timed out had some, never all, of their replicas bound.
    partial = [run for run in timed_out if re.search(r"was not admitted .*bound=[123]/4", run.stdout)]
    assert partial, "no timed-out job reported a partially bound gang"
    assert "nodes are available" in "".join(run.stdout for run in timed_out)
    eventually(lambda: leftovers(api) == EMPTY, timeout=20, message=f"left behind: {leftovers(api)}")


def test_six_jobs_at_once_with_provider_gangs_all_succeed(
    write_dag: Callable[..., Any], dags_test: Callable[[str], DagsTest], api: k8s.ApiClient, tmp_path: Path
) -> None:
    runs = run_six_at_once(write_dag, dags_test, tmp_path, gang="provider", admission_timeout=120)
    for run in runs:
        assert run.process.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert run_states(run.dag_id) == ("success", {"train": "success"})
    eventually(lambda: leftovers(api) == EMPTY, timeout=20, message=f"left behind: {leftovers(api)}")
