"""Every ``gang_scheduling`` mode on the seed's own cluster: a training-operator started with
``--gang-scheduler-name=volcano`` (``training_operator_gang="volcano"``, its own cluster here).

That operator makes every PyTorchJob a gang of its own and wakes a job on PodGroup events only
through the group's controller ownerReference; the default mode must hand it a PodGroup it
treats as its own (issue 23: with ``controller: false`` the jobs hung until their admission
timeout). ``disabled`` cannot opt out of the operator's gang.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.support.cluster import PODGROUPS, PYTORCHJOBS, delete_job
from tests.support.dag_runs import run_report, run_seed_sweep, task_states
from tests.support.job_watches import JobEvents

pytestmark = pytest.mark.usefixtures("kube_connection")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """conftest's pool of 4 GPUs, with the training-operator's gang flag set."""
    with SimCluster(
        nodes=2,
        gpus_per_node=2,
        schedule_period=0.2,
        queues={"research": None},
        training_operator_gang="volcano",
    ) as running:
        yield running


# Every run takes provider-deferrable and training-operator-sync; the other two pairings run with
# `make test-slow`.
@pytest.mark.parametrize(
    ("gang", "deferrable"),
    [
        ("provider", True),
        ("training-operator", False),
        pytest.param("provider", False, marks=pytest.mark.slow),
        pytest.param("training-operator", True, marks=pytest.mark.slow),
    ],
    ids=["provider-deferrable", "training-operator-sync", "provider-sync", "training-operator-deferrable"],
)
def test_six_mapped_jobs_on_a_pool_that_fits_one_all_succeed(
    write_dag: Callable[..., Any],
    api: k8s.ApiClient,
    cluster: SimCluster,
    tmp_path: Path,
    gang: str,
    deferrable: bool,
) -> None:
    with JobEvents(cluster) as events:
        run_seed_sweep(write_dag, tmp_path, gang=gang, deferrable=deferrable)
    added = [event for event in events.events if event.type == "ADDED"]
    assert len(added) == 6, f"one job per task, none resubmitted after a timeout: {added}"


ONE_JOB_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        gang_scheduling=__GANG__, wait_for_completion=False, poll_interval=0.2, admission_timeout=60,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "60"}}},
    )
"""


@pytest.fixture
def admitted_job(
    write_dag: Callable[..., Any], api: k8s.ApiClient, request: pytest.FixtureRequest
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A 4-replica job of the mode in ``request.param``, admitted (the task returns at admission)
    and still running; yields it with its PodGroup, deletes it afterwards."""
    dag = write_dag(ONE_JOB_DAG, gang=request.param)
    assert task_states(dag.test()) == {"train": "success"}
    custom = k8s.CustomObjectsApi(api)
    selector = f"airflow-gang.io/dag-id={dag.dag_id}"
    (job,) = custom.list_namespaced_custom_object(*PYTORCHJOBS, label_selector=selector)["items"]
    try:
        # Still running: a finished job's PodGroup is deleted by the training-operator.
        podgroup = custom.get_namespaced_custom_object(*PODGROUPS, job["metadata"]["name"])
        yield job, podgroup
    finally:
        delete_job(api, job["metadata"]["name"])


def controller_references(obj: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    return [(o["kind"], o["uid"], o.get("controller")) for o in obj["metadata"].get("ownerReferences") or []]


@pytest.mark.parametrize("admitted_job", ["provider"], indirect=True)
def test_the_provider_podgroup_is_one_the_operator_takes_as_its_own_and_leaves_as_it_is(
    admitted_job: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The job controls the provider's PodGroup, so the operator's PodGroup watch reaches it;
    the operator computes the same spec from ``schedulingPolicy``, so its spec sync (a write on
    every round) changes nothing: the group still reads as the provider built it."""
    job, podgroup = admitted_job
    assert controller_references(podgroup) == [("PyTorchJob", job["metadata"]["uid"], True)]
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    built = GangJobSpec(
        image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1}
    ).build_podgroup(name, namespace)
    assert built is not None
    assert podgroup["spec"] == built["spec"]
    assert podgroup["metadata"]["labels"]["airflow-gang.io/managed-by"] == "airflow-gang"


@pytest.mark.parametrize("admitted_job", ["training-operator"], indirect=True)
def test_in_training_operator_mode_the_operator_makes_the_podgroup(
    admitted_job: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    job, podgroup = admitted_job
    assert controller_references(podgroup) == [("PyTorchJob", job["metadata"]["uid"], True)]
    assert podgroup["spec"]["minMember"] == 4
    assert "labels" not in podgroup["metadata"]  # the operator copies annotations, not labels


@pytest.mark.parametrize("admitted_job", ["disabled"], indirect=True)
def test_disabled_cannot_opt_out_of_the_operators_own_gang(
    admitted_job: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """With the flag the operator gangs every PyTorchJob: the provider's plain job gets a
    PodGroup of the operator's making all the same."""
    job, podgroup = admitted_job
    assert controller_references(podgroup) == [("PyTorchJob", job["metadata"]["uid"], True)]
    assert podgroup["spec"] == {"minMember": 4, "queue": "default", "minResources": {"nvidia.com/gpu": "4"}}


@pytest.mark.slow  # the flag's sweeps above run in every `make test`
def test_the_gang_vs_deadlock_example_with_suspended_submissions_runs_all_six(
    example_dag: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The example submits its jobs suspended: with the flag the operator deletes a suspended
    job's PodGroup (even before the provider has made the job its owner) and makes its own on
    resume. Submission takes that as it is, and the gangs still run one at a time."""
    dag = example_dag("gang_vs_deadlock")
    dag_run = dag.test(
        run_conf={"gang_scheduling": "provider", "train_seconds": 1, "report_dir": str(tmp_path)}
    )
    states = task_states(dag_run)
    assert str(dag_run.state) == "success", states
    jobs, _ = run_report(tmp_path)
    assert [job["state"] for job in jobs] == ["succeeded"] * 6
    spans = sorted((job["admitted_at"], job["finished_at"]) for job in jobs)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans)), spans
    assert "Task failed" not in capfd.readouterr().out
