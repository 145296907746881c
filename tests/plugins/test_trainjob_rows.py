"""Kubeflow Trainer v2 TrainJobs on the Gang jobs page, beside PyTorchJobs, against a real embedded
cluster (its own: Trainer's controllers make the JobSets, pods and PodGroups) over real HTTP.

No mocks: FastAPI's test client calls the app, whose reader talks to the simulator's API server
with the official client. The TrainJobs carry the provider's identity labels (as
`TrainJobOperator` submits them) in namespace ``trainers``:

- ``tj-done``: one node, finishes at once;
- ``tj-train``: two nodes of one GPU each, running for ten minutes;
- ``tj-capped``: four GPUs in queue ``research`` capped at two: Volcano never enqueues it;
- ``tj-nogang``: three nodes on the runtime without a podGroupPolicy, two GPUs left: two nodes
  placed, the third cannot be (stuck, holding two GPUs);
- ``pt-beside``: a PyTorchJob submitted without Airflow, to see both kinds in one table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.job_kinds import TRAINJOB
from airflow_gang.model.naming import identity_labels
from airflow_gang.plugins import actions
from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.cluster_reader import UI_RETRY_POLICY, ClusterReader
from airflow_gang.spec import GangJobSpec
from airflow_gang.trainjob_spec import TrainJobSpec
from gang_sim.cluster import SimCluster
from tests.metadata import migrate_db
from tests.plugins.conftest import css, script_errors, served, wait_for
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.submission import submit
from tests.waiting import eventually

NAMESPACE = "trainers"


def sim(duration: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {"sim.airflow-gang.io/duration": duration}}}


def submit_trainjob(hook: GangJobHook, name: str, **spec: Any) -> None:
    """A TrainJob with the provider's identity labels, as `TrainJobOperator` submits it."""
    labels = identity_labels("ui_trainjobs", name.replace("-", "_"), "manual__1", -1, 1)
    trainjob = TrainJobSpec(image="ghcr.io/acme/train:1", command=["torchrun", "train.py"], **spec)
    submit(name, trainjob, hook=hook, namespace=NAMESPACE, labels=labels)


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
        submit_trainjob(submitter, "tj-done", num_nodes=1, pod_template=sim("0.3"))
        submit_trainjob(submitter, "tj-train", num_nodes=2, resources_per_node=gpu, pod_template=sim("600"))
        reader = reader_on(running.kubeconfig_path)
        eventually(
            lambda: {row["name"]: row["state"] for row in _summaries(reader)}.get("tj-train") == "running",
            timeout=60,
            message="tj-train never ran",
        )
        submit_trainjob(
            submitter,
            "tj-capped",
            num_nodes=4,
            resources_per_node=gpu,
            queue="research",
            pod_template=sim("5"),
        )
        submit_trainjob(
            submitter,
            "tj-nogang",
            num_nodes=3,
            resources_per_node=gpu,
            runtime="torch-distributed-no-gang",
            pod_template=sim("600"),
        )
        hook = reader.hook
        spec = GangJobSpec(image="ghcr.io/acme/train:1", workers=1, pod_template=sim("600"))
        hook.create_pytorchjob(spec.build_pytorchjob("pt-beside", NAMESPACE), NAMESPACE)
        yield running


def _summaries(reader: ClusterReader) -> list[dict[str, Any]]:
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    return [record.summary(now) for record in reader.snapshot(include_unmanaged=True).jobs]


@pytest.fixture(scope="module")
def client(cluster: SimCluster) -> Iterator[TestClient]:
    app = create_app(authenticate=False, reader_factory=lambda settings: reader_on(cluster.kubeconfig_path))
    with TestClient(app) as test_client:
        yield test_client


def test_trainjobs_are_rows_beside_pytorchjobs_with_the_same_columns(client: TestClient) -> None:
    jobs = eventually(
        lambda: (
            found
            if (found := rows(client, "?all=true")).get("tj-done", {}).get("state") == "succeeded"
            and found.get("tj-nogang", {}).get("state") == "stuck"
            and found.get("tj-capped", {}).get("reason")
            else None
        ),
        timeout=60,
        message="the TrainJobs never reached their states",
    )
    assert {name: job["kind"] for name, job in jobs.items()} == {
        "tj-done": "TrainJob",
        "tj-train": "TrainJob",
        "tj-capped": "TrainJob",
        "tj-nogang": "TrainJob",
        "pt-beside": "PyTorchJob",
    }
    train = jobs["tj-train"]
    assert train["replicas"] == {"Node": 2}
    assert (train["state"], train["queue"], train["podgroup_phase"]) == ("running", "default", "Running")
    assert (train["replicas_bound"], train["replicas_running"], train["gang_scheduling"]) == (2, 2, "trainer")
    assert train["run_seconds"] > 0
    assert train["queued_seconds"] is not None
    assert train["gpus"] == 2.0
    assert train["warning"] is None

    done = jobs["tj-done"]
    assert (done["job_condition"], done["replicas"], done["finished_at"] is not None) == (
        "Succeeded",
        {"Node": 1},
        True,
    )
    assert done["run_seconds"] is not None

    capped = jobs["tj-capped"]
    assert (capped["state"], capped["queue"], capped["podgroup_phase"]) == ("queued", "research", "Pending")
    assert capped["run_seconds"] is None
    assert capped["queued_seconds"] > 0
    assert (
        "research" in capped["reason"] or "insufficient" in capped["reason"] or "overused" in capped["reason"]
    )

    nogang = jobs["tj-nogang"]
    assert (nogang["gang_scheduling"], nogang["podgroup"], nogang["replicas"]) == (
        "disabled",
        None,
        {"Node": 3},
    )
    assert nogang["reason"].startswith("stuck: holding 2/3 GPUs (no gang)")

    # Without all=true: only the jobs the provider submitted, i.e. the TrainJobs.
    assert set(rows(client)) == {"tj-done", "tj-train", "tj-capped", "tj-nogang"}
    assert set(rows(client, "?all=true&kind=PyTorchJob")) == {"pt-beside"}
    assert client.get("/api/jobs?kind=MPIJob").status_code == 400


def test_trainjob_detail_has_its_node_pods_podgroup_and_replicas(client: TestClient) -> None:
    answer = client.get(f"/api/jobs/{NAMESPACE}/tj-train?kind=TrainJob")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["job"]["kind"] == "TrainJob"
    assert data["podgroup"]["phase"] == "Running"
    assert data["replicas"] == [{"type": "Node", "desired": 2, "active": 2, "succeeded": 0, "failed": 0}]
    assert [(pod["replica_type"], pod["replica_index"], pod["phase"]) for pod in data["pods"]] == [
        ("node", "0", "Running"),
        ("node", "1", "Running"),
    ]
    assert data["timeline"]["admitted_at"] is not None
    # Without the kind the same job is found (no PyTorchJob has that name).
    assert client.get(f"/api/jobs/{NAMESPACE}/tj-train").json()["job"]["kind"] == "TrainJob"
    assert client.get(f"/api/jobs/{NAMESPACE}/tj-train?kind=PyTorchJob").status_code == 404


def test_actions_suspend_resume_and_delete_a_trainjob(cluster: SimCluster) -> None:
    reader = reader_on(cluster.kubeconfig_path)
    record = reader.job(NAMESPACE, "tj-capped", TRAINJOB)
    assert record is not None
    import datetime as dt

    def summary() -> dict[str, Any]:
        current = reader.job(NAMESPACE, "tj-capped", TRAINJOB)
        assert current is not None
        return current.summary(dt.datetime.now(dt.UTC), [])

    assert actions.perform("suspend", record, summary(), reader.hook, "tester") == (
        f"TrainJob {NAMESPACE}/tj-capped was suspended"
    )
    suspended = eventually(lambda: row if (row := summary())["suspended"] else None, timeout=30)
    with pytest.raises(actions.PageError, match="TrainJob trainers/tj-capped is suspended already"):
        actions.check_allowed("suspend", record, suspended)
    assert eventually(lambda: summary()["job_condition"] == "Suspended", timeout=30)
    assert actions.perform("resume", record, summary(), reader.hook, "tester").endswith("was resumed")
    eventually(lambda: not summary()["suspended"], timeout=30)

    outcome = actions.perform("delete", record, summary(), reader.hook, "tester")
    assert outcome == f"TrainJob {NAMESPACE}/tj-capped and its PodGroup were deleted"
    assert reader.job(NAMESPACE, "tj-capped", TRAINJOB) is None
    assert reader.hook.get_podgroup("tj-capped", NAMESPACE) is None


def test_page_suspends_and_resumes_a_trainjob_through_its_route(client: TestClient) -> None:
    headers = {actions.CSRF_HEADER: "test"}
    path = f"/api/jobs/{NAMESPACE}/tj-train"
    answer = client.post(f"{path}/suspend?kind=TrainJob", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"] == f"TrainJob {NAMESPACE}/tj-train was suspended"
    assert answer.json()["kind"] == "TrainJob"
    eventually(lambda: client.get(f"{path}?kind=TrainJob").json()["job"]["suspended"], timeout=30)
    again = client.post(f"{path}/suspend?kind=TrainJob", headers=headers)
    assert again.status_code == 409, again.text
    assert "TrainJob trainers/tj-train is suspended already" in again.json()["error"]["message"]
    resumed = client.post(f"{path}/resume?kind=trainjob", headers=headers)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["message"] == f"TrainJob {NAMESPACE}/tj-train was resumed"
    assert client.post(f"{path}/resume?kind=MPIJob", headers=headers).status_code == 400


def test_cluster_without_trainer_still_shows_its_pytorchjobs_without_error(
    cluster: SimCluster, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig_path)
    proxy.faults += [
        Fault(
            "GET",
            f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainjobs",
            status=404,
            times=99,
        ),
        Fault("GET", "/apis/trainer.kubeflow.org/v1alpha1", status=404, times=99),
    ]
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        path = tmp_path / "kubeconfig.yaml"
        path.write_text(yaml.safe_dump(proxy.config))
        app = create_app(authenticate=False, reader_factory=lambda settings: reader_on(str(path)))
        with TestClient(app) as test_client:
            answer = test_client.get("/api/jobs?all=true")
            assert answer.status_code == 200, answer.text
            data = answer.json()
            assert {job["name"]: job["kind"] for job in data["jobs"] if job["live"]} == {
                "pt-beside": "PyTorchJob"
            }
            assert data["warnings"] == []
            assert test_client.get(f"/api/jobs/{NAMESPACE}/pt-beside").status_code == 200
        assert ("GET", "/apis/trainer.kubeflow.org/v1alpha1") in proxy.seen  # asked, found missing
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_page_shows_each_rows_kind_and_opens_a_trainjob(
    browser: Any, cluster: SimCluster, tmp_path: Path
) -> None:
    from fastapi import FastAPI
    from selenium.webdriver.common.by import By

    root = FastAPI()
    root.mount(
        "/gang",
        create_app(authenticate=False, reader_factory=lambda settings: reader_on(cluster.kubeconfig_path)),
    )
    with served(root, "gang-ui-trainjobs") as base_url:
        browser.get(f"{base_url}/gang/?refresh=2")
        expected = {f"{NAMESPACE}/{name}" for name in ("tj-done", "tj-train", "tj-nogang")}
        wait_for(
            browser,
            lambda d: {row.get_attribute("data-job") for row in css(d, "#jobs-table tbody tr")} == expected,
            "the three TrainJobs the provider submitted",
        )
        css(browser, "#pause")[0].click()
        kinds = {cell.text for cell in css(browser, "#jobs-table tbody td.kind")}
        assert kinds == {"TrainJob"}
        browser.find_element(By.LINK_TEXT, "tj-train").click()
        wait_for(browser, lambda d: d.current_url.endswith(f"/gang/jobs/{NAMESPACE}/tj-train?kind=TrainJob"))
        wait_for(browser, lambda d: len(css(d, "#job-pods tbody tr")) == 2, "two node pods")
        assert "TrainJob" in css(browser, "#job-cards")[0].text
        assert "Node" in css(browser, "#job-replicas")[0].text
        browser.save_screenshot(str(tmp_path / "gang-trainjob.png"))
        assert script_errors(browser) == []
