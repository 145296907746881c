"""Killing one component and starting it again, without Airflow: a stand-in component is a
Python process with a helper child (as the triggerer's trigger runner) and a descendant in a
session of its own (as a task's subprocess). The real components are killed and restarted in
tests/realstack/test_process_faults.py.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from gang_stack import AirflowStack, StackError
from gang_stack.processes import Component, _read_stat, is_alive, kill_component, start_component
from gang_stack.stack import _all_healthy
from tests.waiting import eventually

# The main process starts a helper in its own session and group, and a descendant in a new
# session; it writes their pids once they exist. With IGNORE_TERM the helper ignores SIGTERM.
COMPONENT = textwrap.dedent(
    """
    import subprocess, sys, time
    sleep = [sys.executable, "-c", IGNORE_TERM + "import time; time.sleep(600)"]
    helper = subprocess.Popen(sleep)
    detached = subprocess.Popen(sleep, start_new_session=True)
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write(f"{helper.pid} {detached.pid}")
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
    """
)


def stand_in(tmp_path: Path, ignore_term: bool = False) -> tuple[Component, list[tuple[int, int]]]:
    """A running stand-in component and its processes as (pid, start time), the main one first."""
    pids_file = tmp_path / "pids"
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_term else ""
    script = COMPONENT.replace("IGNORE_TERM", repr(ignore))
    component = start_component(
        "stand-in", [sys.executable, "-c", script, str(pids_file)], {}, tmp_path, tmp_path / "stand-in.log"
    )
    text = eventually(lambda: pids_file.exists() and pids_file.read_text(), timeout=30, message="no pids")
    pids = [component.pid, *(int(pid) for pid in str(text).split())]
    processes = []
    for pid in pids:
        info = _read_stat(pid)
        assert info is not None, pid
        processes.append((pid, info.start_time))
    return component, processes


def test_sigkill_ends_the_component_with_every_process_it_started(tmp_path: Path) -> None:
    component, processes = stand_in(tmp_path, ignore_term=True)
    report = kill_component(component, signal.SIGKILL, grace=5.0)
    assert [pid for pid, start in processes if is_alive(pid, start)] == []
    assert component.process.returncode == -signal.SIGKILL
    assert sorted(int(line.split(":")[0]) for line in report.killed) == sorted(pid for pid, _ in processes)
    assert report.left == []


def test_sigterm_reaches_the_main_process_and_what_it_leaves_gets_sigkill(tmp_path: Path) -> None:
    component, processes = stand_in(tmp_path, ignore_term=True)
    report = kill_component(component, signal.SIGTERM, grace=5.0)
    assert [pid for pid, start in processes if is_alive(pid, start)] == []
    assert component.process.returncode == -signal.SIGTERM  # the main process took the signal
    # The helpers got no SIGTERM (the sleeping descendant would have died of it): only SIGKILL.
    assert sorted(int(line.split(":")[0]) for line in report.killed) == sorted(
        pid for pid, _ in processes[1:]
    )
    assert report.left == []


def test_a_restarted_component_continues_its_log(tmp_path: Path) -> None:
    log = tmp_path / "part.log"
    for append in (False, True):
        done = start_component(
            "part", [sys.executable, "-c", "print('alive')"], {}, tmp_path, log, append=append
        )
        done.process.wait(timeout=30)
    text = log.read_text()
    assert text.splitlines().count("alive") == 2  # the first life's output kept
    assert "==> restarted: " in text


def test_kill_and_start_name_a_wrong_component_or_a_stack_not_started(tmp_path: Path) -> None:
    stack = AirflowStack(tmp_path)
    with pytest.raises(StackError, match="no component 'webserver'"):
        stack.kill("webserver")
    with pytest.raises(StackError, match="triggerer is not running"):
        stack.kill("triggerer")
    with pytest.raises(StackError, match="not started"):
        stack.start_component("triggerer")


def test_a_restart_waits_for_the_restarted_parts_heartbeat_only() -> None:
    since = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    old, new = (since - dt.timedelta(minutes=1)).isoformat(), (since + dt.timedelta(seconds=1)).isoformat()
    health = {
        "metadatabase": {"status": "healthy"},
        "scheduler": {"status": "healthy", "latest_scheduler_heartbeat": old},
        "triggerer": {"status": "healthy", "latest_triggerer_heartbeat": new},
        "dag_processor": {"status": "unhealthy", "latest_dag_processor_heartbeat": old},
    }
    assert _all_healthy(health, since, ["triggerer"])
    assert _all_healthy(health, since, [])  # the API server: answering is enough
    assert not _all_healthy(health, since)  # start() wants every heartbeat from this start
    assert not _all_healthy(health, since + dt.timedelta(seconds=2), ["triggerer"])
