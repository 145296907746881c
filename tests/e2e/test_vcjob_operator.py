"""VolcanoJobOperator end to end: DAG files run with ``dag.test()`` against the embedded cluster's
Volcano job controller (Job -> PodGroup ``<job>-<uid>`` -> pods ``<job>-<task>-<index>``) and
scheduler.

Success and failure run twice, waiting in the worker and in the triggerer. The real scheduler +
triggerer runs are in ``tests/realstack/test_vcjobs.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support.cluster import hold_one_gpu
from tests.support.dag_runs import VCJOB_DAG, task_states

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
VOLCANO_JOBS = ("batch.volcano.sh", "v1alpha1")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1")


def run(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    *,
    source: str = VCJOB_DAG,
    deferrable: bool = False,
    annotations: dict[str, str] | None = None,
    queue: str = "research",
    admission: float = 60,
    workers: int = 1,
    min_available: int | None = None,
    max_retry: int | None = None,
    policies: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, str | None], dict[str, Any] | None]:
    out = tmp_path / "out.json"
    dag = write_dag(
        source,
        deferrable=deferrable,
        out=str(out),
        queue=queue,
        admission=admission,
        workers=workers,
        min_available=min_available,
        max_retry=max_retry,
        policies=policies,
        annotations=annotations or {"sim.airflow-gang.io/duration": "0.5"},
    )
    dag_run = dag.test()
    return task_states(dag_run), json.loads(out.read_text()) if out.exists() else None


def left_behind(api: k8s.ApiClient) -> dict[str, list[str]]:
    """What of any Volcano Job is still in the namespace: jobs, PodGroups, pods."""
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    jobs = custom.list_namespaced_custom_object(*VOLCANO_JOBS, "default", "jobs")["items"]
    groups = custom.list_namespaced_custom_object(*PODGROUPS, "default", "podgroups")["items"]
    pods = core.list_namespaced_pod("default", label_selector="volcano.sh/job-name").items
    return {
        "jobs": [job["metadata"]["name"] for job in jobs],
        "podgroups": [group["metadata"]["name"] for group in groups],
        "pods": [pod.metadata.name for pod in pods],
    }


@MODES
def test_a_volcano_job_succeeds_with_its_result_and_rank_0_log(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
    deferrable: bool,
) -> None:
    annotations = {
        "sim.airflow-gang.io/duration": "0.5",
        "sim.airflow-gang.io/log": "epoch 1/1 loss=0.25\nRANK0-LOG-MARKER accuracy=0.98",
    }
    states, out = run(write_dag, tmp_path, deferrable=deferrable, annotations=annotations, workers=2)
    assert states == {"train": "success", "record": "success"}
    assert out is not None
    result = out["result"]
    assert result["state"] == "succeeded"
    assert result["replicas"] == {"master": 1, "worker": 2}
    assert result["queue"] == "research"
    # Volcano's job controller names the PodGroup after the job's uid.
    assert result["podgroup"] == f"{out['job_name']}-{result['uid']}"
    assert result["metrics"] == {"loss": 0.25, "accuracy": 0.98}
    assert result["queued_seconds"] is not None
    assert result["run_seconds"] is not None
    logged = capfd.readouterr().out
    assert "RANK0-LOG-MARKER" in logged
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}  # delete_on_finish="always"


RESTART_ON_FAILURE = [{"event": "PodFailed", "action": "RestartJob"}]


@MODES
def test_a_failing_master_restarted_by_its_policy_fails_after_max_retry_naming_task_index_and_exit_code(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
    deferrable: bool,
) -> None:
    """Volcano's RestartJob restarts the job (Restarting, then Pending again, retryCount + 1) until
    retryCount reaches maxRetry, then fails it (state/restarting.go); the task reports the restarts
    as restarts and the end as a failure of task master, index 0, exit code 3."""
    annotations = {
        "sim.airflow-gang.io/duration": "1",
        "sim.airflow-gang.io/exit-code": "3",
        "sim.airflow-gang.io/log": "CUDA error: out of memory",
    }
    states, _ = run(
        write_dag,
        tmp_path,
        deferrable=deferrable,
        annotations=annotations,
        workers=0,
        max_retry=2,
        policies=RESTART_ON_FAILURE,
    )
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "VolcanoJobFailed" in logged
    assert "Task master, index 0 (pod " in logged
    assert "exited with code 3" in logged
    assert "the Volcano Job is failed after 2 restart(s) (maxRetry 2)" in logged
    # The restarts were reported as such while the task waited (not as a failure, not as queued).
    assert "restarted by its policy (1 of maxRetry 2)" in logged
    assert "CUDA error: out of memory" in logged
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}


def test_a_job_smaller_gang_than_its_pods_is_not_admitted_until_every_pod_is_bound(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    cluster: Any,
    api: k8s.ApiClient,
) -> None:
    """min_available=1 of 4 on a pool with a GPU taken: Volcano admits the PodGroup (minMember 1)
    and binds three pods; the fourth never fits. The task warns it is not one gang, its admission
    timeout deletes the job, and nothing of it is left."""
    hog = hold_one_gpu(cluster)
    try:
        states, _ = run(
            write_dag,
            tmp_path,
            workers=3,
            min_available=1,
            admission=4,
            annotations={"sim.airflow-gang.io/duration": "60"},
        )
    finally:
        hog()
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "is NOT one gang" in logged
    assert "GangAdmissionTimeout" in logged
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}


def test_a_gang_larger_than_the_pool_times_out_and_is_deleted_with_its_podgroup(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
) -> None:
    states, _ = run(
        write_dag, tmp_path, workers=4, admission=3, annotations={"sim.airflow-gang.io/duration": "60"}
    )
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "GangAdmissionTimeout" in logged
    assert "was not admitted" in logged
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}


def test_an_invalid_policy_fails_before_anything_is_created(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
) -> None:
    states, _ = run(write_dag, tmp_path, policies=[{"event": "PodFailed", "action": "RestartEverything"}])
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "policies[0]: action 'RestartEverything' is not one Volcano accepts" in logged
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}


def test_a_closed_or_missing_queue_is_refused_before_anything_is_created(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
) -> None:
    states, _ = run(write_dag, tmp_path, queue="no-such-queue")
    assert states["train"] == "failed"
    assert "queue='no-such-queue' does not exist" in capfd.readouterr().out
    assert left_behind(api) == {"jobs": [], "podgroups": [], "pods": []}
