"""The operator's "Gang job" extra link opens this plugin's page for the same job."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.plugin import URL_PREFIX
from tests.metadata import xcom_value
from tests.plugins.conftest import Scenario


@pytest.fixture(scope="module")
def airflow_like(scenario: Scenario) -> Iterator[TestClient]:
    """The app mounted where Airflow mounts it."""
    root = FastAPI()
    root.mount(URL_PREFIX, create_app(authenticate=False))
    with TestClient(root) as client:
        yield client


def stored_link(scenario: Scenario, task_id: str, map_index: int = -1) -> str:
    return str(xcom_value(scenario.dag_id, scenario.run_id, task_id, "_link_GangJobLink", map_index))


@pytest.mark.parametrize(
    ("key", "task_id", "map_index", "state"),
    [
        ("train", "train", -1, "running"),
        ("broken", "broken", -1, "failed"),
        ("sweep[1]", "sweep", 1, "succeeded"),
    ],
)
def test_the_gang_job_link_opens_the_jobs_page_and_its_data(
    airflow_like: TestClient, scenario: Scenario, key: str, task_id: str, map_index: int, state: str
) -> None:
    name = scenario.name(key)
    link = stored_link(scenario, task_id, map_index)
    assert link == f"{URL_PREFIX}/jobs/default/{name}"
    page = airflow_like.get(link)
    assert page.status_code == 200
    assert f'data-name="{name}"' in page.text
    job = airflow_like.get(f"{URL_PREFIX}/api/jobs/default/{name}").json()
    assert job["job"]["name"] == name
    assert job["job"]["state"] == state
