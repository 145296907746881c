"""The page API's answer check (`airflow_gang.plugins.schema_check`) agrees with the models it is
derived from, and refuses models it could not mirror exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator

from airflow_gang.plugins.errors import PageError
from airflow_gang.plugins.schema_check import Checked
from airflow_gang.plugins.schemas import JobList, StrictModel, TimelinePage

ROW: dict[str, Any] = {
    "kind": "PyTorchJob",
    "name": "train-1",
    "namespace": "default",
    "uid": "uid-1",
    "created_at": "2026-12-01T00:00:00Z",
    "deleting": False,
    "queue": "default",
    "state": "succeeded",
    "job_condition": None,
    "gang_scheduling": "provider",
    "podgroup": None,
    "podgroup_phase": None,
    "min_member": None,
    "replicas": {"Master": 1, "Worker": 3},
    "replicas_total": 4,
    "replicas_bound": 0,
    "replicas_running": 0,
    "reason": None,
    "warning": None,
    "queued_at": "2026-12-01T00:00:00+00:00",
    "admitted_at": "2026-12-01T00:00:40+00:00",
    "finished_at": "2026-12-01T00:10:00+00:00",
    "queued_seconds": 40,
    "run_seconds": 560.0,
    "gpus": 4.0,
    "gpu_seconds": 2240.0,
    "exit_code": None,
    "recorded_at": "2026-12-01T00:10:00+00:00",
    "disruptions": [],
    "live": False,
    "managed": True,
    "airflow": {
        "dag_id": "etl",
        "task_id": "train",
        "run_id": "manual__1",
        "map_index": -1,
        "try_number": 1,
        "resolved": True,
        "task_instance_url": "/dags/etl/runs/manual__1/tasks/train",
        "dag_url": "/dags/etl",
    },
}
PAGE: dict[str, Any] = {
    "jobs": [ROW],
    "total": 1,
    "offset": 0,
    "limit": 100,
    "live": 0,
    "namespaces": ["default"],
    "queues": ["default"],
    "dag_ids": ["etl"],
    "states": ["succeeded"],
    "warnings": [],
    "generated_at": "2026-12-01T00:11:00+00:00",
}


def with_row(**changes: Any) -> dict[str, Any]:
    row = {key: value for key, value in {**ROW, **changes}.items() if value is not ...}
    return {**PAGE, "jobs": [row]}


def model_answer(model: type[BaseModel], answer: dict[str, Any]) -> Any:
    """What FastAPI's own ``response_model`` check (with ``exclude_unset``) would send."""
    return json.loads(model.model_validate(answer).model_dump_json(exclude_unset=True))


@pytest.mark.parametrize(
    "answer",
    [
        PAGE,
        with_row(suspended=True, exit_code=...),  # a live row's keys, absent where it has none
        with_row(last_seen_at="2026-12-01T00:09:00+00:00", state="ending"),
        with_row(airflow=None, managed=False),
    ],
)
def test_an_answer_the_model_accepts_is_sent_as_the_model_would_send_it(answer: dict[str, Any]) -> None:
    sent = json.loads(Checked(JobList).response(answer).body)
    assert sent == model_answer(JobList, answer)
    assert sent["jobs"][0]["queued_seconds"] == 40.0  # coerced as the model coerces


@pytest.mark.parametrize(
    ("answer", "place"),
    [
        (with_row(surprise=1), "response.jobs.0.surprise: Extra inputs are not permitted"),
        (with_row(name=...), "response.jobs.0.name: Field required"),
        (with_row(replicas_total="four"), "response.jobs.0.replicas_total: Input should be a valid integer"),
        (with_row(airflow={**ROW["airflow"], "owner": "x"}), "response.jobs.0.airflow.owner: Extra inputs"),
        ({**PAGE, "total": None}, "response.total: Input should be a valid integer"),
    ],
)
def test_an_answer_the_model_refuses_is_a_500_naming_the_place(answer: dict[str, Any], place: str) -> None:
    with pytest.raises(ValidationError):
        JobList.model_validate(answer)
    with pytest.raises(PageError) as refused:
        Checked(JobList).response(answer)
    assert (refused.value.status, refused.value.kind) == (500, "internal")
    assert place in refused.value.message


def test_a_subclassed_model_keeps_its_parents_keys() -> None:
    entry = {
        "name": "a",
        "namespace": "default",
        "queue": None,
        "state": "queued",
        "queued_at": "2026-12-01T00:00:00+00:00",
        "admitted_at": None,
        "running_at": None,
        "finished_at": None,
        "queue_wait_seconds": None,
        "run_seconds": None,
        "gang_state": "queued",
        "reason": None,
    }
    answer = {
        "queues": [{"queue": "(no queue)", "jobs": [entry]}],
        "now": "2026-12-01T00:01:00Z",
        "warnings": [],
    }
    assert json.loads(Checked(TimelinePage).response(answer).body) == model_answer(TimelinePage, answer)
    no_state = {key: value for key, value in entry.items() if key != "gang_state"}
    with pytest.raises(PageError, match="gang_state: Field required"):
        Checked(TimelinePage).response({**answer, "queues": [{"queue": "q", "jobs": [no_state]}]})


class WithValidator(StrictModel):
    """A model with a validator."""

    name: str = Field(description="a name")

    @field_validator("name")
    @classmethod
    def lower(cls, value: str) -> str:
        return value.lower()


class WithConstraint(StrictModel):
    """A model with a constraint."""

    count: int = Field(ge=0, description="a count")


class WithDefault(StrictModel):
    """A model with a default other than None."""

    count: int = Field(0, description="a count")


@pytest.mark.parametrize("model", [WithValidator, WithConstraint, WithDefault])
def test_a_model_the_twin_cannot_mirror_is_refused_when_the_route_is_made(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError, match=model.__name__):
        Checked(model)
