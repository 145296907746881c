"""``@task.vcjob`` end to end: DAGs run with ``dag.test()`` on the embedded cluster's process runtime.

The Volcano Job's pods are real local processes (Job -> PodGroup -> pods, whose command the
kubelet runs), so the function's source really travels in the pod's environment, Volcano's
``pytorch`` plugin gives each pod ``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK``, DDP
really rendezvouses, and rank 0's value comes back through the master's pod log.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gang_sim.cluster import SimCluster
from tests.metadata import xcom_value
from tests.support.dag_runs import task_states

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="needs the [train] extra (pip install -e '.[train]'): torch not installed",
)
pytestmark = pytest.mark.usefixtures("kube_connection")
# The interpreter the venv was made from: plain Python, without torch or Airflow.
PLAIN_PYTHON = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """Overrides the conftest cluster: the process runtime, which runs each pod's command."""
    with SimCluster(
        nodes=2, gpus_per_node=0, cpus_per_node=4, schedule_period=0.2, runtime="process"
    ) as running:
        yield running


def xcom(dag_run: Any, task_id: str, *, key: str = "return_value") -> Any:
    return xcom_value(dag_run.dag_id, dag_run.run_id, task_id, key=key, map_index=-1)


RANKS_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def base() -> int:
        return 10

    @task.vcjob(
        python=__PYTHON__,
        image="python:3.11-slim",
        workers=2,
        resources={"cpu": 1, "memory": "512Mi"},
        poll_interval=0.2,
        admission_timeout=120,
        delete_on_finish="always",
    )
    def ranks(base: int, labels: dict) -> dict:
        import os

        rank = int(os.environ["RANK"])
        print(f"rank {rank} of {os.environ['WORLD_SIZE']} on task {os.environ.get('VC_TASK_INDEX')}")
        return {
            "rank": rank,
            "world_size": int(os.environ["WORLD_SIZE"]),
            "value": base + rank,
            "labels": labels,
        }

    @task
    def downstream(result: dict) -> dict:
        return {"doubled": result["value"] * 2, "from_rank": result["rank"]}

    downstream(ranks(base(), labels={"run": "{{ run_id }}"}))
"""


@pytest.mark.timeout(120)
def test_a_function_runs_on_every_pod_and_rank_0s_value_goes_downstream(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """On plain Python pods: the pytorch plugin numbers master 0 and workers 1..2; the value is
    the master's (rank 0), an XComArg and a templated argument in."""
    dag = write_dag(RANKS_DAG, python=PLAIN_PYTHON)

    dag_run = dag.test()

    output = capfd.readouterr().out
    states = task_states(dag_run)
    assert states == {"base": "success", "ranks": "success", "downstream": "success"}, output[-5000:]
    assert xcom(dag_run, "ranks") == {
        "rank": 0,
        "world_size": 3,
        "value": 10,
        "labels": {"run": dag_run.run_id},
    }
    assert xcom(dag_run, "downstream") == {"doubled": 20, "from_rank": 0}
    job = xcom(dag_run, "ranks", key="job_result")
    assert job["state"] == "succeeded"
    assert job["replicas"] == {"master": 1, "worker": 2}
    assert job["podgroup"] == f"{job['name']}-{job['uid']}"
    assert "rank 0 of 3" in output  # rank 0's log, in the task log


ALLREDUCE_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task.vcjob(
        python=__PYTHON__,
        image="python:3.11-slim",
        workers=1,
        resources={"cpu": 1, "memory": "1Gi"},
        poll_interval=0.2,
        admission_timeout=120,
        delete_on_finish="always",
    )
    def allreduce() -> dict:
        import torch
        import torch.distributed as dist

        rank = dist.get_rank()
        total = torch.tensor([float(10 + rank)])
        dist.all_reduce(total)
        return {"rank": rank, "world_size": dist.get_world_size(), "sum": total.item()}

    allreduce()
"""


@needs_torch
@pytest.mark.train
@pytest.mark.timeout(120)
def test_a_function_runs_ddp_over_the_pytorch_plugins_rendezvous(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    dag = write_dag(ALLREDUCE_DAG, python=sys.executable)

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {"allreduce": "success"}, output[-5000:]
    # 10 + 11: both pods took part in the all-reduce; the value is rank 0's (the master's).
    assert xcom(dag_run, "allreduce") == {"rank": 0, "world_size": 2, "sum": 21.0}


FAILING_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task.vcjob(
        python=__PYTHON__,
        image="python:3.11-slim",
        workers=1,
        resources={"cpu": 1, "memory": "512Mi"},
        poll_interval=0.2,
        admission_timeout=60,
        delete_on_finish="always",
        policies=[{"event": "PodFailed", "action": "AbortJob"}],
    )
    def load_shard(limit: int) -> int:
        import os

        rank = int(os.environ["RANK"])
        if rank == 1:
            raise ValueError(f"rank {rank} found no shard under {limit}")
        import time

        time.sleep(30)  # rank 0 waits: the worker's failure ends the job
        return rank

    load_shard(3)
"""


@pytest.mark.timeout(120)
def test_a_function_raising_on_one_pod_fails_the_task_naming_the_function_task_and_index(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """The worker raises; its pod fails (restartPolicy Never) and the job's PodFailed -> AbortJob
    policy ends the job: the task fails with the worker's error, its traceback, task and index."""
    dag = write_dag(FAILING_DAG, python=PLAIN_PYTHON)

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {"load_shard": "failed"}, output[-5000:]
    assert re.search(
        r"VolcanoJobFailed: @task.vcjob load_shard\(\) failed on task worker, index 0 "
        r".*load_shard\(\) raised ValueError: rank 1 found no shard under 3",
        output,
    ), output[-5000:]
    assert 'raise ValueError(f"rank {rank} found no shard under {limit}")' in output  # its traceback
