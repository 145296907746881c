"""The repository's example DAGs under a real scheduler and triggerer, as `make airflow` runs them.

The same files `make demo` runs with ``airflow dags test``: here mapped tasks run in parallel,
waits defer to the real triggerer, and runs are triggered over the REST API with a conf, as a
person does from the UI's "Trigger DAG" form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_stack import AirflowStack
from tests.support.realstack import component_logs


def xcom(stack: AirflowStack, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
    path = (
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        f"?map_index={map_index}&deserialize=true"
    )
    return stack.client.call("GET", path)["value"]


# Every run takes the example DAGs under dag.test() (tests/e2e/test_example_dags.py) and
# `make airflow`'s command (tests/stack/test_cli.py); this one runs with `make test-slow`.
@pytest.mark.slow
def test_the_example_dags_run_as_under_make_demo(
    stack: AirflowStack, api: k8s.ApiClient, tmp_path: Path
) -> None:
    runs = {
        "gang_vs_deadlock": stack.client.trigger(
            "gang_vs_deadlock",
            conf={"gang_scheduling": "provider", "train_seconds": 1, "report_dir": str(tmp_path / "report")},
        ),
        "param_sweep": stack.client.trigger("param_sweep"),
        "retrain_daily": stack.client.trigger(
            "retrain_daily", conf={"registry_dir": str(tmp_path / "registry")}
        ),
    }
    for dag_id, run_id in runs.items():
        state = stack.client.wait_for_run(dag_id, run_id, timeout=300)
        tis = {
            f"{ti['task_id']}[{ti['map_index']}]": ti["state"]
            for ti in stack.client.task_instances(dag_id, run_id)
        }
        assert state == "success", f"{dag_id}: {tis}\n{component_logs(stack)}"
        assert set(tis.values()) <= {"success", "skipped"}, tis

    (report,) = (tmp_path / "report" / "airflow-gang").iterdir()
    timeline = json.loads((report / "timeline.json").read_text())
    assert len(timeline) == 6
    assert {job["state"] for job in timeline} == {"succeeded"}

    best = xcom(stack, "param_sweep", runs["param_sweep"], "pick_best")
    assert best["runs"] == 8
    assert best["args"][:4] == ["--lr", "0.1", "--batch-size", "16"]

    # Every "Gang job" link of a finished task, sensor-waited (gang_vs_deadlock) or not
    # (param_sweep), opens a page with the log tail of the job, deleted by cleanup since.
    for dag_id in ("gang_vs_deadlock", "param_sweep"):
        rows = stack.client.call("GET", f"/gang/api/jobs?dag_id={dag_id}&limit=1000")["jobs"]
        ran = [row for row in rows if row["airflow"]["run_id"] == runs[dag_id]]
        assert len(ran) == (6 if dag_id == "gang_vs_deadlock" else 8)
        for row in ran:
            page = stack.client.call("GET", f"/gang/api/jobs/{row['namespace']}/{row['name']}")
            assert (row["live"], row["state"]) == (False, "succeeded"), row
            assert page["recorded"]["log_tail"], row["name"]

    latest = json.loads((tmp_path / "registry" / "digits" / "latest.json").read_text())
    assert latest["accuracy"] == 0.953
