"""`AirflowStack` end to end: the real scheduler, dag-processor, triggerer and api-server.

Runs over the REST API only, as a user's test would; the last test stops the stack while a
task runs and checks that nothing it started survives.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from gang_stack import AirflowClient, AirflowStack, StackError
from tests.stack.conftest import process_tree, still_running

COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}


def test_every_part_is_healthy(stack: AirflowStack) -> None:
    health = stack.client.health()
    assert {
        part: health[part]["status"] for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
    } == {
        "metadatabase": "healthy",
        "scheduler": "healthy",
        "triggerer": "healthy",
        "dag_processor": "healthy",
    }
    assert set(stack.components) == COMPONENTS
    assert all(component.running() for component in stack.components.values())
    assert stack.startup_seconds is not None
    assert stack.startup_seconds < 120
    assert stack.url.startswith("http://127.0.0.1:")
    for name in COMPONENTS:
        assert stack.component_log(name), name
    assert "airflow" in stack.component_log("scheduler").lower()
    with pytest.raises(StackError, match="no log"):
        stack.component_log("webserver")


def test_run_succeeds_and_the_log_has_the_tasks_print(stack: AirflowStack) -> None:
    api = stack.client
    dag = api.wait_for_dag("stack_hello", timeout=60)
    assert dag["is_paused"] is False
    run_id = api.trigger("stack_hello", conf={"greeting": "hi-from-the-test"}, run_id="hello-1")
    assert run_id == "hello-1"
    assert api.wait_for_run("stack_hello", run_id, timeout=120) == "success"

    (ti,) = api.task_instances("stack_hello", run_id)
    assert (ti["task_id"], ti["state"], ti["try_number"], ti["map_index"]) == ("greet", "success", 1, -1)
    log = api.task_log("stack_hello", run_id, "greet", try_number=1)
    assert "hello from the task, greeting=hi-from-the-test" in log
    assert "Returned value was: 42" in log


def test_clearing_a_task_runs_it_again(stack: AirflowStack) -> None:
    api = stack.client
    cleared = api.clear_task("stack_hello", "hello-1", "greet")
    assert [ti["task_id"] for ti in cleared] == ["greet"]
    ti = api.wait_for_task_state("stack_hello", "hello-1", "greet", {"success", "failed"}, timeout=120)
    assert (ti["state"], ti["try_number"]) == ("success", 2)
    assert "greeting=hi-from-the-test" in api.task_log("stack_hello", "hello-1", "greet", try_number=2)


# Slow (CI's time budget): every deferred real-stack test (tests/realstack) resumes through it.
@pytest.mark.slow
def test_deferred_task_resumes_through_the_triggerer(stack: AirflowStack) -> None:
    api = stack.client
    api.wait_for_dag("stack_deferred", timeout=60)
    run_id = api.trigger("stack_deferred")
    api.wait_for_task_state("stack_deferred", run_id, "wait", {"deferred"}, timeout=90)
    assert api.wait_for_run("stack_deferred", run_id, timeout=120) == "success"

    states = {
        ti["task_id"]: (ti["state"], ti["try_number"]) for ti in api.task_instances("stack_deferred", run_id)
    }
    assert states == {"wait": ("success", 1), "after": ("success", 1)}
    log = api.task_log("stack_deferred", run_id, "wait", try_number=1)
    # One try: deferred on a worker, the trigger ran in the triggerer, resumed on a worker.
    assert "deferring until" in log
    assert "DateTimeTrigger" in log
    assert "resumed after the trigger fired" in log
    assert log.index("deferring until") < log.index("resumed after the trigger fired")


# Slow (CI's time budget): tests/realstack marks running tasks failed through the same call.
@pytest.mark.slow
def test_marking_a_running_task_failed_kills_it(stack: AirflowStack) -> None:
    api = stack.client
    api.wait_for_dag("stack_sleep", timeout=60)
    run_id = api.trigger("stack_sleep")
    ti = api.wait_for_task_state("stack_sleep", run_id, "sleep_long", {"running"}, timeout=90)
    deadline = time.monotonic() + 60
    while "sleeping for ten minutes" not in api.task_log("stack_sleep", run_id, "sleep_long", 1):
        assert time.monotonic() < deadline, "the task never printed"
        time.sleep(0.5)

    marked = api.set_task_state("stack_sleep", run_id, "sleep_long", "failed")
    assert [t["state"] for t in marked] == ["failed"]
    assert api.wait_for_run("stack_sleep", run_id, timeout=60) == "failed"
    # The worker learns it from its next heartbeat (every 5 s) and kills the task process.
    assert still_running([psutil.Process(ti["pid"])], timeout=30) == []
    log = api.task_log("stack_sleep", run_id, "sleep_long", 1)
    assert "Server indicated the task shouldn't be running anymore" in log


def test_a_new_dag_file_is_picked_up_in_seconds(stack: AirflowStack) -> None:
    source = (Path(__file__).parent / "dags" / "stack_hello.py").read_text()
    (stack.dags_folder / "stack_added.py").write_text(source.replace('"stack_hello"', '"stack_added"'))
    began = time.monotonic()
    stack.client.wait_for_dag("stack_added", timeout=45, unpause=False)
    print(f"new DAG file parsed after {time.monotonic() - began:.1f}s")


def ti_pid(api: AirflowClient, run_id: str) -> int:
    return int(api.task_instance("stack_sleep", run_id, "sleep_long")["pid"])


@pytest.mark.slow  # a harness error path: waits out a DAG processor's parse of a broken file
def test_waiting_for_a_broken_dag_names_its_import_error(stack: AirflowStack) -> None:
    source = (
        "from airflow.sdk import DAG\n\n"
        "with DAG('stack_broken', schedule=None):\n"
        "    raise ValueError('broken on purpose')\n"
    )
    (stack.dags_folder / "stack_broken.py").write_text(source)
    with pytest.raises(StackError, match="broken on purpose") as raised:
        stack.client.wait_for_dag("stack_broken", timeout=15)
    assert "DAG 'stack_broken' was not parsed" in str(raised.value)
    assert "stack_broken.py" in str(raised.value)


def test_stop_ends_every_process_including_a_running_task(stack: AirflowStack) -> None:
    api = stack.client
    # Parsed and unpaused here, not by an earlier test (which `make test` may leave out as slow).
    api.wait_for_dag("stack_sleep", timeout=60)
    run_id = api.trigger("stack_sleep")
    api.wait_for_task_state("stack_sleep", run_id, "sleep_long", {"running"}, timeout=90)
    time.sleep(1)  # the task process reports "running" itself: it exists, maybe still starting
    sessions = {component.pid for component in stack.components.values()}
    processes = process_tree(sessions, roots=sorted(sessions))
    names = " ".join(proc.name() for proc in processes)
    assert len(processes) > len(COMPONENTS), names  # executor workers, the task, serve-logs...
    assert ti_pid(api, run_id) in {proc.pid for proc in processes}

    began = time.monotonic()
    stack.stop()
    print(f"stopped in {time.monotonic() - began:.1f}s; SIGKILL after the grace: {stack.killed_on_stop}")
    assert stack.leftovers == []
    assert still_running(processes) == []
    # Also what the session scan finds now (killed orphans may linger as zombies until init reaps them).
    assert still_running(process_tree(sessions, roots=[])) == []
    assert stack.components == {}
    stack.stop()  # idempotent
