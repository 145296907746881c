"""A running gang loses a node: ``on_disruption="wait"`` rides it out, ``"retry"`` starts afresh.

The embedded cluster takes the node away as a real one does (docs/disruptions.md): the node's
kubelet goes silent, the node lifecycle controller marks it ``Unknown`` and taints it
``unreachable``, the taint eviction controller deletes its pods once their toleration runs out
(``DisruptionTarget`` reason ``DeletionByTaintManager``), they stay Terminating because nobody
confirms, and when the cloud deletes the Node object pod GC removes them. The training-operator
then recreates the replicas under the same names (v1.9 ``pkg/controller.v1/common/pod.go:316-324``)
and Volcano places the gang again on what is left. Each scenario runs waiting in the worker and
in the triggerer (``dag.test()`` runs triggers in-process; the real scheduler + triggerer runs
are in ``tests/realstack/test_disruptions.py``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.model.naming import DAG_ID_LABEL, safe_label_value
from gang_sim.cluster import SimCluster
from tests.statsd_listener import airflow_sending_to
from tests.support.dag_runs import task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs")
# The cluster's node grace period (3 s) and default toleration (3 s) have run out by then.
DELETE_NODE_AFTER = 8


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """Three nodes of 2 GPUs: a 4-GPU gang fills two, and fits again on the two that are left.
    One per test: a test deletes a Node, as the cloud does with a VM that went away."""
    with SimCluster(nodes=3, gpus_per_node=2, schedule_period=0.2, node_monitor_grace_period=3.0) as running:
        yield running


DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.retry import gang_retry_policy

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        deferrable=__DEFERRABLE__, poll_interval=0.5, admission_timeout=60,
        on_disruption=__POLICY__, checkpoint_dir="/ckpt/{{ dag.dag_id }}/{{ task.task_id }}",
        retries=1, retry_delay=dt.timedelta(seconds=0),
        retry_policy=gang_retry_policy(admission_retry_delay=1, disruption_retry_delay=1),
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "__SECONDS__"}}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    record(train.output)
"""


class NodeKiller:
    """Once every replica of the first job of ``dag_id`` runs, kill the node of its master and
        have the cloud delete that Node after the taint eviction controller has deleted its pods (which
    stay Terminating: nobody confirms), as when a spot VM goes away."""

    def __init__(self, cluster: SimCluster, api: k8s.ApiClient, dag_id: str, *, replicas: int = 4) -> None:
        self.cluster, self.core, self.dag_id = cluster, k8s.CoreV1Api(api), dag_id
        self.custom, self.replicas = k8s.CustomObjectsApi(api), replicas
        self.killed: dict[str, str] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NodeKiller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._thread.join(timeout=5)
        self.cluster.clear_faults()

    def _pods(self) -> list[Any]:
        selector = f"{DAG_ID_LABEL}={safe_label_value(self.dag_id)}"
        pods = list(self.core.list_namespaced_pod("default", label_selector=selector).items)
        # A TrainJob's pods carry its JobSet's labels, not the provider's: found through the job.
        for job in self.custom.list_namespaced_custom_object(*TRAINJOBS, label_selector=selector)["items"]:
            jobset = f"jobset.sigs.k8s.io/jobset-name={job['metadata']['name']}"
            pods += self.core.list_namespaced_pod("default", label_selector=jobset).items
        return list({pod.metadata.uid: pod for pod in pods}.values())  # found both ways: once

    def _run(self) -> None:
        def all_running() -> bool:
            pods = self._pods()
            return len(pods) == self.replicas and all(p.status.phase == "Running" for p in pods)

        eventually(all_running, timeout=60, message="the gang never ran")
        pods = sorted(self._pods(), key=lambda p: p.metadata.name)
        master = next((p for p in pods if p.metadata.name.endswith("-master-0")), pods[0])
        node = master.spec.node_name
        self.killed = {"node": node, "master": master.metadata.name}
        failure = {"at": 0, "node": node, "delete_node_after": DELETE_NODE_AFTER}
        self.cluster.set_faults({"node_failures": [failure]})


# Deferred: slow (CI's time budget); its twin is the real stack's, under a real triggerer
# (tests/realstack/test_disruptions.py::test_wait_rides_out_the_lost_node_on_one_job[deferred]).
@pytest.mark.parametrize(
    "deferrable", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["sync", "deferrable"]
)
def test_wait_rides_out_a_lost_node_and_the_gang_is_readmitted_on_what_is_left(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    deferrable: bool,
) -> None:
    out = tmp_path / "out.json"
    dag = write_dag(DAG, deferrable=deferrable, policy="wait", seconds=8, out=str(out))
    with airflow_sending_to(monkeypatch) as statsd, NodeKiller(cluster, api, dag.dag_id) as killer:
        dag_run = dag.test()
        (disruption,) = statsd.wait_for("airflow.gang.disruptions")
        (readmission,) = statsd.wait_for("airflow.gang.disruption_seconds")
    assert disruption[1:] == (1, "c")
    assert readmission[2] == "ms"
    assert 1000 < readmission[1] < 60_000  # lost at the taint eviction, back once the Node was deleted
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    (ti,) = [t for t in dag_run.get_task_instances() if t.task_id == "train"]
    assert ti.try_number == 1  # ridden out within the try
    result = json.loads(out.read_text())
    output = capfd.readouterr().out
    name = result["name"]
    assert f"gang disrupted job=default/{name} (#1): node lost:" in output
    assert killer.killed["master"] in output
    assert f"on {killer.killed['node']}" in output
    assert "Taint manager: deleting due to NoExecute taint" in output
    told = "\n".join(line for line in output.splitlines() if "gang" in line)
    assert f"gang re-admitted job=default/{name}" in output, told
    assert "GangJobDisrupted" not in output


@pytest.mark.parametrize(
    "deferrable",
    [pytest.param(False, marks=pytest.mark.slow), True],  # the real stack runs the deferred one too
    ids=["sync", "deferrable"],
)
def test_retry_deletes_the_disrupted_job_and_the_next_try_succeeds_with_the_same_checkpoint_dir(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    out = tmp_path / "out.json"
    dag = write_dag(DAG, deferrable=deferrable, policy="retry", seconds=8, out=str(out))
    seen_env: list[str] = []
    core = k8s.CoreV1Api(api)

    def checkpoint_dirs() -> None:
        for pod in core.list_namespaced_pod(
            "default", label_selector=f"airflow-gang.io/dag-id={dag.dag_id}"
        ).items:
            for env in pod.spec.containers[0].env or []:
                if env.name == "GANG_CHECKPOINT_DIR" and env.value not in seen_env:
                    seen_env.append(env.value)

    with NodeKiller(cluster, api, dag.dag_id):
        watcher = threading.Event()

        def watch() -> None:
            while not watcher.wait(0.5):
                checkpoint_dirs()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            dag_run = dag.test()
        finally:
            watcher.set()
            thread.join(timeout=5)
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    (ti,) = [t for t in dag_run.get_task_instances() if t.task_id == "train"]
    assert ti.try_number == 2
    output = capfd.readouterr().out
    assert "GangJobDisrupted" in output
    assert "disrupted (node lost) with on_disruption='retry'" in output
    assert "a retry starts clean" in output  # seen gone before the try failed
    # Every replica of both tries was told the one checkpoint location of the task instance.
    assert seen_env == [f"/ckpt/{dag.dag_id}/train"]


TRAINJOB_DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.train_job import TrainJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = TrainJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", command=["torchrun", "train.py"], num_nodes=2,
        resources_per_node={"nvidia.com/gpu": 1}, runtime="torch-distributed", deferrable=True,
        poll_interval=0.5, admission_timeout=60, on_disruption="wait", retries=0,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "10"}}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump(result, out)

    record(train.output)
"""


def test_a_trainjob_rides_out_a_lost_node_too(
    write_dag: Callable[..., Any],
    cluster: SimCluster,
    api: k8s.ApiClient,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A TrainJob's nodes are pods of one Indexed batch Job (``podReplacementPolicy:
    TerminatingOrFailed``): a replacement is made as soon as the lost pod is Terminating, under a
    new name, and Volcano places the gang again (docs/disruptions.md)."""
    out = tmp_path / "out.json"
    dag = write_dag(TRAINJOB_DAG, out=str(out))
    with NodeKiller(cluster, api, dag.dag_id, replicas=2) as killer:
        dag_run = dag.test()
    assert task_states(dag_run) == {"train": "success", "record": "success"}
    name = json.loads(out.read_text())["name"]
    output = capfd.readouterr().out
    told = "\n".join(line for line in output.splitlines() if "gang" in line)
    assert f"gang disrupted job=default/{name} (#1): node lost:" in output, told
    assert f"on {killer.killed['node']}" in output, told
    assert f"gang re-admitted job=default/{name}" in output, told
