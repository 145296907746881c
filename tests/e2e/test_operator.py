"""PyTorchJobOperator end to end: DAG files run with ``dag.test()`` against the embedded cluster.

Every scenario runs twice, waiting in the worker (``deferrable=False``) and in the triggerer
(``deferrable=True``; ``dag.test()`` runs triggers in-process).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.dag_runs import RESULT_KEYS, task_states

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])

SUCCESS_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=1,
        resources={"nvidia.com/gpu": 1}, deferrable=__DEFERRABLE__, poll_interval=0.2, admission_timeout=60,
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": "0.5",
            "sim.airflow-gang.io/log": "epoch 1/1 loss=0.31\\nMASTER-LOG-MARKER accuracy=0.97",
        }}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump({"result": result, "job_name": ti.xcom_pull(task_ids="train", key="job_name"),
                       "job_namespace": ti.xcom_pull(task_ids="train", key="job_namespace")}, out)

    record(train.output)
"""


@MODES
def test_a_job_succeeds_with_its_result_xcoms_and_master_log(
    write_dag: Callable[..., Any],
    api: Any,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    out = tmp_path / "out.json"
    dag = write_dag(SUCCESS_DAG, deferrable=deferrable, out=str(out))
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=2)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    recorded = json.loads(out.read_text())
    result = recorded["result"]
    assert set(result) == RESULT_KEYS
    assert result["state"] == "succeeded"
    assert result["metrics"] == {"loss": 0.31, "accuracy": 0.97}
    assert result["namespace"] == "default"
    assert result["queue"] == "default"
    assert result["podgroup"] == result["name"]
    assert result["replicas"] == {"Master": 1, "Worker": 1}
    submitted, admitted, finished = (
        dt.datetime.fromisoformat(result[k]) for k in ("submitted_at", "admitted_at", "finished_at")
    )
    assert before <= submitted <= admitted <= finished <= dt.datetime.now(dt.UTC)
    assert 0 <= result["queued_seconds"] < 30
    assert 0 <= result["run_seconds"] < 30
    assert recorded["job_name"] == result["name"]
    assert recorded["job_namespace"] == "default"
    output = capfd.readouterr().out
    assert "MASTER-LOG-MARKER accuracy=0.97" in output
    if not deferrable:  # streamed live, line by line, tagged with the pod
        assert f"[{result['name']}-master-0] MASTER-LOG-MARKER accuracy=0.97" in output


FAILING_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

def replica(annotations):
    return {"template": {"metadata": {"annotations": annotations},
                         "spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}]}}}

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", restart_policy="Never", deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=60, delete_on_finish="always", resources={"nvidia.com/gpu": 1},
        job_template={"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
            "Master": replica({"sim.airflow-gang.io/duration": "3"}),
            "Worker": replica({
                "sim.airflow-gang.io/duration": "0.3",
                "sim.airflow-gang.io/exit-code": "3",
                "sim.airflow-gang.io/log": "loading shard 7\\nValueError: shard 7 is corrupt",
            }),
        }}},
    )
"""


@MODES
def test_a_failing_replica_fails_the_task_naming_replica_exit_code_and_log(
    write_dag: Callable[..., Any], api: Any, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    dag = write_dag(FAILING_DAG, deferrable=deferrable)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "failed"}
    output = capfd.readouterr().out
    assert "PyTorchJobFailed" in output
    assert "Replica Worker 0" in output
    assert "exited with code 3 (Error)" in output
    assert "ValueError: shard 7 is corrupt" in output


BAD_INPUT_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", deferrable=__DEFERRABLE__, **__ARGUMENTS__
    )
"""


@MODES
@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"workers": -1}, "workers=-1 is invalid"),
        ({"resources": {"memory": "16GB"}}, "resources['memory']='16GB' is invalid"),
        ({"resources": {"nvidia.com/gpu": 1.5}}, "whole number >= 1"),
        ({"env": {"1BAD": "x"}}, "env name '1BAD' is invalid"),
        ({"min_available": 5}, "min_available=5 is invalid"),
        ({"gang_scheduling": "volcano"}, "gang_scheduling='volcano' is invalid"),
        ({"job_template": {"kind": "TFJob"}}, "only PyTorchJob is supported"),
        ({"job_name": "Bad_Name"}, "job_name='Bad_Name' is invalid"),
        ({"queue": "missing-queue"}, "queue='missing-queue' does not exist"),
    ],
    ids=[
        "workers",
        "memory",
        "gpu",
        "env",
        "min-available",
        "mode",
        "template-kind",
        "job-name",
        "missing-queue",
    ],
)
def test_bad_input_fails_before_anything_is_created(
    write_dag: Callable[..., Any],
    api: Any,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
    arguments: dict[str, Any],
    fragment: str,
) -> None:
    dag = write_dag(BAD_INPUT_DAG, deferrable=deferrable, arguments=arguments)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "failed"}
    output = capfd.readouterr().out
    assert "GangSpecError" in output
    assert fragment in output


def stored_state(dag_run: Any, task_id: str, key: str) -> Any:
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(TaskStateStoreModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        return json.loads(row.value) if row is not None else None


@MODES
def test_the_task_state_store_holds_the_job_identity_and_live_progress(
    write_dag: Callable[..., Any], api: Any, tmp_path: Path, deferrable: bool
) -> None:
    dag = write_dag(SUCCESS_DAG, deferrable=deferrable, out=str(tmp_path / "out.json"))
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    identity = stored_state(dag_run, "train", "pytorchjob")
    result = json.loads((tmp_path / "out.json").read_text())["result"]
    assert identity == {
        "kind": "PyTorchJob",
        "name": result["name"],
        "namespace": "default",
        "uid": result["uid"],
        "kubernetes_conn_id": "kubernetes_default",
        "try_number": 1,
        # For the orphan reaper, should the task be ended from outside after its job finished.
        "delete_on_finish": "on_success",
        # The result was returned: a later try (a clear) trains anew instead of reusing this job.
        "delivered": True,
    }
    progress = stored_state(dag_run, "train", "progress")
    assert set(progress) == {
        "phase",
        "podgroup_phase",
        "queue",
        "replicas_bound",
        "replicas_running",
        "replicas",
        "message",
        "updated_at",
    }
    assert progress["phase"] in {"queued", "admitted", "running", "succeeded"}
    assert progress["queue"] == "default"
    assert progress["replicas"] == 2


TIMEOUT_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=__DEFERRABLE__, poll_interval=0.2, execution_timeout=dt.timedelta(seconds=4),
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "120"}}},
    )
"""


@MODES
def test_execution_timeout_fails_the_task_and_deletes_the_running_job(
    write_dag: Callable[..., Any], api: Any, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    dag = write_dag(TIMEOUT_DAG, deferrable=deferrable)
    started = dt.datetime.now(dt.UTC)
    dag_run = dag.test()
    assert task_states(dag_run) == {"train": "failed"}
    assert dt.datetime.now(dt.UTC) - started < dt.timedelta(seconds=90), "the 120 s job was not waited for"
    out = capfd.readouterr().out
    assert "and everything it made (execution_timeout reached" in out
    # Both waits end as Airflow's own timeout, so retries treat them alike.
    assert "AirflowTaskTimeout" in out
    assert "GangApiError" not in out
