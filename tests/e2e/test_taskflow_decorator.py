"""``@task.pytorchjob`` end to end: DAGs run with ``dag.test()`` on the embedded cluster's process runtime.

The replicas are real local processes (the kubelet runs each pod's command), so the function's
source really travels in the pod's environment, the bootstrap really runs it, DDP really
rendezvouses over ``MASTER_ADDR``/``MASTER_PORT``, and the return value really comes back through
the master's log, over the simulator's HTTP API.

Budget: the whole module adds about a minute to CI. Jobs that need no torch run on the venv's
base interpreter (no torch, no Airflow: it also shows that the replicas need only Python), and
the deferrable case is the mapped sweep of ``dags/sweep_taskflow.py`` rather than a run of its own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gang_sim.cluster import SimCluster
from tests.metadata import xcom_value
from tests.support.dag_runs import task_states

MISSING = [name for name in ("torch", "sklearn") if importlib.util.find_spec(name) is None]
needs_torch = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs the [train] extra (pip install -e '.[train]'): {', '.join(MISSING)} not installed",
)
pytestmark = pytest.mark.usefixtures("kube_connection")

REPO_DAGS = Path(__file__).resolve().parents[2] / "dags"
DAGS_FOLDER = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
# The interpreter the venv was made from: plain Python, without torch or Airflow.
PLAIN_PYTHON = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """Overrides the conftest cluster: the process runtime; a queue too small for any gang."""
    with SimCluster(
        nodes=2,
        gpus_per_node=0,
        cpus_per_node=4,
        schedule_period=0.2,
        runtime="process",
        queues={"tiny": {"cpu": "1"}},
    ) as running:
        yield running


def xcom(dag_run: Any, task_id: str, *, key: str = "return_value", map_index: int = -1) -> Any:
    return xcom_value(dag_run.dag_id, dag_run.run_id, task_id, key=key, map_index=map_index)


ALLREDUCE_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def base() -> int:
        return 10

    @task.pytorchjob(
        image="python:3.12-slim",
        python=__PYTHON__,
        workers=1,
        resources={"cpu": 1, "memory": "1Gi"},
        poll_interval=0.2,
        admission_timeout=120,
    )
    def allreduce(base: int, labels: dict) -> dict:
        import torch
        import torch.distributed as dist

        rank = dist.get_rank()
        total = torch.tensor([float(base + rank)])
        dist.all_reduce(total)
        print(f"rank {rank}: sum {total.item()}")
        return {"rank": rank, "world_size": dist.get_world_size(), "sum": total.item(), "labels": labels}

    allreduce(base(), labels={"run": "{{ run_id }}"})
"""


@needs_torch
@pytest.mark.train
@pytest.mark.timeout(120)
def test_a_function_runs_ddp_on_master_and_worker_and_its_value_is_the_xcom(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """Sync mode: an XComArg and a templated argument in, rank 0's value out; the worker's is ignored."""
    dag = write_dag(ALLREDUCE_DAG, python=sys.executable)

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {"base": "success", "allreduce": "success"}, output[-5000:]
    # 10 + 11: both replicas took part in the all-reduce; the value is rank 0's.
    assert xcom(dag_run, "allreduce") == {
        "rank": 0,
        "world_size": 2,
        "sum": 21.0,
        "labels": {"run": dag_run.run_id},
    }
    job = xcom(dag_run, "allreduce", key="job_result")
    assert job["state"] == "succeeded"
    assert job["replicas"] == {"Master": 1, "Worker": 1}
    assert xcom(dag_run, "allreduce", key="job_name") == job["name"]
    assert "rank 0: sum 21.0" in output  # the master's log, streamed into the task log


@needs_torch
@pytest.mark.train
@pytest.mark.slow  # three DDP trainings; every run trains one (tests/e2e/test_train_digits.py)
@pytest.mark.timeout(180)
def test_the_sweep_example_maps_three_deferred_ddp_trainings_and_picks_the_best(
    airflow_db: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """``dags/sweep_taskflow.py``: ``.partial().expand()``, deferrable, real DDP on digits."""
    target = DAGS_FOLDER / "sweep_taskflow.py"
    shutil.copyfile(REPO_DAGS / "sweep_taskflow.py", target)
    spec = importlib.util.spec_from_file_location("example_sweep_taskflow", target)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rates = [0.0003, 0.003, 0.03]

    dag_run = module.dag.test(run_conf={"python": sys.executable, "learning_rates": rates, "epochs": 2})

    output = capfd.readouterr().out
    states = task_states(dag_run)
    assert states == {
        "learning_rates": "success",
        "train[0]": "success",
        "train[1]": "success",
        "train[2]": "success",
        "pick_best": "success",
    }, output[-5000:]
    results = [xcom(dag_run, "train", map_index=index) for index in range(3)]
    assert [result["lr"] for result in results] == rates
    assert {result["world_size"] for result in results} == {2}
    # Two epochs: the smallest rate has barely moved, the others have learnt the digits.
    assert results[1]["accuracy"] > 0.85
    assert all(0.0 < result["accuracy"] <= 1.0 for result in results)
    best = xcom(dag_run, "pick_best")
    assert best["accuracy"] == max(result["accuracy"] for result in results)
    assert best["runs"] == 3
    jobs = [xcom(dag_run, "train", key="job_result", map_index=index) for index in range(3)]
    assert len({job["name"] for job in jobs}) == 3
    assert all(job["state"] == "succeeded" for job in jobs)
    labels = {
        ti.map_index: ti.rendered_map_index for ti in dag_run.get_task_instances() if ti.task_id == "train"
    }
    assert labels == {0: "lr=0.0003", 1: "lr=0.003", 2: "lr=0.03"}
    assert "[airflow_gang.triggers.gang.GangJobTrigger]" in output  # each waited in the triggerer


FAILURES_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

REPLICAS = dict(
    image="python:3.12-slim",
    python=__PYTHON__,
    workers=1,
    resources={"cpu": 1, "memory": "512Mi"},
    poll_interval=0.2,
    admission_timeout=60,
    delete_on_finish="always",
)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task.pytorchjob(**REPLICAS)
    def raises(limit: int) -> int:
        def check(value):
            if value > limit:
                raise ValueError(f"value {value} is over {limit}")

        check(limit + 1)
        return 0

    @task.pytorchjob(**REPLICAS)
    def returns_a_set() -> set:
        return {"not", "json"}

    @task.pytorchjob(**REPLICAS)
    def takes_a_config(config: dict) -> int:
        return len(config)

    @task.pytorchjob(**REPLICAS)
    def exits_early() -> int:
        import os

        os._exit(0)  # the job succeeds, but no value comes back

    raises(3)
    returns_a_set()
    takes_a_config(config={"layers": [64, {"sizes": {128, 256}}]})
    exits_early()
"""


def test_failures_name_the_function_the_replica_and_the_argument_or_value(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """On plain Python replicas: a traceback, a bad return value, a bad argument, no return value."""
    dag = write_dag(FAILURES_DAG, python=PLAIN_PYTHON)
    dag_file = DAGS_FOLDER / f"{dag.dag_id}.py"

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {
        "raises": "failed",
        "returns_a_set": "failed",
        "takes_a_config": "failed",
        "exits_early": "failed",
    }, output[-5000:]
    # The exception: PyTorchJobFailed with the replica and the function's traceback from its log,
    # pointing at the DAG file's own lines.
    assert "PyTorchJobFailed: @task.pytorchjob raises() failed on replica " in output
    assert "raises() raised ValueError: value 4 is over 3" in output
    assert f'File "{dag_file}", line ' in output
    assert 'raise ValueError(f"value {value} is over {limit}")' in output
    # The return value, checked on rank 0.
    assert (
        "the return value of returns_a_set() is a set, which is not JSON-serializable; "
        "@task.pytorchjob hands the return value back as JSON" in output
    )
    # The argument, checked before anything was sent (the only job submitted was the other two's).
    assert (
        "GangSpecError: argument 'config'['layers'][1]['sizes'] is a set, which is not JSON-serializable: "
        "@task.pytorchjob sends the arguments of takes_a_config() to the replicas as JSON" in output
    )
    assert "PyTorchJob default/takes-a-config" not in output
    # A job that succeeds without handing a value back fails the task, and says where it looked.
    assert re.search(
        r"FunctionReturnValueMissing: PyTorchJob default/exits-early-[0-9a-f]{8} succeeded, but the last "
        r"500 lines of its master replica's log hold no return value of exits_early\(\)",
        output,
    )


ADMISSION_DAG = """
import datetime as dt
from airflow.sdk import DAG, task
from airflow_gang.retry import gang_retry_policy

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task.pytorchjob(
        image="python:3.12-slim",
        python=__PYTHON__,
        workers=1,
        resources={"cpu": 1},
        queue="tiny",
        poll_interval=0.2,
        admission_timeout=2,
        retries=1,
        retry_delay=dt.timedelta(seconds=0),
        retry_policy=gang_retry_policy(admission_retry_delay=0),
    )
    def never_admitted() -> int:
        return 1

    never_admitted()
"""


def test_the_gang_admission_timeout_and_retry_policy_are_the_operators(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """Two replicas of 1 CPU in a queue of 1 CPU: never admitted, deleted, retried once, failed."""
    dag = write_dag(ADMISSION_DAG, python=PLAIN_PYTHON)

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {"never_admitted": "failed"}, output[-5000:]
    (ti,) = dag_run.get_task_instances()
    assert ti.try_number == 2
    assert output.count("GangAdmissionTimeout: PyTorchJob default/never-admitted-") == 2
    assert "was not admitted within 2s of its creation by queue 'tiny'" in output
