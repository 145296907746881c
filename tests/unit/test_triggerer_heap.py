"""`airflow_gang.triggers.heap`: the triggerer's heap is frozen once, in a triggerer only, unless turned off.

Each case runs in a fresh interpreter: freezing is process-wide and one-way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import gc, json, sys
if {triggerer}:
    import airflow.jobs.triggerer_job_runner  # what `airflow triggerer` imports
from airflow_gang.triggers import heap
first = heap.freeze_once()
after_first = gc.get_freeze_count()
second = heap.freeze_once()
print(json.dumps({{"first": first, "second": second, "frozen": after_first,
                  "frozen_after_second": gc.get_freeze_count()}}))
"""


def run(*, triggerer: bool, setting: str | None = None) -> dict[str, object]:
    env = {key: value for key, value in os.environ.items() if key != "AIRFLOW__GANG__FREEZE_TRIGGERER_HEAP"}
    if setting is not None:
        env["AIRFLOW__GANG__FREEZE_TRIGGERER_HEAP"] = setting
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(triggerer=triggerer)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.timeout(600)
def test_inside_a_triggerer_the_heap_is_frozen_once() -> None:
    seen = run(triggerer=True)
    assert seen["first"] is True
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 10_000  # Airflow's imports, at least
    assert seen["second"] is False
    assert seen["frozen_after_second"] == seen["frozen"]


@pytest.mark.timeout(600)
def test_outside_a_triggerer_nothing_is_frozen() -> None:
    """``dag.test()``, a worker, a test process: their heaps are left alone."""
    assert run(triggerer=False) == {"first": False, "second": False, "frozen": 0, "frozen_after_second": 0}


@pytest.mark.timeout(600)
def test_the_setting_turns_it_off() -> None:
    seen = run(triggerer=True, setting="False")
    assert seen["first"] is False
    assert seen["frozen"] == 0
