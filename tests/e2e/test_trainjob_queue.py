"""A TrainJob's Volcano queue, end to end on the embedded cluster's Kubeflow Trainer v2 (issue 32).

Trainer v2.3's Volcano plugin takes the PodGroup's queue from the runtime's JobSet template
annotations, overridden by ``runtimePatches[].trainingRuntimeSpec.template.metadata.annotations``
(kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` 145-161, ``volcano.go`` 182),
never from the TrainJob's own annotations; the simulated Trainer reads it the same way. Here
``research`` is capped at 2 GPUs of the 4-GPU pool, so a 3-node gang fits the pool but never the
queue: a job in the wrong queue shows.

The mismatch between the queue asked for and the PodGroup's is provoked the way a real cluster
does it: Volcano's mutating PodGroup webhook (``pkg/webhooks/admission/podgroups/mutate``,
mirrored by the simulator's API server) moves a PodGroup created in queue ``default`` to the queue
its namespace's ``scheduling.volcano.sh/queue-name`` annotation names.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.support.cluster import NOTHING, leftovers
from tests.support.dag_runs import task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
RESEARCH_GPUS = 2
# A namespace whose PodGroups of queue `default` Volcano's webhook moves to `research`.
MOVED = "queue-moved"

DAG = """
import datetime as dt, json
from airflow.sdk import DAG, task
from airflow_gang.operators.train_job import TrainJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = TrainJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", command=["torchrun", "train.py"], num_nodes=__NODES__,
        resources_per_node={"nvidia.com/gpu": 1}, deferrable=__DEFERRABLE__, poll_interval=0.2,
        admission_timeout=__ADMISSION__, runtime=__RUNTIME__, queue=__QUEUE__, namespace=__NAMESPACE__,
        retries=0, delete_on_finish=__DELETE__,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": __DURATION__}}},
    )

    @task
    def record(result, ti=None):
        with open(__OUT__, "w") as out:
            json.dump({"result": result, "job_name": ti.xcom_pull(task_ids="train", key="job_name")}, out)

    record(train.output)
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """2 nodes x 2 GPUs; ``research`` may hold 2 of them."""
    queues = {"research": {"nvidia.com/gpu": RESEARCH_GPUS}}
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, queues=queues) as running:
        yield running


def run(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    *,
    queue: str | None,
    deferrable: bool = False,
    runtime: str = "torch-distributed",
    namespace: str = "default",
    nodes: int = 2,
    admission: float = 60,
    duration: float = 0.5,
    delete: str = "always",
) -> tuple[dict[str, str | None], dict[str, Any] | None, float]:
    """Run the DAG under ``dag.test()``: the task states, what ``record`` wrote, the seconds taken."""
    out = tmp_path / "out.json"
    dag = write_dag(
        DAG,
        deferrable=deferrable,
        out=str(out),
        runtime=runtime,
        queue=queue,
        namespace=namespace,
        admission=admission,
        nodes=nodes,
        duration=str(duration),
        delete=delete,
    )
    started = time.monotonic()
    dag_run = dag.test()
    took = time.monotonic() - started
    return task_states(dag_run), json.loads(out.read_text()) if out.exists() else None, took


def podgroup_queue(api: k8s.ApiClient, name: str, namespace: str = "default") -> str:
    podgroup = k8s.CustomObjectsApi(api).get_namespaced_custom_object(*VOLCANO, namespace, "podgroups", name)
    return str(podgroup["spec"].get("queue") or "default")


def delete_trainjob(api: k8s.ApiClient, name: str, namespace: str = "default") -> None:
    """What ``kubectl delete`` does: Background propagation, the garbage collector removes the rest."""
    body = k8s.V1DeleteOptions(propagation_policy="Background")
    k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", name, body=body
    )


@MODES
def test_the_asked_queue_reaches_the_podgroup_and_the_task_succeeds(
    write_dag: Callable[..., Any], tmp_path: Path, api: k8s.ApiClient, deferrable: bool
) -> None:
    states, out, _ = run(write_dag, tmp_path, queue="research", deferrable=deferrable, delete="never")
    assert states == {"train": "success", "record": "success"}
    assert out is not None
    name = out["job_name"]
    try:
        assert podgroup_queue(api, name) == "research"  # where the gang really waited
        assert out["result"]["queue"] == "research"
        assert out["result"]["podgroup"] == name
    finally:
        delete_trainjob(api, name)


def test_with_the_asked_queue_capped_below_the_gang_the_admission_timeout_names_it(
    write_dag: Callable[..., Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """3 GPUs fit the pool but not ``research``: the gang waits in ``research`` until its timeout."""
    states, _, _ = run(write_dag, tmp_path, queue="research", nodes=RESEARCH_GPUS + 1, admission=5)
    assert states["train"] == "failed"
    logged = capfd.readouterr().out
    assert "GangAdmissionTimeout" in logged
    assert "by queue 'research'" in logged
    # The task log's status lines name the queue the PodGroup really waits in.
    assert any(
        "gang job " in line and "podgroup=" in line and "queue=research" in line
        for line in logged.splitlines()
    )


@pytest.fixture
def runtime_in(api: k8s.ApiClient) -> Iterator[Callable[[str], str]]:
    """Make a copy of ``torch-distributed`` whose JobSet template names a queue; return its name."""
    custom, made = k8s.CustomObjectsApi(api), []

    def make(queue: str) -> str:
        runtime = copy.deepcopy(
            custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", "torch-distributed")
        )
        name = f"torch-distributed-{queue}"
        runtime["metadata"] = {"name": name}
        runtime["spec"]["template"].setdefault("metadata", {})["annotations"] = {QUEUE_ANNOTATION: queue}
        custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
        made.append(name)
        return name

    yield make
    for name in made:
        custom.delete_cluster_custom_object(*TRAINER, "clustertrainingruntimes", name)


def test_a_runtime_naming_a_queue_on_its_template_is_used_without_queue(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    api: k8s.ApiClient,
    capfd: pytest.CaptureFixture[str],
    runtime_in: Callable[[str], str],
) -> None:
    states, out, _ = run(write_dag, tmp_path, queue=None, runtime=runtime_in("research"), delete="never")
    assert states == {"train": "success", "record": "success"}
    assert out is not None
    name = out["job_name"]
    try:
        assert podgroup_queue(api, name) == "research"
        assert out["result"]["queue"] == "research"
        assert "in queue research" in capfd.readouterr().out
    finally:
        delete_trainjob(api, name)


def test_a_runtime_naming_a_missing_queue_on_its_template_fails_before_anything_is_created(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    api: k8s.ApiClient,
    capfd: pytest.CaptureFixture[str],
    runtime_in: Callable[[str], str],
) -> None:
    states, _, _ = run(write_dag, tmp_path, queue=None, runtime=runtime_in("nowhere"), admission=5)
    assert states["train"] == "failed"
    assert "queue='nowhere' does not exist in the cluster" in capfd.readouterr().out
    listed = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*TRAINER, "default", "trainjobs")
    assert listed["items"] == []


@pytest.fixture
def moved_namespace(api: k8s.ApiClient) -> Iterator[str]:
    """A namespace annotated so Volcano's webhook moves its PodGroups of queue `default` to research;
    whatever a test leaves in it fails the test."""
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": MOVED, "annotations": {QUEUE_ANNOTATION: "research"}}})
    except k8s.ApiException as error:
        if error.status != 409:
            raise
    yield MOVED
    eventually(
        lambda: leftovers(api, MOVED) == NOTHING, timeout=20, message=f"left behind: {leftovers(api, MOVED)}"
    )


@MODES
def test_a_podgroup_in_another_queue_than_asked_fails_the_task_at_once_and_leaves_nothing(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    api: k8s.ApiClient,
    capfd: pytest.CaptureFixture[str],
    moved_namespace: str,
    deferrable: bool,
) -> None:
    """queue='default' in a namespace whose annotation makes Volcano's webhook move the PodGroup to
    ``research``: the task fails as soon as the PodGroup appears (long before its 120 s admission
    timeout or the 60 s the job would run), naming both queues, and its job is gone."""
    states, _, took = run(
        write_dag,
        tmp_path,
        queue="default",
        namespace=moved_namespace,
        deferrable=deferrable,
        admission=120,
        duration=60,
    )
    assert states["train"] == "failed"
    assert took < 45, f"the task took {took:.0f}s: not failed at once"
    logged = capfd.readouterr().out
    assert "GangQueueMismatch" in logged
    assert "asked for Volcano queue 'default' but its PodGroup was created in queue 'research'" in logged
    assert "so it was deleted" in logged
    assert leftovers(api, moved_namespace) == NOTHING  # gone when the error was raised
