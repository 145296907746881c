"""The plugin's JSON API against a real embedded cluster (see conftest.py for the scenario).

No mocks: FastAPI's test client calls the app, the app reads the cluster through `GangJobHook`
and the `kubernetes_default` connection, and the metadata DB that ``dag.test()`` filled. The
faults a healthy simulator cannot show (a cluster without the CRDs, an RBAC 403) come from a
`FaultProxy` (tests/support/fault_proxy.py) in front of it; an unreachable cluster is a closed port.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from airflow_gang.exceptions import GangApiError
from airflow_gang.model.naming import RUN_ID_LABEL, safe_label_value
from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.errors import classify
from tests.plugins.conftest import ADMITTED_PHASES, OTHER_NAMESPACE, Scenario, free_port
from tests.support.fault_proxy import Fault, FaultProxy, rbac_forbidden
from tests.support.pages import EXPECTED_STATES, ti_url


@pytest.fixture(scope="module")
def client(scenario: Scenario) -> Iterator[TestClient]:
    with TestClient(create_app(authenticate=False)) as test_client:
        yield test_client


def by_key(scenario: Scenario, jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = {name: key for key, name in scenario.jobs.items()}
    return {keys.get(job["name"], job["name"]): job for job in jobs}


# -- the jobs table ----------------------------------------------------------------------------


def test_jobs_in_every_phase_with_queue_podgroup_condition_replicas_and_durations(
    client: TestClient, scenario: Scenario
) -> None:
    answer = client.get("/api/jobs")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    jobs = by_key(scenario, data["jobs"])

    assert {key: job["state"] for key, job in jobs.items()} == EXPECTED_STATES
    assert data["total"] == 7
    assert data["namespaces"] == ["default"]
    assert data["queues"] == ["default", "research"]
    assert data["dag_ids"] == [scenario.dag_id]
    assert data["warnings"] == []
    for job in jobs.values():
        assert job["replicas"] == {"Master": 1, "Worker": 3}
        assert job["replicas_total"] == 4
        assert job["gang_scheduling"] == "provider"
        assert job["managed"] is True

    done = jobs["sweep[0]"]
    assert (done["queue"], done["podgroup_phase"], done["job_condition"]) == (
        "default",
        "Completed",
        "Succeeded",
    )
    assert done["queued_seconds"] is not None
    assert done["run_seconds"] is not None
    assert done["finished_at"] is not None

    failed = jobs["broken"]
    assert failed["job_condition"] == "Failed"
    assert "replica(s) failed" in failed["reason"]

    running = jobs["train"]
    assert (running["podgroup_phase"], running["job_condition"]) == ("Running", "Running")
    assert (running["replicas_bound"], running["replicas_running"]) == (4, 4)
    assert running["run_seconds"] > 0
    assert running["finished_at"] is None

    for key in ("waiting[0]", "waiting[1]", "capped"):
        queued = jobs[key]
        assert queued["podgroup_phase"] == "Pending"
        assert queued["job_condition"] in (None, "Created")
        assert queued["queued_seconds"] > 0
        assert queued["run_seconds"] is None
        assert queued["admitted_at"] is None
    # Why they wait, as Volcano's enqueue gate says it: the GPUs are taken.
    for key in ("waiting[0]", "waiting[1]", "capped"):
        assert "insufficient nvidia.com/gpu" in jobs[key]["reason"] or "overused" in jobs[key]["reason"]
    assert jobs["capped"]["queue"] == "research"


def test_jobs_carry_their_airflow_identity_and_a_link_to_the_task_instance(
    client: TestClient, scenario: Scenario
) -> None:
    jobs = by_key(scenario, client.get("/api/jobs").json()["jobs"])

    mapped = jobs["sweep[1]"]["airflow"]
    assert mapped == {
        "dag_id": scenario.dag_id,
        "task_id": "sweep",
        "run_id": scenario.run_id,
        "map_index": 1,
        "try_number": 1,
        "resolved": True,
        "task_instance_url": ti_url(scenario, "sweep", 1),
        "dag_url": f"/dags/{scenario.dag_id}",
    }
    assert jobs["train"]["airflow"]["task_instance_url"] == ti_url(scenario, "train")
    # The run id is no valid label value: the label holds a hash, the API the real id.
    assert safe_label_value(scenario.run_id) != scenario.run_id
    assert jobs["train"]["airflow"]["run_id"] == scenario.run_id


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=queued", {"waiting[0]", "waiting[1]", "capped"}),
        ("state=succeeded,failed", {"sweep[0]", "sweep[1]", "broken"}),
        ("state=running", {"train"}),
        ("queue=research", {"capped"}),
        ("queue=default&state=queued", {"waiting[0]", "waiting[1]"}),
        ("dag_id=gang_ui_scenario", set(EXPECTED_STATES)),
        ("dag_id=another_dag", set()),
        ("namespace=default&state=failed", {"broken"}),
    ],
)
def test_filters(client: TestClient, scenario: Scenario, query: str, expected: set[str]) -> None:
    answer = client.get(f"/api/jobs?{query}")
    assert answer.status_code == 200, answer.text
    assert set(by_key(scenario, answer.json()["jobs"])) == expected


def test_bad_state_filter_is_a_400_naming_the_states(client: TestClient) -> None:
    answer = client.get("/api/jobs?state=sleeping")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "kind": "bad_request",
            "message": "unknown state(s) sleeping: choose from queued, stuck, admitted, running, disrupted, "
            "succeeded, failed, admission_timeout, lost, killed, timed_out, ending, gone",
            "status": 400,
        }
    }


def test_only_configured_namespaces_are_read(
    client: TestClient, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = client.get(f"/api/jobs?namespace={OTHER_NAMESPACE}")
    assert hidden.status_code == 404
    assert hidden.json()["error"]["kind"] == "namespace_not_shown"
    assert "[gang] ui_namespaces" in hidden.json()["error"]["message"]

    monkeypatch.setenv("AIRFLOW__GANG__UI_NAMESPACES", f"default, {OTHER_NAMESPACE}")
    managed = client.get("/api/jobs").json()
    assert managed["namespaces"] == ["default", OTHER_NAMESPACE]
    assert scenario.outsider not in {job["name"] for job in managed["jobs"]}

    everything = client.get(f"/api/jobs?all=true&namespace={OTHER_NAMESPACE}").json()
    (outsider,) = everything["jobs"]
    assert outsider["name"] == scenario.outsider
    assert outsider["managed"] is False
    assert outsider["airflow"] is None
    assert outsider["replicas"] == {"Master": 1, "Worker": 1}


# -- one job -----------------------------------------------------------------------------------


def get_job(client: TestClient, scenario: Scenario, key: str) -> dict[str, Any]:
    answer = client.get(f"/api/jobs/default/{scenario.name(key)}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_running_job_detail(client: TestClient, scenario: Scenario) -> None:
    detail = get_job(client, scenario, "train")

    assert detail["job"]["state"] == "running"
    conditions = {c["type"]: c["status"] for c in detail["conditions"]}
    assert conditions["Running"] == "True"
    assert detail["podgroup"]["phase"] == "Running"
    assert detail["podgroup"]["min_member"] == 4
    assert detail["podgroup"]["queue"] == "default"
    assert detail["replicas"] == [
        {"type": "Master", "desired": 1, "active": 1, "succeeded": 0, "failed": 0},
        {"type": "Worker", "desired": 3, "active": 3, "succeeded": 0, "failed": 0},
    ]
    pods = detail["pods"]
    assert [(p["replica_type"], p["replica_index"]) for p in pods] == [
        ("master", "0"),
        ("worker", "0"),
        ("worker", "1"),
        ("worker", "2"),
    ]
    assert {p["phase"] for p in pods} == {"Running"}
    assert {p["node"] for p in pods} == {"sim-node-1", "sim-node-2"}
    kinds = {e["object_kind"] for e in detail["events"]}
    assert {"Pod", "PodGroup"} <= kinds
    assert detail["labels"]["airflow-gang.io/task-id"] == "train"
    assert detail["labels"][RUN_ID_LABEL] == safe_label_value(scenario.run_id)
    assert detail["airflow"]["task_instance_url"] == ti_url(scenario, "train")
    assert detail["airflow"]["task_instance"] == {"state": "success", "try_number": 1}
    # The operator's task state store entry, read from the metadata DB.
    progress = detail["progress"]
    assert progress["reason"] is None
    assert progress["value"]["phase"] in ADMITTED_PHASES
    assert progress["value"]["queue"] == "default"
    # The task stopped watching at admission, which Volcano declares at bind time: every
    # replica is bound by then, but how many had started running is a race.
    assert progress["value"]["replicas_bound"] == 4
    assert detail["timeline"]["admitted_at"] is not None
    assert detail["timeline"]["finished_at"] is None


def test_failed_job_detail_names_the_exit_codes(client: TestClient, scenario: Scenario) -> None:
    detail = get_job(client, scenario, "broken")

    assert detail["job"]["state"] == "failed"
    assert {p["exit_code"] for p in detail["pods"]} == {1}
    assert {p["phase"] for p in detail["pods"]} == {"Failed"}
    assert sum(row["failed"] for row in detail["replicas"]) >= 1
    assert detail["progress"]["value"]["phase"] == "failed"
    assert detail["airflow"]["task_instance"]["state"] == "failed"


def test_queued_job_detail_says_why_and_that_no_progress_was_reported(
    client: TestClient, scenario: Scenario
) -> None:
    detail = get_job(client, scenario, "capped")

    assert detail["job"]["state"] == "queued"
    assert detail["podgroup"]["phase"] == "Pending"
    assert detail["podgroup"]["queue"] == "research"
    assert "queue resource quota insufficient: insufficient nvidia.com/gpu" in detail["job"]["reason"], detail
    unschedulable = [e for e in detail["events"] if e["reason"] == "Unschedulable"]
    assert unschedulable
    assert all(p["node"] is None for p in detail["pods"])
    # Submitted with wait_for_admission=False: the task never reported progress.
    assert detail["progress"]["value"] is None
    assert detail["progress"]["reason"].startswith("no progress entry")


def test_mapped_succeeded_job_detail(client: TestClient, scenario: Scenario) -> None:
    detail = get_job(client, scenario, "sweep[0]")

    assert detail["job"]["state"] == "succeeded"
    assert detail["airflow"]["map_index"] == 0
    assert detail["airflow"]["task_instance_url"] == ti_url(scenario, "sweep", 0)
    assert detail["progress"]["value"]["phase"] == "succeeded"
    assert detail["timeline"]["state"] == "succeeded"


def test_job_outside_airflow_has_no_identity_and_says_so(
    client: TestClient, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__UI_NAMESPACES", f"default,{OTHER_NAMESPACE}")
    answer = client.get(f"/api/jobs/{OTHER_NAMESPACE}/{scenario.outsider}")
    assert answer.status_code == 200, answer.text
    detail = answer.json()
    assert detail["airflow"] is None
    assert detail["labels"] == {}
    assert detail["progress"] == {
        "value": None,
        "reason": "the job was not submitted by airflow-gang's operator",
    }


def test_unknown_job_is_a_404(client: TestClient) -> None:
    answer = client.get("/api/jobs/default/no-such-job")
    assert answer.status_code == 404
    assert answer.json()["error"] == {
        "kind": "not_found",
        "message": "PyTorchJob, TrainJob or VolcanoJob default/no-such-job does not exist, "
        "and no Airflow task recorded it",
        "status": 404,
    }


# -- queues and timeline -----------------------------------------------------------------------


def test_queues(client: TestClient, scenario: Scenario) -> None:
    answer = client.get("/api/queues")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    queues = {q["name"]: q for q in data["queues"]}
    # The cluster: 2 nodes x 2 GPUs, all four held by ``train`` (and outsider's pods wait).
    assert data["cluster"]["nvidia.com/gpu"] == {"allocatable": "4", "allocated": "4", "free": "0"}
    # Each waiting gang's place in Volcano's order: same priority, so oldest first (creation
    # times have 1 s resolution; a tie goes by name).
    waiting = {gang["name"]: gang for gang in data["waiting"]}
    pair = [waiting[scenario.name(key)] for key in ("waiting[0]", "waiting[1]")]
    first, second = sorted(pair, key=lambda gang: (gang["created"], gang["name"]))
    assert (first["gangs_ahead"], second["gangs_ahead"]) == (0, 1)
    assert first["summary"].startswith("needs 4 GPUs; 0 free in queue default")
    assert second["summary"].endswith("1 gang ahead")
    capped = waiting[scenario.name("capped")]
    assert capped["never_fits"] is True
    assert "queue research is capped at 2: it can never start" in capped["summary"]

    assert set(queues) == {"root", "default", "research"}
    default = queues["default"]
    assert default["state"] == "Open"
    assert default["capability"] == {}
    assert default["allocated"] == {"nvidia.com/gpu": "4"}
    assert default["podgroups"] == {"Pending": 2, "Inqueue": 0, "Running": 1, "Unknown": 0, "Completed": 3}
    research = queues["research"]
    assert research["capability"] == {"nvidia.com/gpu": "2"}
    assert research["allocated"] == {}
    assert research["pending"] == {"nvidia.com/gpu": "4"}
    assert research["waiting_gangs"] == 1
    assert research["podgroups"]["Pending"] == 1
    assert research["status_counts"]["pending"] == 1


def test_timeline_per_queue(client: TestClient, scenario: Scenario) -> None:
    answer = client.get("/api/timeline")
    assert answer.status_code == 200, answer.text
    queues = {q["queue"]: q["jobs"] for q in answer.json()["queues"]}

    assert set(queues) == {"default", "research"}
    default = by_key(scenario, queues["default"])
    order = [entry["name"] for entry in queues["default"]]
    assert order == sorted(
        order, key=lambda name: next(e["queued_at"] for e in queues["default"] if e["name"] == name)
    )
    for key in ("sweep[0]", "sweep[1]", "broken"):
        entry = default[key]
        assert entry["queued_at"] <= entry["admitted_at"] <= entry["finished_at"], entry
    assert default["sweep[0]"]["state"] == "succeeded"
    assert default["broken"]["state"] == "failed"
    assert default["train"]["state"] == "running"
    assert default["train"]["admitted_at"] is not None
    assert default["train"]["finished_at"] is None
    assert default["waiting[0]"]["admitted_at"] is None
    assert default["waiting[0]"]["gang_state"] == "queued"
    (capped,) = queues["research"]
    assert capped["name"] == scenario.name("capped")
    assert "insufficient nvidia.com/gpu" in capped["reason"]

    only_failed = client.get("/api/timeline?state=failed").json()["queues"]
    assert [[e["name"] for e in q["jobs"]] for q in only_failed] == [[scenario.name("broken")]]


# -- the page ----------------------------------------------------------------------------------


def test_pages_and_their_files_are_served_by_the_app(client: TestClient) -> None:
    jobs_page = client.get("/")
    assert jobs_page.status_code == 200
    assert jobs_page.headers["content-type"].startswith("text/html")
    assert 'data-view="jobs"' in jobs_page.text
    assert "script-src 'self'" in jobs_page.headers["content-security-policy"]
    for asset in ("static/gang.js", "static/gang.css", "static/icon.svg"):
        assert f'="/{asset}"' in jobs_page.text
        assert client.get(f"/{asset}").status_code == 200

    job_page = client.get("/jobs/default/train-1")
    assert job_page.status_code == 200
    assert 'data-view="job"' in job_page.text
    assert 'data-namespace="default"' in job_page.text
    assert 'data-name="train-1"' in job_page.text
    # Path values reach the page only escaped.
    hostile = client.get("/jobs/default/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert hostile.status_code == 200
    assert "<img" not in hostile.text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in hostile.text
    assert "http://" not in jobs_page.text
    assert "https://" not in jobs_page.text


# -- failures ----------------------------------------------------------------------------------


@pytest.fixture
def connect_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[dict[str, Any]], None]:
    """Point ``kubernetes_default`` at a kubeconfig (as a dict) for this test."""

    def connect(config: dict[str, Any]) -> None:
        path = tmp_path / "kubeconfig.yaml"
        path.write_text(yaml.safe_dump(config))
        value = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(path)}}
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(value))

    return connect


@pytest.fixture
def proxy(scenario: Scenario, connect_with: Callable[[dict[str, Any]], None]) -> Iterator[FaultProxy]:
    server = FaultProxy(scenario.cluster.kubeconfig_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    connect_with(server.config)
    yield server
    server.shutdown()
    server.server_close()


def assert_error(answer: Any, status: int, kind: str, *fragments: str) -> None:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["kind"] == kind
    assert error["status"] == status
    for fragment in fragments:
        assert fragment in error["message"]
    assert "Traceback" not in answer.text


def test_unreachable_cluster_is_a_502_saying_so(
    client: TestClient, scenario: Scenario, connect_with: Callable[[dict[str, Any]], None]
) -> None:
    config = yaml.safe_load(Path(scenario.cluster.kubeconfig_path).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    connect_with(config)

    for path in ("/api/jobs", "/api/queues", "/api/timeline", f"/api/jobs/default/{scenario.name('train')}"):
        assert_error(
            client.get(path), 502, "unreachable", "the Kubernetes API was unreachable after 2 attempt(s)"
        )


def test_missing_pytorchjob_crd_is_a_503_with_the_fix(client: TestClient, proxy: FaultProxy) -> None:
    # Neither the training-operator nor Trainer v2 nor Volcano's Job API is served (one of them
    # alone still lists its jobs: test_trainjob_rows.py).
    proxy.faults += [
        Fault("GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", status=404, times=99),
        Fault("GET", "/apis/kubeflow.org/v1", status=404, times=99),
        Fault(
            "GET", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs", status=404, times=99
        ),
        Fault("GET", "/apis/trainer.kubeflow.org/v1alpha1", status=404, times=99),
        Fault("GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs", status=404, times=99),
        Fault("GET", "/apis/batch.volcano.sh/v1alpha1", status=404, times=99),
    ]
    assert_error(
        client.get("/api/jobs"),
        503,
        "crd_missing",
        "PyTorchJob CRD is not installed on this cluster",
        "install the Kubeflow training-operator",
    )


def test_missing_volcano_still_lists_jobs_with_a_warning(
    client: TestClient, proxy: FaultProxy, scenario: Scenario
) -> None:
    proxy.faults += [
        Fault(
            "GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", status=404, times=99
        ),
        Fault("GET", "/apis/scheduling.volcano.sh/v1beta1/queues", status=404, times=99),
        Fault("GET", "/apis/scheduling.volcano.sh/v1beta1", status=404, times=99),
    ]
    answer = client.get("/api/jobs")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert len(data["jobs"]) == 7
    assert {job["podgroup_phase"] for job in data["jobs"]} == {None}
    (warning,) = data["warnings"]
    assert warning.startswith("Volcano is not installed on this cluster")
    assert_error(client.get("/api/queues"), 503, "crd_missing", "Volcano is not installed", "install Volcano")


def test_rbac_denial_is_a_403_naming_the_permission(client: TestClient, proxy: FaultProxy) -> None:
    denial = rbac_forbidden("list", "pytorchjobs.kubeflow.org", "default")
    proxy.faults.append(
        Fault(
            "GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", status=403, body=denial, times=99
        )
    )
    assert_error(
        client.get("/api/jobs"),
        403,
        "forbidden",
        'cannot list pytorchjobs.kubeflow.org in namespace "default"',
        "REQUIRED_PERMISSIONS",
    )


def test_undefined_connection_is_a_503_pointing_at_the_option(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__UI_KUBERNETES_CONN_ID", "no_such_connection")
    assert_error(
        client.get("/api/jobs"),
        503,
        "connection",
        "'no_such_connection' cannot be used",
        "[gang] ui_kubernetes_conn_id",
    )


def test_unexpected_errors_are_a_generic_500_without_details() -> None:
    error = classify(RuntimeError("secret internals"), "kubernetes_default")
    assert (error.status, error.kind) == (500, "internal")
    assert "secret internals" not in error.message
    assert classify(GangApiError("boom", status=500), "k").status == 502
