"""TrainJobOperator end to end: DAG files run with ``dag.test()`` against the embedded cluster's
Kubeflow Trainer v2 (TrainJob → JobSet → Jobs → pods, the Volcano plugin's PodGroup).

Success and failure run twice, waiting in the worker and in the triggerer. The real scheduler +
triggerer runs are in ``tests/realstack``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support.cluster import hold_one_gpu
from tests.support.dag_runs import TRAINJOB_DAG, task_states

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def run(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    *,
    deferrable: bool = False,
    annotations: dict[str, str] | None = None,
    runtime: str = "torch-distributed",
    queue: str | None = "research",
    admission: float = 60,
    nodes: int = 2,
) -> tuple[dict[str, str], dict[str, Any] | None]:
    out = tmp_path / "out.json"
    dag = write_dag(
        TRAINJOB_DAG,
        deferrable=deferrable,
        out=str(out),
        runtime=runtime,
        queue=queue,
        admission=admission,
        nodes=nodes,
        annotations=annotations or {"sim.airflow-gang.io/duration": "0.5"},
    )
    dag_run = dag.test()
    return task_states(dag_run), json.loads(out.read_text()) if out.exists() else None


@MODES
def test_a_trainjob_succeeds_with_its_result_and_rank_0_log(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    annotations = {
        "sim.airflow-gang.io/duration": "0.5",
        "sim.airflow-gang.io/log": "epoch 1/1 loss=0.31\nRANK0-LOG-MARKER accuracy=0.97",
    }
    states, out = run(write_dag, tmp_path, deferrable=deferrable, annotations=annotations)
    assert states == {"train": "success", "record": "success"}
    assert out is not None
    result = out["result"]
    assert result["state"] == "succeeded"
    assert result["replicas"] == {"Node": 2}
    assert result["queue"] == "research"
    assert result["podgroup"] == result["name"] == out["job_name"]
    assert result["metrics"] == {"loss": 0.31, "accuracy": 0.97}
    assert result["queued_seconds"] is not None
    assert result["run_seconds"] is not None
    assert "RANK0-LOG-MARKER" in capfd.readouterr().out


@MODES
def test_a_failing_node_names_its_rank_exit_code_and_log(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    annotations = {
        "sim.airflow-gang.io/duration": "0.3",
        "sim.airflow-gang.io/exit-code": "3",
        "sim.airflow-gang.io/log": "CUDA error: out of memory",
    }
    states, _ = run(write_dag, tmp_path, deferrable=deferrable, annotations=annotations)
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "TrainJobFailed" in logged
    assert "exited with code 3" in logged
    assert "Node " in logged
    # The tail is read while the failing pod exists; its Job deletes it at the backoff limit. In
    # the worker the wait always sees it; a trigger that starts late on a loaded machine may not.
    if not deferrable:
        assert "CUDA error: out of memory" in logged


def test_a_runtime_without_a_podgroup_policy_is_not_a_gang_and_its_timeout_says_so(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str], cluster: Any
) -> None:
    """Four nodes on a 4-GPU pool of which one GPU is taken: with no gang, three pods bind and the
    fourth never does; the admission timeout deletes the job, saying it was no gang."""
    hog = hold_one_gpu(cluster)
    try:
        states, _ = run(
            write_dag,
            tmp_path,
            runtime="torch-distributed-no-gang",
            queue=None,
            admission=4,
            nodes=4,
            annotations={"sim.airflow-gang.io/duration": "60"},
        )
    finally:
        hog()
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "is NOT gang-scheduled" in logged
    assert "GangAdmissionTimeout" in logged
    assert "no gang scheduling: not every replica was bound" in logged


def test_an_unknown_runtime_fails_before_anything_is_created(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str], api: k8s.ApiClient
) -> None:
    states, _ = run(write_dag, tmp_path, runtime="no-such-runtime")
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "runtime='no-such-runtime': no ClusterTrainingRuntime of that name" in logged
    listed = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*TRAINER, "default", "trainjobs")
    assert listed["items"] == []


def test_a_priority_class_is_refused_with_the_way_to_set_one(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = TRAINJOB_DAG.replace("retries=0,", "retries=0, priority_class='high',")
    dag = write_dag(
        source,
        deferrable=False,
        out=str(tmp_path / "out.json"),
        runtime="torch-distributed",
        queue="research",
        admission=60,
        nodes=2,
        annotations={},
    )
    assert task_states(dag.test())["train"] == "failed"
    logged = capfd.readouterr().out
    assert "priority_class='high' cannot be set on a TrainJob" in logged
    assert "runtime_kind='TrainingRuntime'" in logged
