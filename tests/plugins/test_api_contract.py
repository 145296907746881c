"""The page's JSON API keeps the contract its OpenAPI document states (`airflow_gang.plugins.schemas`).

Every route's answer is a pydantic model that forbids undeclared keys, and the routes check the
service's dicts against it (`schema_check`): an answer that strays from its schema is a 500
here, never a silent change. So these tests call every route over real HTTP (the app served by uvicorn at
``/gang``, as Airflow mounts it) on jobs of every kind and phase, and check the document itself:

- live PyTorchJobs in every phase, a PyTorchJob Airflow did not submit, queues and timeline: the
  session's `scenario` (conftest.py), read only (the browser tests read it after us);
- live and recorded TrainJobs and PyTorchJobs, and the actions: a DAG run on an embedded
  cluster of this module's own (namespace ``contract``), which the actions then change;
- the document at ``/gang/api/openapi.json`` names a response schema for every route, every
  field of every schema says what it means, and it matches the committed snapshot
  ``docs/page-api/openapi.json``. The comparison covers our component schemas, each route's
  parameters and its response refs: FastAPI's own parts (the ``openapi`` version, its 422
  ``HTTPValidationError``) change with FastAPI's version, ours only with our code.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.schemas import (
    ActionResult,
    ErrorBody,
    JobDetail,
    JobList,
    QueueOverview,
    TimelinePage,
)
from airflow_gang.plugins.service import GangPageService
from airflow_gang.plugins.settings import UiSettings
from tests.plugins.conftest import OTHER_NAMESPACE, Scenario, cluster_behind, served, write_scenario_dag
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "docs" / "page-api" / "openapi.json"
REGENERATE = ".venv/bin/python scripts/page_openapi.py"
DAG_ID = "gang_api_contract"
NAMESPACE = "contract"
CONN_ID = "gang_contract_cluster"
CSRF = {"X-Requested-By": "contract-test"}
# Route -> the schema of its 200 answer, and the failures it declares.
ROUTES = {
    ("get", "/api/jobs"): ("JobList", {"400", "403", "404", "500", "502", "503"}),
    ("get", "/api/jobs/{namespace}/{name}"): ("JobDetail", {"400", "403", "404", "500", "502", "503"}),
    ("post", "/api/jobs/{namespace}/{name}/{action}"): (
        "ActionResult",
        {"400", "403", "404", "409", "500", "502", "503"},
    ),
    ("get", "/api/queues"): ("QueueOverview", {"403", "500", "502", "503"}),
    ("get", "/api/timeline"): ("TimelinePage", {"400", "403", "404", "500", "502", "503"}),
}
FASTAPI_SCHEMAS = {"HTTPValidationError", "ValidationError"}  # FastAPI's own, versioned with it

DAG_SOURCE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.operators.train_job import TrainJobOperator


def sim(**annotations):
    return {"metadata": {"annotations": {f"sim.airflow-gang.io/{k}": v for k, v in annotations.items()}}}


common = dict(
    image="ghcr.io/acme/train:1", command=["python", "train.py"], namespace="__NAMESPACE__",
    kubernetes_conn_id="__CONN_ID__", poll_interval=0.2, admission_timeout=60, deferrable=False,
    trigger_rule="all_done", retries=0,
)
gpu = {"nvidia.com/gpu": 1}
later = dict(wait_for_completion=False, wait_for_admission=False, delete_on_finish="never")

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    tj_done = TrainJobOperator(
        task_id="tj_done", num_nodes=1, resources_per_node=gpu, runtime="torch-distributed",
        pod_template=sim(duration="0.3"), **common,
    )
    pt_broken = PyTorchJobOperator(
        task_id="pt_broken", workers=1, resources=gpu, restart_policy="Never", delete_on_finish="always",
        pod_template=sim(duration="0.3", **{"exit-code": "3"}), **common,
    )
    tj_train = TrainJobOperator(
        task_id="tj_train", num_nodes=2, resources_per_node=gpu, runtime="torch-distributed",
        wait_for_completion=False, delete_on_finish="never", pod_template=sim(duration="600"), **common,
    )
    tj_waiting = TrainJobOperator(
        task_id="tj_waiting", num_nodes=4, resources_per_node=gpu, runtime="torch-distributed",
        pod_template=sim(duration="5"), **later, **common,
    )
    pt_waiting = PyTorchJobOperator(
        task_id="pt_waiting", workers=3, resources=gpu, pod_template=sim(duration="5"), **later, **common
    )
    tj_done >> pt_broken >> tj_train >> [tj_waiting, pt_waiting]
"""


def model_of(method: str, path: str) -> type[BaseModel] | None:
    """The model a route's answer is declared as (None for the OpenAPI document)."""
    route = path.split("?", 1)[0]
    if method == "POST":
        return ActionResult
    models = {"/jobs": JobList, "/queues": QueueOverview, "/timeline": TimelinePage}
    return models.get(route) or (JobDetail if route.startswith("/jobs/") else None)


@dataclass(frozen=True)
class Api:
    """The app at ``/gang`` over HTTP: ``get`` and ``post`` return the JSON of a 200 answer, which
    the route checked against its schema's twin (`schema_check`); here the model itself reads it
    too and gives back exactly the same JSON, so the twin and the model agree on real answers."""

    client: httpx.Client

    def get(self, path: str) -> Any:
        return self._ok("GET", path, self.client.get(f"/gang/api{path}"))

    def post(self, path: str) -> Any:
        return self._ok("POST", path, self.client.post(f"/gang/api{path}", headers=CSRF))

    def _ok(self, method: str, path: str, answer: httpx.Response) -> Any:
        assert answer.status_code == 200, f"{method} {path}: {answer.status_code} {answer.text}"
        data = answer.json()
        model = model_of(method, path)
        if model is not None:
            assert model.model_validate(data).model_dump(mode="json", exclude_unset=True) == data
        return data

    def error(self, method: str, path: str, status: int, headers: dict[str, str] | None = None) -> ErrorBody:
        answer = self.client.request(method, f"/gang/api{path}", headers=headers)
        assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
        return ErrorBody.model_validate(answer.json())


@contextlib.contextmanager
def page_api(settings: UiSettings, **options: Any) -> Iterator[Api]:
    """The plugin app mounted at ``/gang`` as Airflow's API server mounts it, served by uvicorn."""
    root = FastAPI()
    root.mount("/gang", create_app(authenticate=False, settings_loader=lambda: settings, **options))
    with served(root, "gang-contract") as base, httpx.Client(base_url=base, timeout=60) as client:
        yield Api(client)


def by_task(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["airflow"]["task_id"]: row for row in rows if row.get("airflow")}


def job_path(row: dict[str, Any]) -> str:
    return f"/jobs/{row['namespace']}/{row['name']}?kind={row['kind']}"


# -- live PyTorchJobs in every phase (conftest's scenario) -------------------------------------


@pytest.fixture(scope="module")
def scenario_api(scenario: Scenario) -> Iterator[Api]:
    with page_api(UiSettings(namespaces=("default", OTHER_NAMESPACE))) as api:
        yield api


def test_live_pytorchjobs_in_every_phase_answer_their_schema(scenario_api: Api) -> None:
    jobs = scenario_api.get("/jobs?all=true")["jobs"]
    assert {"succeeded", "failed", "running", "queued"} <= {row["state"] for row in jobs}
    assert {row["managed"] for row in jobs} == {True, False}  # the outsider has no Airflow task

    details = [scenario_api.get(job_path(row)) for row in jobs]
    assert any(detail["job"].get("position") for detail in details)  # a gang waiting in its queue
    assert any(detail["airflow"] is None for detail in details)

    for path in ("/jobs", "/jobs?state=queued&limit=1&offset=1", "/jobs?kind=PyTorchJob&queue=research"):
        scenario_api.get(path)
    queues = scenario_api.get("/queues")
    assert queues["waiting"]
    assert queues["cluster"]
    timeline = scenario_api.get("/timeline?all=true")
    assert timeline["queues"]


# -- live and recorded jobs of both kinds, and the actions (a cluster of this module) ----------


def write_dag() -> Any:
    return write_scenario_dag(DAG_ID, DAG_SOURCE, namespace=NAMESPACE, conn_id=CONN_ID)


def settled(api: Api) -> dict[str, dict[str, Any]] | None:
    """The rows by task once the DAG run's jobs stand where the tests need them, else None."""
    rows = by_task(api.get("/jobs")["jobs"])
    wanted = {
        "tj_done": (False, "succeeded"),
        "pt_broken": (False, "failed"),
        "tj_train": (True, "running"),
        "tj_waiting": (True, "queued"),
        "pt_waiting": (True, "queued"),
    }
    seen = {task: (row["live"], row["state"]) for task, row in rows.items()}
    waiting_gangs = all(rows[task]["podgroup"] for task in ("tj_waiting", "pt_waiting") if task in rows)
    return rows if seen == wanted and waiting_gangs else None


@pytest.fixture(scope="module")
def contract() -> Iterator[Api]:
    """Five jobs of a DAG run on a 4-GPU cluster: a TrainJob that succeeded and a PyTorchJob that
    failed, both deleted (recorded); a TrainJob running on 2 GPUs; a TrainJob and a PyTorchJob of
    4 GPUs each, submitted without waiting, queued behind it."""
    with cluster_behind(CONN_ID, NAMESPACE):
        dag_run = write_dag().test()
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
        assert states == {
            "tj_done": "success",
            "pt_broken": "failed",
            "tj_train": "success",
            "tj_waiting": "success",
            "pt_waiting": "success",
        }
        with page_api(UiSettings(conn_id=CONN_ID, namespaces=(NAMESPACE,))) as api:
            eventually(lambda: settled(api), timeout=60, interval=0.5, message="(the jobs never settled)")
            yield api


def test_live_and_recorded_jobs_of_both_kinds_answer_their_schema(contract: Api) -> None:
    jobs = contract.get("/jobs")["jobs"]
    kinds = {(row["kind"], row["live"]) for row in jobs}
    assert kinds == {("PyTorchJob", True), ("PyTorchJob", False), ("TrainJob", True), ("TrainJob", False)}
    rows = by_task(jobs)
    # Keys only one kind of row has: present on it, absent from the other.
    assert "suspended" in rows["tj_train"]
    assert "suspended" not in rows["pt_broken"]
    assert {"recorded_at", "exit_code", "disruptions"} <= set(rows["pt_broken"])

    for task, row in rows.items():
        detail = contract.get(job_path(row))
        assert (detail["recorded"] is None) == row["live"], task
    assert contract.get(job_path(rows["tj_waiting"]))["job"]["position"]["queue"] == "default"

    for path in ("/jobs?kind=TrainJob", "/jobs?state=failed,succeeded", "/timeline?kind=TrainJob"):
        contract.get(path)
    timeline = contract.get("/timeline")
    drawn = {entry["name"] for queue in timeline["queues"] for entry in queue["jobs"]}
    assert drawn == {row["name"] for row in jobs}
    queues = contract.get("/queues")
    assert [gang["name"] for gang in queues["waiting"]]


def suspended(api: Api, path: str) -> bool:
    return bool(api.get(path)["job"]["suspended"])


def test_actions_and_failures_answer_their_schema(contract: Api) -> None:
    rows = by_task(contract.get("/jobs")["jobs"])
    for task in ("pt_waiting", "tj_waiting"):
        row = rows[task]
        path, query = f"/jobs/{NAMESPACE}/{row['name']}", f"?kind={row['kind']}"
        assert contract.post(f"{path}/suspend{query}")["action"] == "suspend"
        # The page of a suspended queued gang (its `position` may be null: it waits in no queue).
        eventually(partial(suspended, contract, f"{path}{query}"), timeout=30, interval=0.5)
        assert contract.error("POST", f"{path}/suspend{query}", 409, CSRF).error.kind == "conflict"
        contract.post(f"{path}/resume{query}")

    assert contract.error("POST", f"/jobs/{NAMESPACE}/x/delete", 400).error.kind == "bad_request"
    assert contract.error("GET", f"/jobs/{NAMESPACE}/no-such-job", 404).error.kind == "not_found"
    assert contract.error("GET", "/jobs?state=sleepy", 400).error.status == 400
    assert contract.error("GET", "/timeline?namespace=elsewhere", 404).error.kind == "namespace_not_shown"

    # Deleted from the page: the running TrainJob becomes what its task recorded.
    train = rows["tj_train"]
    assert contract.post(f"/jobs/{NAMESPACE}/{train['name']}/delete?kind=TrainJob")["action"] == "delete"
    recorded = eventually(
        lambda: row if not (row := by_task(contract.get("/jobs")["jobs"])["tj_train"])["live"] else None,
        timeout=30,
        interval=0.5,
    )
    assert contract.get(job_path(recorded))["recorded"] is not None
    contract.get("/timeline")


def test_a_key_the_schema_does_not_declare_is_a_500_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract's teeth: the service cannot add a key without declaring it in `schemas`."""

    def queues(service: GangPageService) -> dict[str, Any]:
        overview = {"queues": [], "cluster": {}, "waiting": [], "namespaces": [], "warnings": []}
        return {**overview, "generated_at": "2026-01-01T00:00:00+00:00", "surprise": 1}

    monkeypatch.setattr(GangPageService, "queues", queues)
    with page_api(UiSettings(), reader_factory=lambda settings: None) as api:  # no cluster read
        failure = api.error("GET", "/queues", 500)
    assert failure.error.kind == "internal"
    assert "response.surprise: Extra inputs are not permitted" in failure.error.message


# -- the OpenAPI document --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def document() -> Iterator[dict[str, Any]]:
    """``/gang/api/openapi.json`` (no cluster needed: the document is the code's)."""
    with page_api(UiSettings()) as api:
        yield dict(api.get("/openapi.json"))


def ref(response: dict[str, Any]) -> str | None:
    target = response.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
    return str(target).rsplit("/", 1)[-1] if target else None


def our_schemas(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document["components"]["schemas"]
    return {name: schema for name, schema in schemas.items() if name not in FASTAPI_SCHEMAS}


def contract_of(document: dict[str, Any]) -> dict[str, Any]:
    """What the snapshot pins: our schemas, and per route its parameters and response refs."""
    routes = {
        f"{method.upper()} {path}": {
            "parameters": sorted(
                [p["in"], p["name"], bool(p.get("required"))] for p in operation.get("parameters", [])
            ),
            "responses": {status: ref(answer) for status, answer in operation["responses"].items()},
        }
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    return {"schemas": our_schemas(document), "routes": routes}


def test_every_route_names_its_answer_and_its_failures(document: dict[str, Any]) -> None:
    assert {path for _, path in ROUTES} == set(document["paths"])
    for (method, path), (model, failures) in ROUTES.items():
        responses = document["paths"][path][method]["responses"]
        assert ref(responses["200"]) == model, path
        assert {status for status, answer in responses.items() if ref(answer) == "ErrorBody"} == failures
    jobs = document["components"]["schemas"]["JobList"]["properties"]["jobs"]
    assert jobs["items"] == {"$ref": "#/components/schemas/JobRow"}


def test_every_field_says_what_it_means_and_no_other_key_is_allowed(document: dict[str, Any]) -> None:
    schemas = our_schemas(document)
    undocumented = [
        f"{name}.{field}"
        for name, schema in schemas.items()
        for field, declared in schema["properties"].items()
        if not declared.get("description")
    ]
    assert undocumented == []
    assert [name for name, schema in schemas.items() if not schema.get("description")] == []
    assert [name for name, schema in schemas.items() if schema.get("additionalProperties") is not False] == []
    # The fields and the state being added (optional, so the answers may not carry them yet).
    row = schemas["JobRow"]["properties"]
    assert "last_seen_at" in row
    assert "ending" in row["state"]["description"]
    assert {"live", "last_seen_at"} <= set(schemas["TimelineRow"]["properties"])
    assert {"live", "last_seen_at"} <= set(schemas["TimelineEntry"]["properties"])


def test_the_committed_snapshot_is_the_document(document: dict[str, Any]) -> None:
    """``docs/page-api/openapi.json`` must describe the API the code serves (see the module
    docstring for what is compared)."""
    regenerate = f"regenerate it with `{REGENERATE}` and commit it with the change"
    assert SNAPSHOT.exists(), f"{SNAPSHOT.relative_to(REPO)} is missing: {regenerate}"
    served_now, committed = contract_of(document), contract_of(json.loads(SNAPSHOT.read_text()))
    changed = sorted(
        f"{part}: {key}"
        for part in ("schemas", "routes")
        for key in set(served_now[part]) | set(committed[part])
        if served_now[part].get(key) != committed[part].get(key)
    )
    assert not changed, f"{SNAPSHOT.relative_to(REPO)} is out of date ({', '.join(changed)}): {regenerate}"
