"""The Gang jobs page's tests (tests/plugins): what the plugins' shared scenario
(`tests.plugins.conftest.Scenario`) shows, and where its links lead in Airflow's UI."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from tests.plugins.conftest import Scenario

# The state of each job of the scenario's run, by task key.
EXPECTED_STATES = {
    "sweep[0]": "succeeded",
    "sweep[1]": "succeeded",
    "broken": "failed",
    "train": "running",
    "waiting[0]": "queued",
    "waiting[1]": "queued",
    "capped": "queued",
}


def ti_url(scenario: Scenario, task_id: str, map_index: int = -1) -> str:
    path = f"/dags/{scenario.dag_id}/runs/{quote(scenario.run_id, safe='')}/tasks/{task_id}"
    return f"{path}/mapped/{map_index}" if map_index >= 0 else path
