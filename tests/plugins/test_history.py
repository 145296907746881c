"""The page keeps every job its tasks ran after cleanup deleted it, and says honestly when a job
without gang scheduling is stuck.

A DAG run (``dag.test()``) on an embedded cluster of its own, in namespace ``history``, ends
with every job deleted: one succeeded (``delete_on_finish="on_success"``), one failed
(``"always"``, waited for in the triggerer), one never admitted in either of its two tries (each
admission timeout deletes its job). The API then answers from the operator's records in the
task state store, read from the metadata DB, as the API server reads them.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import job_name
from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.settings import UiSettings
from gang_sim.cluster import SimCluster
from tests.plugins.conftest import (
    cluster_behind,
    css,
    docs_screenshot,
    script_errors,
    served,
    wait_for,
    write_scenario_dag,
)
from tests.support.submission import gang_spec, submit
from tests.waiting import eventually

DAG_ID = "gang_history_scenario"
NAMESPACE = "history"
CONN_ID = "gang_history_cluster"
SETTINGS = UiSettings(conn_id=CONN_ID, namespaces=(NAMESPACE,))
# A zone far from the machine's, so a page that ignored Airflow's setting would show other hours.
AIRFLOW_UI_TIMEZONE = "Asia/Kolkata"

DAG_SOURCE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_gang.operators.pytorch_job import PyTorchJobOperator


def sim(**annotations):
    return {"metadata": {"annotations": {f"sim.airflow-gang.io/{k}": v for k, v in annotations.items()}}}


common = dict(
    image="ghcr.io/acme/train:1", command=["python", "train.py"], namespace="__NAMESPACE__",
    kubernetes_conn_id="__CONN_ID__", resources={"nvidia.com/gpu": 1}, poll_interval=0.2,
    admission_timeout=60, trigger_rule="all_done",
)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    done = PyTorchJobOperator(
        task_id="done", workers=1, deferrable=False,
        pod_template=sim(duration="1.5", log="epoch 1\\nHISTORY-MARKER accuracy=0.9"), **common,
    )
    broken = PyTorchJobOperator(
        task_id="broken", workers=1, deferrable=True, restart_policy="Never", retries=0,
        delete_on_finish="always", pod_template=sim(duration="0.3", **{"exit-code": "3"}), **common,
    )
    starved = PyTorchJobOperator(
        task_id="starved", workers=7, deferrable=True, retries=1, retry_delay=dt.timedelta(seconds=0),
        pod_template=sim(duration="1"), **{**common, "admission_timeout": 2},
    )
    done >> broken >> starved
"""


@dataclass(frozen=True)
class Ran:
    cluster: SimCluster
    run_id: str
    jobs: dict[str, str]  # "done", "broken", "starved#1", "starved#2" -> job name


def write_dag(dag_id: str, source: str) -> Any:
    return write_scenario_dag(dag_id, source, namespace=NAMESPACE, conn_id=CONN_ID)


@pytest.fixture(scope="module")
def ran() -> Iterator[Ran]:
    with cluster_behind(CONN_ID, NAMESPACE) as cluster:
        dag_run = write_dag(DAG_ID, DAG_SOURCE).test()
        states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
        assert states == {"done": "success", "broken": "failed", "starved": "failed"}
        jobs = {
            "done": job_name(DAG_ID, "done", dag_run.run_id, -1, 1),
            "broken": job_name(DAG_ID, "broken", dag_run.run_id, -1, 1),
            "starved#1": job_name(DAG_ID, "starved", dag_run.run_id, -1, 1),
            "starved#2": job_name(DAG_ID, "starved", dag_run.run_id, -1, 2),
        }
        yield Ran(cluster, dag_run.run_id, jobs)


@pytest.fixture(scope="module")
def client(ran: Ran) -> Iterator[TestClient]:
    with TestClient(create_app(authenticate=False, settings_loader=lambda: SETTINGS)) as test_client:
        yield test_client


def rows(client: TestClient, query: str = "") -> dict[str, Any]:
    answer = client.get(f"/api/jobs{query}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_every_job_is_gone_from_the_cluster(ran: Ran) -> None:
    with ran.cluster.api_client() as api:
        listed = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
            "kubeflow.org", "v1", NAMESPACE, "pytorchjobs"
        )
    assert listed["items"] == []


def test_the_jobs_table_still_lists_every_job_with_its_outcome(client: TestClient, ran: Ran) -> None:
    data = rows(client)
    assert data["total"] == 4
    assert data["live"] == 0
    by_name = {job["name"]: job for job in data["jobs"]}
    assert set(by_name) == set(ran.jobs.values())
    outcomes = {key: by_name[name]["state"] for key, name in ran.jobs.items()}
    assert outcomes == {
        "done": "succeeded",
        "broken": "failed",
        "starved#1": "admission_timeout",
        "starved#2": "admission_timeout",
    }
    for job in data["jobs"]:
        assert job["live"] is False
        assert job["queue"] == "default"
        assert job["namespace"] == NAMESPACE
        assert job["airflow"]["dag_id"] == DAG_ID
        assert job["airflow"]["run_id"] == ran.run_id
        assert job["airflow"]["resolved"] is True
    # One row per try: the retry after an admission timeout ran a job of its own.
    starved = [by_name[ran.jobs[key]] for key in ("starved#1", "starved#2")]
    assert [job["airflow"]["try_number"] for job in starved] == [1, 2]
    assert all("was not admitted" in job["reason"] for job in starved)
    assert all(job["admitted_at"] is None and job["run_seconds"] is None for job in starved)
    # Their times are the cluster's: from the job's creation to the moment the trigger asked to
    # delete it, not the moment the resumed task wrote its record (issue 38: "1m 39s" for 90 s).
    for job in starved:
        assert 2 <= job["queued_seconds"] < 30
        assert dt.datetime.fromisoformat(job["finished_at"]) < dt.datetime.fromisoformat(job["recorded_at"])
    # Newest first, by submission.
    submitted = [job["created_at"] for job in data["jobs"]]
    assert submitted == sorted(submitted, reverse=True)
    assert data["jobs"][0]["name"] == ran.jobs["starved#2"]


def test_a_succeeded_job_keeps_its_times_and_gpu_seconds(client: TestClient, ran: Ran) -> None:
    done = next(job for job in rows(client)["jobs"] if job["name"] == ran.jobs["done"])
    assert done["gpus"] == 2.0
    submitted, admitted, finished = (
        dt.datetime.fromisoformat(done[key]) for key in ("queued_at", "admitted_at", "finished_at")
    )
    assert submitted <= admitted <= finished
    assert 0 < done["run_seconds"] < 30
    assert done["gpu_seconds"] == pytest.approx(2 * done["run_seconds"], abs=0.1)
    assert done["replicas"] == {"Master": 1, "Worker": 1}


def test_a_failed_job_keeps_its_failing_replica_and_exit_code(client: TestClient, ran: Ran) -> None:
    broken = next(job for job in rows(client)["jobs"] if job["name"] == ran.jobs["broken"])
    assert broken["exit_code"] == 3
    assert broken["failed_replica"] in {"Master 0", "Worker 0"}
    assert f"Replica {broken['failed_replica']}" in broken["reason"]
    assert "exited with code 3" in broken["reason"]
    assert "log lines" not in broken["reason"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?state=admission_timeout", {"starved#1", "starved#2"}),
        ("?state=succeeded,failed", {"done", "broken"}),
        (f"?dag_id={DAG_ID}&queue=default", {"done", "broken", "starved#1", "starved#2"}),
        ("?dag_id=another_dag", set()),
        ("?since=2100-01-01T00:00:00Z", set()),
        ("?until=2000-01-01T00:00:00Z", set()),
    ],
)
def test_filters_apply_to_recorded_jobs(client: TestClient, ran: Ran, query: str, expected: set[str]) -> None:
    keys = {name: key for key, name in ran.jobs.items()}
    assert {keys[job["name"]] for job in rows(client, query)["jobs"]} == expected


def test_paging_keeps_the_order_and_counts_every_match(client: TestClient) -> None:
    everything = [job["name"] for job in rows(client)["jobs"]]
    page = rows(client, "?limit=2&offset=1")
    assert page["total"] == 4
    assert (page["limit"], page["offset"]) == (2, 1)
    assert [job["name"] for job in page["jobs"]] == everything[1:3]
    assert client.get("/api/jobs?limit=0").status_code == 400
    bad_time = client.get("/api/jobs?since=yesterday")
    assert bad_time.status_code == 400
    assert "since must be an ISO 8601 time" in bad_time.json()["error"]["message"]


def test_the_job_page_of_a_deleted_job_shows_what_its_task_recorded(client: TestClient, ran: Ran) -> None:
    answer = client.get(f"/api/jobs/{NAMESPACE}/{ran.jobs['done']}")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["job"]["state"] == "succeeded"
    assert data["job"]["live"] is False
    assert data["recorded"]["recorded_at"]
    assert "HISTORY-MARKER accuracy=0.9" in data["recorded"]["log_tail"]
    assert data["timeline"]["admitted_at"] == data["job"]["admitted_at"]
    assert data["airflow"]["task_instance"] == {"state": "success", "try_number": 1}
    assert data["airflow"]["task_instance_url"].endswith("/tasks/done")
    assert data["pods"] == []
    assert data["podgroup"] is None


def test_the_job_page_after_an_admission_timeout_names_the_try(client: TestClient, ran: Ran) -> None:
    data = client.get(f"/api/jobs/{NAMESPACE}/{ran.jobs['starved#1']}").json()
    assert data["job"]["state"] == "admission_timeout"
    assert data["airflow"]["try_number"] == 1
    assert "was not admitted" in data["job"]["reason"]


def test_a_job_nobody_ran_is_still_a_404(client: TestClient) -> None:
    answer = client.get(f"/api/jobs/{NAMESPACE}/never-submitted-1a2b3c4d")
    assert answer.status_code == 404
    assert "no Airflow task recorded it" in answer.json()["error"]["message"]


def test_the_timeline_draws_the_recorded_jobs_of_the_page(client: TestClient, ran: Ran) -> None:
    data = client.get("/api/timeline").json()
    drawn = {entry["name"]: entry for queue in data["queues"] for entry in queue["jobs"]}
    assert set(drawn) == set(ran.jobs.values())
    assert drawn[ran.jobs["done"]]["gang_state"] == "succeeded"
    assert drawn[ran.jobs["starved#2"]]["admitted_at"] is None
    assert len(client.get("/api/timeline?limit=1").json()["queues"][0]["jobs"]) == 1


# -- the same, in a browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def page_url(ran: Ran) -> Iterator[str]:
    """The app mounted at /gang as the API server mounts it, served by uvicorn."""
    root = FastAPI()
    root.mount("/gang", create_app(authenticate=False, settings_loader=lambda: SETTINGS))
    with served(root, "gang-history-ui") as url:
        yield f"{url}/gang"


def with_airflow_timezone(browser: Any, url: str, zone: str) -> None:
    """Open ``url`` as a user who chose ``zone`` in the page's timezone control (the page keeps
    the choice under its own localStorage key; it does not read Airflow UI's internal one)."""
    browser.get(url)
    browser.execute_script("window.localStorage.setItem('airflow-gang.timezone', arguments[0]);", zone)
    browser.get(url)


def test_in_a_browser_deleted_jobs_stay_listed_in_airflows_timezone(
    browser: Any, page_url: str, client: TestClient, ran: Ran, tmp_path: Path
) -> None:
    with_airflow_timezone(browser, f"{page_url}/?refresh=30", AIRFLOW_UI_TIMEZONE)
    wait_for(browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 4, "four recorded jobs")
    rows = {row.get_attribute("data-job").split("/")[1]: row for row in css(browser, "#jobs-table tbody tr")}
    assert set(rows) == set(ran.jobs.values())
    assert {row.get_attribute("data-live") for row in rows.values()} == {"false"}
    assert all("deleted" in row.text for row in rows.values())
    badges = {row.get_attribute("data-state") for row in rows.values()}
    assert badges == {"succeeded", "failed", "admission_timeout"}
    assert css(browser, "#timezone")[0].text == f"times in {AIRFLOW_UI_TIMEZONE}"
    api_rows = {job["name"]: job for job in rows_of(client)}
    submitted = dt.datetime.fromisoformat(api_rows[ran.jobs["done"]]["queued_at"])
    shown = rows[ran.jobs["done"]].find_element("css selector", "td.submitted").text
    assert shown == submitted.astimezone(ZoneInfo(AIRFLOW_UI_TIMEZONE)).strftime("%Y-%m-%d %H:%M:%S")
    assert css(browser, "#page-range")[0].text == "1\u20134 of 4"
    assert len(css(browser, "svg.timeline-svg rect.bar-admission_timeout")) == 2
    assert not css(browser, "#banner")[0].is_displayed()
    docs_screenshot(browser, tmp_path, "gang-jobs-after-cleanup.png")
    assert script_errors(browser) == []


def test_in_a_browser_the_gang_job_link_of_a_deleted_job_opens_its_record(
    browser: Any, page_url: str, ran: Ran, tmp_path: Path
) -> None:
    for key, state in (("done", "succeeded"), ("starved#1", "admission_timeout")):
        browser.get(f"{page_url}/jobs/{NAMESPACE}/{ran.jobs[key]}")
        wait_for(browser, lambda d, state=state: css(d, "#job-state")[0].text == state, f"the {key} page")
        assert css(browser, "#recorded-note")[0].is_displayed()
        assert not css(browser, "#banner")[0].is_displayed()
        assert not css(browser, "#section-pods")[0].is_displayed()
        assert css(browser, "#job-airflow a.ti-link")
        if key == "starved#1":  # the page the "Gang job" link opens after an admission timeout
            docs_screenshot(browser, tmp_path, "gang-job-admission-timeout.png")
        else:
            browser.save_screenshot(str(tmp_path / f"history-{key}.png"))
        assert script_errors(browser) == []
    browser.get(f"{page_url}/jobs/{NAMESPACE}/{ran.jobs['done']}")
    wait_for(browser, lambda d: "HISTORY-MARKER" in css(d, "#job-log")[0].text, "the master's log tail")


def rows_of(client: TestClient, query: str = "") -> list[dict[str, Any]]:
    return list(rows(client, query)["jobs"])


SENSED_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import PyTorchJobSensor

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    submit = PyTorchJobOperator(
        task_id="submit", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        namespace="__NAMESPACE__", kubernetes_conn_id="__CONN_ID__", wait_for_completion=False,
        wait_for_admission=False,
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": "1",
            "sim.airflow-gang.io/log": "epoch 1\\nSENSED-MARKER loss=0.1",
        }}},
    )
    wait = PyTorchJobSensor(
        task_id="wait", job_name="{{ ti.xcom_pull(task_ids='submit', key='job_name') }}",
        namespace="__NAMESPACE__", kubernetes_conn_id="__CONN_ID__", poke_interval=0.5, timeout=120,
    )
    submit >> wait
"""


def test_the_job_page_links_the_sensor_that_waits_for_the_job(ran: Ran, client: TestClient) -> None:
    dag_id = "gang_history_sensed"
    dag_run = write_dag(dag_id, SENSED_DAG).test()
    assert {ti.task_id: ti.state for ti in dag_run.get_task_instances()} == {
        "submit": "success",
        "wait": "success",
    }
    name = job_name(dag_id, "submit", dag_run.run_id, -1, 1)
    airflow = client.get(f"/api/jobs/{NAMESPACE}/{name}").json()["airflow"]
    assert airflow["task_id"] == "submit"
    (waiter,) = airflow["waited_by"]
    assert (waiter["dag_id"], waiter["task_id"], waiter["state"]) == (dag_id, "wait", "success")
    assert waiter["task_instance_url"].endswith("/tasks/wait")

    # A teardown deletes the job (as gang_vs_deadlock's cleanup does): one row, the submitting
    # task's, with the outcome the sensor saw.
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=ran.cluster.kubeconfig_path)
    hook.delete_pytorchjob(name, NAMESPACE)
    eventually(lambda: hook.get_pytorchjob(name, NAMESPACE) is None, timeout=30)
    (row,) = rows(client, f"?dag_id={dag_id}")["jobs"]
    assert (row["name"], row["live"], row["state"]) == (name, False, "succeeded")
    assert row["airflow"]["task_id"] == "submit"
    assert row["admitted_at"] is not None
    assert row["run_seconds"] is not None
    # The sensor saw the end, so it kept the master's last lines: the page shows them once the
    # job is gone, as for a job its operator waited for.
    recorded = client.get(f"/api/jobs/{NAMESPACE}/{name}").json()["recorded"]
    assert "SENSED-MARKER loss=0.1" in recorded["log_tail"]


# -- a job placed pod by pod (no gang) that holds part of what it needs -------------------------


def test_a_partly_placed_job_without_gang_is_stuck_holding_its_gpus(ran: Ran, client: TestClient) -> None:
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=ran.cluster.kubeconfig_path)

    holder = gang_spec(600, workers=0, gang_scheduling="disabled")  # one replica on one of the four GPUs
    submit("holder", holder, hook=hook, namespace=NAMESPACE)
    eventually(lambda: len(hook.list_job_pods("holder", NAMESPACE)) == 1, timeout=30)
    eventually(
        lambda: all(p["spec"].get("nodeName") for p in hook.list_job_pods("holder", NAMESPACE)), timeout=30
    )
    # Four replicas: three fit, the fourth never does.
    submit("stuck", gang_spec(600, workers=3, gang_scheduling="disabled"), hook=hook, namespace=NAMESPACE)

    def stuck_row() -> dict[str, Any] | None:
        jobs = rows(client, "?all=true")["jobs"]
        return next((job for job in jobs if job["name"] == "stuck" and job["state"] == "stuck"), None)

    eventually(lambda: stuck_row() is not None, timeout=30, message="(no stuck row)")
    row = stuck_row()
    assert row is not None
    assert row["reason"].startswith("stuck: holding 3/4 GPUs (no gang)")
    assert row["replicas_bound"] == 3
    assert row["run_seconds"] is None
    holder = next(job for job in rows(client, "?all=true")["jobs"] if job["name"] == "holder")
    assert holder["state"] == "running"
    assert rows(client, "?all=true&state=stuck")["total"] == 1
    timeline = client.get("/api/timeline?all=true&state=stuck").json()
    assert [entry["gang_state"] for queue in timeline["queues"] for entry in queue["jobs"]] == ["stuck"]


def test_in_a_browser_the_stuck_job_is_shown_stuck(
    browser: Any, page_url: str, client: TestClient, tmp_path: Path
) -> None:
    if not rows(client, "?all=true&state=stuck")["total"]:
        pytest.skip("needs the stuck job of the test above (run the module whole)")
    browser.get(f"{page_url}/?all=true&state=stuck&refresh=30")
    wait_for(browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 1, "the stuck job")
    row = css(browser, "#jobs-table tbody tr")[0]
    assert row.get_attribute("data-state") == "stuck"
    assert "holding 3/4 GPUs (no gang)" in row.find_element("css selector", "td.reason").get_attribute(
        "title"
    )
    assert len(css(browser, "svg.timeline-svg rect.bar-stuck")) == 1
    assert not css(browser, "svg.timeline-svg rect.bar-running")
    browser.save_screenshot(str(tmp_path / "stuck.png"))
    assert script_errors(browser) == []

    # Unfiltered, the stuck job beside the job that holds the fourth GPU and the deleted jobs.
    browser.get(f"{page_url}/?all=true&refresh=30")
    wait_for(browser, lambda d: css(d, '#jobs-table tbody tr[data-state="stuck"]'), "the stuck row")
    wait_for(browser, lambda d: css(d, "svg.timeline-svg rect.bar-stuck"), "the stuck bar")
    css(browser, "#pause")[0].click()
    docs_screenshot(browser, tmp_path, "gang-jobs-no-gang-stuck.png")


# -- actions: delete, suspend, resume (the open app lets anyone; Airflow's refusal is tested
# -- against the real API server in test_airflow_api_server.py) --------------------------------

PARKED_DAG = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="parked", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        namespace="__NAMESPACE__", kubernetes_conn_id="__CONN_ID__", run_policy={"suspend": True},
        wait_for_completion=False, wait_for_admission=False,
    )
"""


def audit_events(dag_id: str) -> list[tuple[str, str, str]]:
    from airflow.models.log import Log
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(Log.event, Log.owner, Log.extra).where(Log.dag_id == dag_id).order_by(Log.id)
        ).all()
    return [(row.event, row.owner, row.extra) for row in rows if row.event.startswith("gang_job_")]


def test_actions_resume_suspend_and_delete_a_job_and_write_the_audit_log(
    ran: Ran, client: TestClient
) -> None:
    dag_id = "gang_history_actions"
    dag_run = write_dag(dag_id, PARKED_DAG).test()
    assert [ti.state for ti in dag_run.get_task_instances()] == ["success"]
    name = job_name(dag_id, "parked", dag_run.run_id, -1, 1)
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=ran.cluster.kubeconfig_path)
    url = f"/api/jobs/{NAMESPACE}/{name}"
    headers = {"X-Requested-By": "test"}

    def suspended() -> bool:
        job = hook.get_pytorchjob(name, NAMESPACE)
        assert job is not None
        return bool(job["spec"]["runPolicy"].get("suspend"))

    parked = client.get(url).json()["job"]
    assert parked["suspended"] is True
    # A suspended job waits for nobody's GPUs: no place in the queue, and the reason says so.
    assert parked["state"] == "queued"
    assert parked["reason"].startswith("suspended (spec.runPolicy.suspend): it has no pods")
    assert parked.get("position") is None
    no_header = client.post(f"{url}/resume")
    assert no_header.status_code == 400
    assert "X-Requested-By" in no_header.json()["error"]["message"]
    assert suspended()

    resumed = client.post(f"{url}/resume", headers=headers)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["message"] == f"PyTorchJob {NAMESPACE}/{name} was resumed"
    assert not suspended()
    again = client.post(f"{url}/resume", headers=headers)
    assert again.status_code == 409
    assert "is not suspended" in again.json()["error"]["message"]
    assert client.post(f"{url}/suspend", headers=headers).status_code == 200
    assert suspended()
    assert client.post(f"{url}/restart", headers=headers).status_code == 404

    deleted = client.post(f"{url}/delete", headers=headers)
    assert deleted.status_code == 200, deleted.text
    assert hook.get_pytorchjob(name, NAMESPACE) is None
    assert hook.get_podgroup(name, NAMESPACE) is None
    # Gone from the cluster, still on the page: its task stopped waiting at submission.
    row = client.get(url).json()["job"]
    assert (row["state"], row["live"]) == ("gone", False)
    assert "stopped waiting at submission" in row["reason"]
    # Its end is unknown: the chart ends its bar at the last moment it was known to exist (its
    # task's end), not at "now" for ever.
    assert row["finished_at"] is None
    assert row["last_seen_at"] is not None
    (drawn,) = [e for q in client.get(f"/api/timeline?dag_id={dag_id}").json()["queues"] for e in q["jobs"]]
    assert (drawn["live"], drawn["last_seen_at"]) == (False, row["last_seen_at"])

    events = audit_events(dag_id)
    assert [event for event, _, _ in events] == ["gang_job_resume", "gang_job_suspend", "gang_job_delete"]
    assert {owner for _, owner, _ in events} == {"anonymous (no authentication)"}
    assert json.loads(events[-1][2])["name"] == name


def test_a_job_outside_airflow_cannot_be_changed_from_the_page(client: TestClient) -> None:
    if not rows(client, "?all=true&state=stuck")["total"]:
        pytest.skip("needs the unlabelled jobs of the stuck test above (run the module whole)")
    refused = client.post(f"/api/jobs/{NAMESPACE}/stuck/delete", headers={"X-Requested-By": "test"})
    assert refused.status_code == 403
    assert refused.json()["error"]["kind"] == "not_airflows"
    assert "change it with kubectl" in refused.json()["error"]["message"]


def test_the_page_warns_when_airflow_clears_succeeded_tasks_records(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not any("clear_on_success" in warning for warning in rows(client)["warnings"])
    monkeypatch.setenv("AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS", "True")
    warnings = rows(client)["warnings"]
    assert any("clear_on_success is on" in warning for warning in warnings), warnings
