"""``@task.trainjob`` end to end: DAGs run with ``dag.test()`` on the embedded cluster's process runtime.

The TrainJob's nodes are real local processes (TrainJob → JobSet → indexed Jobs → pods, whose
command the kubelet runs), so the function's source really travels in the node's environment,
the bootstrap really maps Trainer's ``PET_*`` variables onto ``torch.distributed``, DDP really
rendezvouses, and rank 0's value really comes back through rank 0's pod log (a pod found among
the TrainJob's, its name having a random suffix), over the simulator's HTTP API.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from gang_sim.trainer_runtimes import GROUP, PLURAL, VERSION, torch_runtime
from tests.metadata import xcom_value
from tests.support.dag_runs import task_states

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="needs the [train] extra (pip install -e '.[train]'): torch not installed",
)
pytestmark = pytest.mark.usefixtures("kube_connection")

# torch-distributed whose nodes are not restarted: a node's failure fails the TrainJob at once.
FAIL_FAST_RUNTIME = "torch-distributed-fail-fast"
# The interpreter the venv was made from: plain Python, without torch or Airflow.
PLAIN_PYTHON = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """Overrides the conftest cluster: the process runtime, which runs each node's command; and a
    runtime that fails fast (see `fail_fast_runtime`)."""
    with SimCluster(
        nodes=2, gpus_per_node=0, cpus_per_node=4, schedule_period=0.2, runtime="process"
    ) as running:
        with running.api_client() as api:
            objects = k8s.CustomObjectsApi(api)
            objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, fail_fast_runtime())
        yield running


def fail_fast_runtime() -> dict[str, Any]:
    """``torch-distributed`` with ``backoffLimit: 0`` and ``restartPolicy: Never``. The default
    (Trainer's, and Kubernetes' Job defaults: ``OnFailure``, 6 restarts) restarts a node whose
    function raised, with a growing back-off, before the TrainJob fails: a TrainJob cannot patch
    those fields, so a runtime of one's own is how a raising function fails the task at once."""
    runtime = torch_runtime(FAIL_FAST_RUNTIME, gang=True)
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    return runtime


def xcom(dag_run: Any, task_id: str, *, key: str = "return_value") -> Any:
    return xcom_value(dag_run.dag_id, dag_run.run_id, task_id, key=key, map_index=-1)


ALLREDUCE_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def base() -> int:
        return 10

    @task.trainjob(
        python=__PYTHON__,
        num_nodes=2,
        resources_per_node={"cpu": 1, "memory": "1Gi"},
        poll_interval=0.2,
        admission_timeout=120,
    )
    def allreduce(base: int, labels: dict) -> dict:
        import os

        import torch
        import torch.distributed as dist

        rank = dist.get_rank()
        total = torch.tensor([float(base + rank)])
        dist.all_reduce(total)
        print(f"rank {rank}: sum {total.item()}")
        return {
            "rank": rank,
            "node_rank": int(os.environ["PET_NODE_RANK"]),
            "world_size": dist.get_world_size(),
            "sum": total.item(),
            "labels": labels,
        }

    @task
    def downstream(result: dict) -> dict:
        return {"doubled": result["sum"] * 2, "from_rank": result["rank"]}

    downstream(allreduce(base(), labels={"run": "{{ run_id }}"}))
"""


@needs_torch
@pytest.mark.train
@pytest.mark.timeout(120)
def test_a_function_runs_ddp_on_two_trainjob_nodes_and_rank_0s_value_goes_downstream(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """An XComArg and a templated argument in; both nodes all-reduce; rank 0's value is the XCom."""
    dag = write_dag(ALLREDUCE_DAG, python=sys.executable)

    dag_run = dag.test()

    output = capfd.readouterr().out
    states = task_states(dag_run)
    assert states == {"base": "success", "allreduce": "success", "downstream": "success"}, output[-5000:]
    # 10 + 11: both nodes took part in the all-reduce; the value is rank 0's (node 0's).
    assert xcom(dag_run, "allreduce") == {
        "rank": 0,
        "node_rank": 0,
        "world_size": 2,
        "sum": 21.0,
        "labels": {"run": dag_run.run_id},
    }
    assert xcom(dag_run, "downstream") == {"doubled": 42.0, "from_rank": 0}
    job = xcom(dag_run, "allreduce", key="job_result")
    assert job["state"] == "succeeded"
    assert job["replicas"] == {"Node": 2}
    assert xcom(dag_run, "allreduce", key="job_name") == job["name"]
    assert "rank 0: sum 21.0" in output  # rank 0's log, in the task log


FAILING_DAG = """
import datetime as dt
from airflow.sdk import DAG, task

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task.trainjob(
        python=__PYTHON__,
        num_nodes=2,
        resources_per_node={"cpu": 1, "memory": "512Mi"},
        poll_interval=0.2,
        admission_timeout=60,
        delete_on_finish="always",
        runtime=__RUNTIME__,
    )
    def load_shard(limit: int) -> int:
        import os

        rank = int(os.environ["RANK"])
        if rank == 1:
            raise ValueError(f"rank {rank} found no shard under {limit}")
        return rank

    load_shard(3)
"""


@pytest.mark.timeout(120)
def test_a_function_raising_on_one_node_fails_the_task_naming_the_function_and_the_node(
    write_dag: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """On plain Python nodes (no torch): node 1 raises, node 0 returns; the task fails with node 1's error."""
    dag = write_dag(FAILING_DAG, python=PLAIN_PYTHON, runtime=FAIL_FAST_RUNTIME)

    dag_run = dag.test()

    output = capfd.readouterr().out
    assert task_states(dag_run) == {"load_shard": "failed"}, output[-5000:]
    assert re.search(
        r"TrainJobFailed: @task.trainjob load_shard\(\) failed on node 1 \(rank 1, pod \S+, exit code 1\) "
        r"of TrainJob default/load-shard-[0-9a-f]{8}: load_shard\(\) raised ValueError: rank 1 found no "
        r"shard under 3",
        output,
    ), output[-5000:]
    assert 'raise ValueError(f"rank {rank} found no shard under {limit}")' in output  # its traceback
