"""Volcano's own Jobs on the Gang jobs page, beside PyTorchJobs, against a real embedded cluster (its
own: Volcano's job controller makes the PodGroups ``<job>-<uid>`` and the pods) over real HTTP.

No mocks: FastAPI's test client calls the app, whose reader talks to the simulator's API server
with the official client. The Volcano Jobs carry the provider's identity labels (as
`VolcanoJobOperator` submits them) in namespace ``volcano``:

- ``vc-done``: a master alone, finishes at once;
- ``vc-train``: a master and a worker of one GPU each, running for ten minutes;
- ``vc-capped``: four GPUs in queue ``research`` capped at two: Volcano never enqueues it;
- ``pt-beside``: a PyTorchJob submitted without Airflow, to see both kinds in one table.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.kinds import VCJOB
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.model.naming import identity_labels
from airflow_gang.plugins import actions
from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.cluster_reader import UI_RETRY_POLICY, ClusterReader
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.metadata import migrate_db
from tests.support.submission import submit
from tests.waiting import eventually

NAMESPACE = "volcano"


def sim(duration: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {"sim.airflow-gang.io/duration": duration}}}


def submit_vcjob(hook: GangJobHook, name: str, **spec: Any) -> None:
    """A Volcano Job with the provider's identity labels, as `VolcanoJobOperator` submits it."""
    labels = identity_labels("ui_vcjobs", name.replace("-", "_"), "manual__1", -1, 1)
    submit(
        name,
        VolcanoJobSpec(image="ghcr.io/acme/train:1", **spec),
        hook=hook,
        namespace=NAMESPACE,
        labels=labels,
    )


def reader_on(kubeconfig_path: str) -> ClusterReader:
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=kubeconfig_path)
    hook.retry_policy = UI_RETRY_POLICY
    return ClusterReader(hook, (NAMESPACE,))


def rows(client: TestClient, query: str = "") -> dict[str, dict[str, Any]]:
    answer = client.get(f"/api/jobs{query}")
    assert answer.status_code == 200, answer.text
    return {job["name"]: job for job in answer.json()["jobs"]}


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    migrate_db()
    with SimCluster(
        nodes=2, gpus_per_node=2, schedule_period=0.2, queues={"research": {"nvidia.com/gpu": 2}}
    ) as running:
        with running.api_client() as api:
            k8s.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        gpu = {"nvidia.com/gpu": 1}
        submitter = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=running.kubeconfig_path)
        submit_vcjob(submitter, "vc-done", workers=0, pod_template=sim("0.3"))
        submit_vcjob(submitter, "vc-train", workers=1, resources=gpu, pod_template=sim("600"))
        submit_vcjob(
            submitter, "vc-capped", workers=3, resources=gpu, queue="research", pod_template=sim("5")
        )
        spec = GangJobSpec(image="ghcr.io/acme/train:1", workers=1, pod_template=sim("600"))
        submitter.create_pytorchjob(spec.build_pytorchjob("pt-beside", NAMESPACE), NAMESPACE)
        yield running


@pytest.fixture(scope="module")
def client(cluster: SimCluster) -> Iterator[TestClient]:
    app = create_app(authenticate=False, reader_factory=lambda settings: reader_on(cluster.kubeconfig_path))
    with TestClient(app) as test_client:
        yield test_client


def test_volcano_jobs_are_rows_beside_pytorchjobs_with_the_same_columns(client: TestClient) -> None:
    jobs = eventually(
        lambda: (
            found
            if (found := rows(client, "?all=true")).get("vc-done", {}).get("state") == "succeeded"
            and found.get("vc-train", {}).get("state") == "running"
            and found.get("vc-capped", {}).get("reason")
            else None
        ),
        timeout=60,
        message="the Volcano Jobs never reached their states",
    )
    assert {name: job["kind"] for name, job in jobs.items()} == {
        "vc-done": "VolcanoJob",
        "vc-train": "VolcanoJob",
        "vc-capped": "VolcanoJob",
        "pt-beside": "PyTorchJob",
    }
    train = jobs["vc-train"]
    assert train["replicas"] == {"master": 1, "worker": 1}
    assert (train["state"], train["queue"], train["podgroup_phase"]) == ("running", "default", "Running")
    assert (train["replicas_bound"], train["replicas_running"], train["gang_scheduling"]) == (2, 2, "volcano")
    assert train["podgroup"].startswith("vc-train-")  # Volcano's <job>-<uid>
    assert train["gpus"] == 2.0
    assert train["run_seconds"] > 0
    assert train["suspendable"] is False

    done = jobs["vc-done"]
    assert (done["job_condition"], done["replicas"]) == ("Succeeded", {"master": 1})
    assert done["finished_at"] is not None  # from the job's Completed condition: it has no completionTime
    assert done["run_seconds"] is not None

    capped = jobs["vc-capped"]
    assert (capped["state"], capped["queue"], capped["podgroup_phase"]) == ("queued", "research", "Pending")
    assert capped["replicas_total"] == 4
    assert capped["run_seconds"] is None

    # Without all=true: only the jobs the provider submitted; the kind filter takes the new kind.
    assert set(rows(client)) == {"vc-done", "vc-train", "vc-capped"}
    assert set(rows(client, "?all=true&kind=VolcanoJob")) == {"vc-done", "vc-train", "vc-capped"}


def test_volcano_job_detail_has_its_task_pods_podgroup_and_replicas(client: TestClient) -> None:
    answer = client.get(f"/api/jobs/{NAMESPACE}/vc-train?kind=VolcanoJob")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["job"]["kind"] == "VolcanoJob"
    assert data["podgroup"]["phase"] == "Running"
    assert data["replicas"] == [
        {"type": "master", "desired": 1, "active": 1, "succeeded": 0, "failed": 0},
        {"type": "worker", "desired": 1, "active": 1, "succeeded": 0, "failed": 0},
    ]
    assert sorted((pod["replica_type"], pod["replica_index"], pod["phase"]) for pod in data["pods"]) == [
        ("master", "0", "Running"),
        ("worker", "0", "Running"),
    ]
    assert data["timeline"]["admitted_at"] is not None
    # Without the kind the same job is found (no PyTorchJob or TrainJob has that name).
    assert client.get(f"/api/jobs/{NAMESPACE}/vc-train").json()["job"]["kind"] == "VolcanoJob"


def test_a_volcano_job_cannot_be_suspended_from_the_page_but_can_be_deleted(cluster: SimCluster) -> None:
    reader = reader_on(cluster.kubeconfig_path)
    record = reader.job(NAMESPACE, "vc-capped", VCJOB)
    assert record is not None
    summary = record.summary(dt.datetime.now(dt.UTC), [])
    with pytest.raises(actions.PageError, match="cannot be suspended or resumed from this page"):
        actions.check_allowed("suspend", record, summary)
    podgroup = summary["podgroup"]
    assert podgroup.startswith("vc-capped-")
    outcome = actions.perform("delete", record, summary, reader.hook, "tester")
    assert outcome == f"VolcanoJob {NAMESPACE}/vc-capped and its PodGroup were deleted"
    assert reader.job(NAMESPACE, "vc-capped", VCJOB) is None
    assert reader.hook.get_podgroup(podgroup, NAMESPACE) is None
