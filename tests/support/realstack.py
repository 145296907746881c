"""The real Airflow deployments' tests (tests/realstack, tests/production): reading a stack's
processes, logs, metadata database and REST API, the gang sweep both packages run, and the
timings of the process-fault scenarios.

The stacks themselves are the packages' fixtures (tests/realstack/conftest.py,
tests/production/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy

from airflow_gang.reports.timeline import parse_time
from gang_stack import AirflowStack

# The scheduler's line when it reads a deferring try's report while the resumed try is already
# queued or running (apache/airflow#72716): the race `[gang] resume_hold_seconds` avoids.
RACE_MESSAGE = "finished with state success, but the task instance's state attribute is"
SWEEP_TIMEOUT = 240.0

# The triggerer-kill scenario (tests/realstack/test_process_faults.py and its TrainJob twin in
# test_trainjob_guarantees.py).
ADMISSION_TIMEOUT = dt.timedelta(seconds=50)  # never_admitted's, as in the DAGs (tests/realstack/dags.py)
DOWN_SECONDS = 10.0
# From the deadline until the trigger has deleted the job: it sleeps until the deadline, deletes
# and confirms (a second or two); more on two busy cores.
DELETE_SLACK = dt.timedelta(seconds=10)
# From the deletion until the task has failed on a worker: the scheduler queues the resumed try,
# a task process starts and raises.
RESUME_SLACK = dt.timedelta(seconds=30)
# [triggerer] triggerer_health_check_threshold (30 s) plus a few triggerer loops.
TAKEOVER = dt.timedelta(seconds=35)
# The triggerer's line as it starts a task's trigger (one per triggerer that ran it).
TRIGGER_STARTED = re.compile(r"\(ID \d+\) starting")


def component_logs(stack: AirflowStack) -> str:
    return "\n".join(
        f"--- {name}\n{stack.component_log(name)[-4000:]}" for name in ("scheduler", "triggerer")
    )


def metadata_db(stack: AirflowStack, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` (``:name`` parameters) on the stack's metadata database, SQLite or PostgreSQL,
    committed; the rows it returned (none for an UPDATE)."""
    engine = sqlalchemy.create_engine(stack.settings.database)
    try:
        with engine.begin() as connection:
            result = connection.execute(sqlalchemy.text(sql), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


def results(stack: AirflowStack, dag_id: str, run_id: str, count: int) -> list[dict[str, Any]]:
    values = []
    for index in range(count):
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train/xcomEntries/return_value"
            f"?map_index={index}&deserialize=true"
        )
        values.append(stack.client.call("GET", path)["value"])
    return values


def states(stack: AirflowStack, dag_id: str, run_id: str) -> list[str | None]:
    tis = sorted(stack.client.task_instances(dag_id, run_id), key=lambda ti: ti["map_index"])
    return [ti["state"] for ti in tis]


def run_gang_sweep(stack: AirflowStack, dag_id: str = "rs_gang_sweep") -> tuple[str, list[dict[str, Any]]]:
    run_id = stack.client.trigger(dag_id)
    state = stack.client.wait_for_run(dag_id, run_id, timeout=SWEEP_TIMEOUT)
    assert states(stack, dag_id, run_id) == ["success"] * 6, component_logs(stack)
    assert state == "success"
    return run_id, results(stack, dag_id, run_id, 6)


def check_sweep_timelines(values: list[dict[str, Any]]) -> None:
    """Each job's times come from the cluster; no two gangs held the pool at once."""
    spans = []
    for value in values:
        submitted, admitted, finished = (
            parse_time(value[key]) for key in ("submitted_at", "admitted_at", "finished_at")
        )
        assert submitted is not None
        assert admitted is not None
        assert finished is not None
        assert submitted <= admitted <= finished, value
        # A 3 s job at one-second resolution: neither 0 (admission stamped at the end) nor long.
        assert 2.0 <= value["run_seconds"] <= 6.0, value
        spans.append((admitted, finished))
    spans.sort()
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - dt.timedelta(seconds=1), f"two gangs overlapped: {spans}"


def pid_of_task(ti_id: str) -> int | None:
    """The task process: its title is ``airflow worker -- <ti id>`` (the id is a UUID)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if title.startswith(f"airflow worker -- {ti_id}"):
            return int(entry.name)
    return None


def result_of(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    path = (
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        "?deserialize=true"
    )
    value: dict[str, Any] = stack.client.call("GET", path)["value"]
    return value


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def triggers_held(stack: AirflowStack) -> Counter[int]:
    rows = metadata_db(stack, "select triggerer_id from trigger where triggerer_id is not null")
    return Counter(int(row[0]) for row in rows)
