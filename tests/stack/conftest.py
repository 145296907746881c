"""One real Airflow stack per test module, and a look at its processes that does not trust the stack.

The stack serves a temporary copy of ``tests/stack/dags`` (a printing task, a deferring task,
a ten-minute sleep). Its home is under pytest's tmp folder, so the component logs stay there
for a failed test.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gang_stack import AirflowStack

DAGS = Path(__file__).parent / "dags"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    dags = tmp_path_factory.mktemp("dags")
    for source in DAGS.glob("*.py"):
        shutil.copy(source, dags / source.name)
    with AirflowStack(dags, home=tmp_path_factory.mktemp("airflow-home")) as running:
        print(f"stack up in {running.startup_seconds:.1f}s at {running.url}, home {running.home}")
        yield running


def process_tree(sessions: set[int], roots: list[int]) -> list[psutil.Process]:
    """Processes in ``sessions`` (what the components started, re-parented or not) or below ``roots``."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions:
                found[proc.pid] = proc
        except (ProcessLookupError, PermissionError):
            continue
    for pid in [*roots, *list(found)]:
        try:
            for child in psutil.Process(pid).children(recursive=True):
                found.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def still_running(processes: list[psutil.Process], timeout: float = 5.0) -> list[str]:
    """The ones alive (not zombies) after ``timeout``, described."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for proc in processes:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{proc.pid} {proc.name()}")
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)
