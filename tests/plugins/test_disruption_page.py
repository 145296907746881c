"""The page shows gangs that lose pods while they run (docs/disruptions.md): live, and recorded.

A DAG run (``dag.test()``) on an embedded cluster of its own, in namespace ``disruption``:

- ``given_up`` (``on_disruption="retry"``, no retries) loses a pod to an eviction while it runs;
  its task gives the job up (``GangJobDisrupted``), deletes it and records the episode, so the
  page shows it from its record: ended ``disrupted``, with a ``disruptions`` row;
- ``train`` (``wait_for_completion=False``) runs on; then the test evicts one of its pods, and
  the page shows it live: ``disrupted``, with what, which pod, since when, back in its queue.

An eviction here is what the Eviction API does to a pod (``pkg/registry/core/pod/storage/
eviction.go``): the ``DisruptionTarget`` condition, reason ``EvictionByEvictionAPI``, through
``pods/status``, then a graceful delete. A finalizer of the test's own keeps the pod
Terminating (as a pod on a dead node stays): the simulated kubelet confirms a deletion at once,
and the training-operator recreates the replica the moment the old pod is gone.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from airflow_gang.model.gang_state import JOB_NAME_LABEL
from airflow_gang.model.naming import TASK_ID_LABEL, job_name
from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.settings import UiSettings
from gang_sim.cluster import SimCluster
from tests.plugins.conftest import (
    ADMITTED_PHASES,
    cluster_behind,
    css,
    script_errors,
    served,
    wait_for,
    write_scenario_dag,
)
from tests.waiting import eventually

DAG_ID = "gang_disruption_scenario"
NAMESPACE = "disruption"
CONN_ID = "gang_disruption_cluster"
SETTINGS = UiSettings(conn_id=CONN_ID, namespaces=(NAMESPACE,))
HOLD = "test.airflow-gang.io/hold"
EVICTION_MESSAGE = "Eviction API: evicting"
PURPLE = "rgba(130, 80, 223, 1)"  # --disrupted in gang.css

DAG_SOURCE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_gang.operators.pytorch_job import PyTorchJobOperator

common = dict(
    image="ghcr.io/acme/train:1", command=["python", "train.py"], namespace="__NAMESPACE__",
    kubernetes_conn_id="__CONN_ID__", workers=1, resources={"nvidia.com/gpu": 1}, poll_interval=0.2,
    admission_timeout=60, deferrable=False, get_logs=False,
    pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "600"}}},
)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    given_up = PyTorchJobOperator(task_id="given_up", on_disruption="retry", retries=0, **common)
    train = PyTorchJobOperator(task_id="train", wait_for_completion=False, trigger_rule="all_done", **common)
    given_up >> train
"""


@dataclass(frozen=True)
class Ran:
    cluster: SimCluster
    jobs: dict[str, str]  # "given_up", "train" -> job name
    evicted: dict[str, tuple[str, str]]  # the same -> (pod, node) evicted


def pods_of(core: k8s.CoreV1Api, task_id: str) -> list[Any]:
    return list(core.list_namespaced_pod(NAMESPACE, label_selector=f"{TASK_ID_LABEL}={task_id}").items)


def running_worker(core: k8s.CoreV1Api, task_id: str) -> Any | None:
    """The task's worker pod once both replicas of its gang run, else None."""
    pods = pods_of(core, task_id)
    if len(pods) != 2 or any(p.status.phase != "Running" or p.metadata.deletion_timestamp for p in pods):
        return None
    return next(p for p in pods if p.metadata.name.endswith("-worker-0"))


def evict(core: k8s.CoreV1Api, pod: Any) -> None:
    """As the Eviction API does, with the pod held Terminating by the test's finalizer."""
    name = pod.metadata.name
    core.patch_namespaced_pod(name, NAMESPACE, {"metadata": {"finalizers": [HOLD]}})
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    target = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": EVICTION_MESSAGE,
        "lastTransitionTime": now,
    }
    core.patch_namespaced_pod_status(name, NAMESPACE, {"status": {"conditions": [target]}})
    core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=600)


def release(core: k8s.CoreV1Api, name: str) -> None:
    try:
        core.patch_namespaced_pod(name, NAMESPACE, {"metadata": {"finalizers": None}})
    except k8s.ApiException as error:
        if error.status != 404:
            raise


class Evictor:
    """Once ``given_up``'s task has seen its gang admitted (its progress entry says so), evict
    its worker; release the pod once the task has deleted the job (so the task reads the pod's
    mark, and its deletion can finish)."""

    def __init__(self, api: k8s.ApiClient, page: TestClient) -> None:
        self.core, self.custom, self.page = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api), page
        self.evicted: tuple[str, str] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="evictor", daemon=True)

    def __enter__(self) -> Evictor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._thread.join(timeout=90)

    def _job_going(self) -> bool:
        jobs = self.custom.list_namespaced_custom_object(
            "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", label_selector=f"{TASK_ID_LABEL}=given_up"
        )["items"]
        return all(job["metadata"].get("deletionTimestamp") for job in jobs)

    def _admission_seen(self) -> bool:
        pod = running_worker(self.core, "given_up")
        if pod is None:
            return False
        answer = self.page.get(f"/api/jobs/{NAMESPACE}/{pod.metadata.labels[JOB_NAME_LABEL]}")
        progress = answer.json().get("progress") or {} if answer.status_code == 200 else {}
        return (progress.get("value") or {}).get("phase") in ADMITTED_PHASES

    def _run(self) -> None:
        try:
            eventually(self._admission_seen, timeout=60, message="(given_up's task never saw it admitted)")
            pod = running_worker(self.core, "given_up")
            assert pod is not None
            evict(self.core, pod)
            self.evicted = (pod.metadata.name, pod.spec.node_name)
            try:
                eventually(self._job_going, timeout=60, message="(given_up's job was not deleted)")
            finally:
                release(self.core, pod.metadata.name)
        except BaseException as error:  # reported by the fixture
            self.error = error


def write_dag() -> Any:
    return write_scenario_dag(DAG_ID, DAG_SOURCE, namespace=NAMESPACE, conn_id=CONN_ID)


@pytest.fixture(scope="module")
def ran() -> Iterator[Ran]:
    with cluster_behind(CONN_ID, NAMESPACE) as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        held: list[str] = []
        try:
            page = TestClient(create_app(authenticate=False, settings_loader=lambda: SETTINGS))
            with page, Evictor(api, page) as evictor:
                dag_run = write_dag().test()
            assert evictor.error is None, evictor.error
            assert evictor.evicted is not None
            states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
            assert states == {"given_up": "failed", "train": "success"}
            jobs = {key: job_name(DAG_ID, key, dag_run.run_id, -1, 1) for key in ("given_up", "train")}
            eventually(lambda: running_worker(core, "train") is not None, timeout=60)
            pod = running_worker(core, "train")
            assert pod is not None
            evict(core, pod)
            held.append(pod.metadata.name)
            evicted = {"given_up": evictor.evicted, "train": (pod.metadata.name, pod.spec.node_name)}
            yield Ran(cluster, jobs, evicted)
        finally:
            for name in held:
                release(core, name)


@pytest.fixture(scope="module")
def client(ran: Ran) -> Iterator[TestClient]:
    with TestClient(create_app(authenticate=False, settings_loader=lambda: SETTINGS)) as test_client:
        yield test_client


def rows(client: TestClient, query: str = "") -> dict[str, dict[str, Any]]:
    answer = client.get(f"/api/jobs{query}")
    assert answer.status_code == 200, answer.text
    return {job["name"]: job for job in answer.json()["jobs"]}


def live_row(client: TestClient, ran: Ran) -> dict[str, Any]:
    """The ``train`` row once the page sees it disrupted (a Volcano session may lag)."""
    eventually(lambda: rows(client)[ran.jobs["train"]]["state"] == "disrupted", timeout=30)
    return rows(client)[ran.jobs["train"]]


# -- the API -------------------------------------------------------------------------------------


def test_a_running_gang_that_lost_a_pod_is_disrupted_with_what_which_and_since_when(
    client: TestClient, ran: Ran
) -> None:
    row = live_row(client, ran)
    pod, _ = ran.evicted["train"]
    assert row["live"] is True
    disruption = row["disruption"]
    assert disruption["reason"] == "evicted"
    assert disruption["detail"] == EVICTION_MESSAGE
    assert (disruption["pods_lost"], disruption["pods"]) == (1, [pod])
    assert disruption["since"] is not None
    assert dt.datetime.fromisoformat(disruption["since"]) <= dt.datetime.now(dt.UTC)
    assert disruption["requeued"] is True  # two of two pods needed: below its minMember
    assert row["reason"].startswith(f"evicted: 1 pods lost since {disruption['since']}, back in the queue")
    assert row["reason"].endswith(EVICTION_MESSAGE)


def test_a_job_given_up_after_a_disruption_keeps_its_episode(client: TestClient, ran: Ran) -> None:
    row = rows(client)[ran.jobs["given_up"]]
    pod, node = ran.evicted["given_up"]
    assert (row["live"], row["state"], row.get("disruption")) == (False, "disrupted", None)
    assert "on_disruption='retry'" in row["reason"]
    (episode,) = row["disruptions"]
    assert (episode["number"], episode["reason"], episode["detail"]) == (1, "evicted", EVICTION_MESSAGE)
    assert (episode["pods"], episode["nodes"]) == ([pod], [node])
    assert row["queued_at"] <= episode["started_at"] <= row["finished_at"]
    assert episode["requeued"] is True
    assert episode["readmitted_at"] is None


def test_the_state_filter_and_the_timeline_know_disrupted(client: TestClient, ran: Ran) -> None:
    live_row(client, ran)
    answer = client.get("/api/jobs").json()
    states = answer["states"]
    assert states.index("running") < states.index("disrupted") < states.index("succeeded")
    assert set(rows(client, "?state=disrupted")) == set(ran.jobs.values())
    assert rows(client, "?state=running") == {}
    timeline = client.get("/api/timeline").json()
    drawn = {entry["name"]: entry["gang_state"] for queue in timeline["queues"] for entry in queue["jobs"]}
    assert drawn == dict.fromkeys(ran.jobs.values(), "disrupted")


# -- the same, in a browser ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def page_url(ran: Ran) -> Iterator[str]:
    """The app mounted at /gang as the API server mounts it, served by uvicorn."""
    root = FastAPI()
    root.mount("/gang", create_app(authenticate=False, settings_loader=lambda: SETTINGS))
    with served(root, "gang-disruption-ui") as url:
        yield f"{url}/gang"


def texts(browser: Any, selector: str) -> list[str]:
    return [node.text for node in css(browser, selector)]


def titles(browser: Any, selector: str) -> list[str]:
    return [node.get_attribute("textContent") for node in css(browser, f"{selector} title")]


def test_in_a_browser_disrupted_jobs_have_their_badge_filter_entry_and_hatched_bars(
    browser: Any, page_url: str, client: TestClient, ran: Ran, tmp_path: Path
) -> None:
    live_row(client, ran)
    browser.get(f"{page_url}/?refresh=30")
    wait_for(browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 2, "the two jobs")
    wait_for(browser, lambda d: len(css(d, "svg.timeline-svg")) == 1, "the timeline of queue default")
    css(browser, "#pause")[0].click()

    table = {row.get_attribute("data-job"): row for row in css(browser, "#jobs-table tbody tr")}
    assert {row.get_attribute("data-state") for row in table.values()} == {"disrupted"}
    badges = css(browser, "#jobs-table .badge.state-disrupted")
    assert [badge.text for badge in badges] == ["disrupted", "disrupted"]
    assert {badge.value_of_css_property("background-color") for badge in badges} == {PURPLE}
    options = [option.get_attribute("value") for option in css(browser, "select[name=state] option")]
    assert options.index("running") < options.index("disrupted") < options.index("succeeded")
    assert css(browser, ".legend .swatch.disruption")
    assert css(browser, ".legend .swatch.disrupted")

    # The live job: running, then hatched from its pod's eviction to now; the recorded one:
    # its run in the colour of its end, with its episode hatched over it.
    chart = 'svg[data-queue="default"]'
    hatched = css(browser, f"{chart} rect.bar-disruption")
    assert len(hatched) == 2
    assert all("gang-disruption-hatch" in bar.value_of_css_property("fill") for bar in hatched)
    assert len(css(browser, f"{chart} rect.bar-running")) == 1
    assert len(css(browser, f"{chart} rect.bar-disrupted")) == 1
    tips = titles(browser, f"{chart} rect.bar-disruption")
    live_pod, _ = ran.evicted["train"]
    recorded_pod, node = ran.evicted["given_up"]
    live_tip = next(tip for tip in tips if tip.startswith(ran.jobs["train"]))
    assert f"disrupted, evicted: 1 pod lost ({live_pod}) since " in live_tip
    assert "back in the queue" in live_tip
    recorded_tip = next(tip for tip in tips if tip.startswith(ran.jobs["given_up"]))
    assert f"disruption #1, evicted: 1 pod lost ({recorded_pod} on {node})" in recorded_tip
    assert recorded_tip.endswith(EVICTION_MESSAGE)
    assert not css(browser, "#banner")[0].is_displayed()
    browser.save_screenshot(str(tmp_path / "disrupted-jobs.png"))
    assert script_errors(browser) == []


def test_in_a_browser_the_live_job_says_what_disrupted_it(
    browser: Any, page_url: str, client: TestClient, ran: Ran, tmp_path: Path
) -> None:
    live_row(client, ran)
    browser.get(f"{page_url}/jobs/{NAMESPACE}/{ran.jobs['train']}?refresh=30")
    wait_for(browser, lambda d: css(d, "#job-state")[0].text == "disrupted", "the disrupted job")
    wait_for(browser, lambda d: css(d, "#job-disruption"), "the disruption card")
    css(browser, "#pause")[0].click()
    pod, _ = ran.evicted["train"]
    assert css(browser, "#job-disruption h3")[0].text == "What disrupted it"
    assert texts(browser, "#job-disruption .disruption-reason")[0].startswith("evicted: by the Eviction API")
    assert texts(browser, "#job-disruption .disruption-pods-lost") == [f"1: {pod}"]
    assert texts(browser, "#job-disruption .disruption-since")[0].endswith(" ago)")
    assert texts(browser, "#job-disruption .disruption-queue")[0].startswith("back in the queue")
    assert texts(browser, "#job-disruption .disruption-detail") == [EVICTION_MESSAGE]
    assert css(browser, "#job-state")[0].value_of_css_property("background-color") == PURPLE
    assert not css(browser, "#job-reason")  # the card says it; no "Why it waits" beside it
    assert not css(browser, "#section-disruptions")[0].is_displayed()  # nothing recorded yet
    assert len(css(browser, "#job-timeline rect.bar-running")) == 1
    assert len(css(browser, "#job-timeline rect.bar-disruption")) == 1
    assert any("Terminating" in row.text or pod in row.text for row in css(browser, "#job-pods tbody tr"))
    browser.save_screenshot(str(tmp_path / "disrupted-live-job.png"))
    assert script_errors(browser) == []


def test_in_a_browser_the_recorded_job_lists_its_disruptions(
    browser: Any, page_url: str, ran: Ran, tmp_path: Path
) -> None:
    browser.get(f"{page_url}/jobs/{NAMESPACE}/{ran.jobs['given_up']}?refresh=30")
    wait_for(browser, lambda d: css(d, "#job-state")[0].text == "disrupted", "the recorded job")
    wait_for(browser, lambda d: css(d, "#section-disruptions")[0].is_displayed(), "the disruptions table")
    css(browser, "#pause")[0].click()
    assert css(browser, "#recorded-note")[0].is_displayed()
    pod, node = ran.evicted["given_up"]
    headers = texts(browser, "#job-disruptions thead th")
    assert headers == ["#", "Reason", "Pods", "Nodes", "Started", "Re-admitted", "Lasted", "Detail"]
    (row,) = css(browser, "#job-disruptions tbody tr")
    cells = [cell.text for cell in row.find_elements("css selector", "td")]
    assert cells[:4] == ["1", "evicted", pod, node]
    assert cells[4].startswith("20")  # a time, as the page shows them
    assert cells[5] == "not re-admitted"  # given up while below its minMember
    assert cells[7] == EVICTION_MESSAGE
    assert not css(browser, "#job-disruption")  # no live disruption card for a recorded job
    card = css(browser, ".reason-card")[0]
    assert card.find_element("css selector", "h3").text == "How it ended"
    assert "on_disruption='retry'" in css(browser, "#job-reason")[0].text
    assert len(css(browser, "#job-timeline rect.bar-disrupted")) == 1
    assert len(css(browser, "#job-timeline rect.bar-disruption")) == 1
    browser.save_screenshot(str(tmp_path / "disrupted-recorded-job.png"))
    assert script_errors(browser) == []
