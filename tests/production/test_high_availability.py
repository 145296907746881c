"""The mapped gang sweep on PostgreSQL with two schedulers and two triggerers, and a triggerer lost
mid-sweep (issue 24).

Airflow gives a dead triggerer's triggers to a live one once the dead one's heartbeat is
``[triggerer] triggerer_health_check_threshold`` (30 s) old. Which triggerer runs which trigger
is in the metadata database (``trigger.triggerer_id``, a ``job`` row per triggerer); which job row
is which component is found by pausing one (SIGSTOP) until its heartbeat visibly stops.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
from kubernetes import client as k8s

from gang_stack import AirflowStack
from tests.production.conftest import SWEEP
from tests.support.cluster import jobs_of
from tests.support.job_watches import created_jobs
from tests.support.realstack import (
    RACE_MESSAGE,
    check_sweep_timelines,
    metadata_db,
    results,
    run_gang_sweep,
    states,
    triggers_held,
)
from tests.waiting import eventually

TRIGGERERS = ("triggerer", "triggerer-2")
# Airflow's triggerer heartbeats every [triggerer] job_heartbeat_sec (5 s).
HEARTBEAT_SECONDS = 5.0


def triggerer_heartbeats(stack: AirflowStack) -> dict[int, dt.datetime]:
    rows = metadata_db(
        stack, "select id, latest_heartbeat from job where job_type = 'TriggererJob' and state = 'running'"
    )
    return {int(job_id): beat for job_id, beat in rows}


def job_rows_of_triggerers(stack: AirflowStack) -> dict[str, int]:
    """Which ``job`` row is which triggerer: the one whose heartbeat stops while "triggerer" is paused."""
    before = triggerer_heartbeats(stack)
    assert len(before) == 2, before
    pid = stack.components["triggerer"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(2 * HEARTBEAT_SECONDS + 1)
        after = triggerer_heartbeats(stack)
    finally:
        os.kill(pid, signal.SIGCONT)
    paused = [job_id for job_id in before if after.get(job_id) == before[job_id]]
    assert len(paused) == 1, (before, after)
    (other,) = set(before) - set(paused)
    # Back to a fresh heartbeat before anything is measured: a stale one would make Airflow hand
    # its triggers over early.
    eventually(
        lambda: triggerer_heartbeats(stack).get(paused[0]) != before[paused[0]],
        timeout=30,
        message="the paused triggerer never heartbeat again",
    )
    return {"triggerer": paused[0], "triggerer-2": other}


def test_the_mapped_gang_sweep_runs_one_gang_at_a_time_on_two_schedulers_and_two_triggerers(
    stack: AirflowStack,
) -> None:
    assert set(stack.components) >= {"scheduler", "scheduler-2", *TRIGGERERS}
    _, values = run_gang_sweep(stack, SWEEP)
    check_sweep_timelines(values)
    assert len({value["uid"] for value in values}) == 6  # one job per task
    assert stack.settings.database.startswith("postgresql")


@pytest.mark.slow
def test_five_consecutive_sweeps_all_succeed(stack: AirflowStack, api: k8s.ApiClient) -> None:
    """Issue 24's bar for the production shape: five sweeps in a row, 6/6 each with retries=0
    (``GANG_PRODUCTION_SWEEPS`` sets another count)."""
    for number in range(int(os.environ.get("GANG_PRODUCTION_SWEEPS", "5"))):
        began = time.monotonic()
        _, values = run_gang_sweep(stack, SWEEP)
        check_sweep_timelines(values)
        assert len({value["uid"] for value in values}) == 6
        eventually(lambda: not jobs_of(api, SWEEP), timeout=30, message="the sweep left jobs")
        print(f"sweep {number + 1}: 6/6 in {time.monotonic() - began:.0f} s")
    for scheduler in ("scheduler", "scheduler-2"):
        assert RACE_MESSAGE not in stack.component_log(scheduler)


def test_a_triggerer_killed_mid_sweep_hands_every_wait_to_the_other(
    stack: AirflowStack, api: k8s.ApiClient
) -> None:
    rows = job_rows_of_triggerers(stack)
    client = stack.client
    with created_jobs(api, SWEEP) as created:
        run_id = client.trigger(SWEEP)
        eventually(
            lambda: sum(triggers_held(stack).values()) >= 3, timeout=120, message="no triggers waiting"
        )
        held = triggers_held(stack)
        victim = max(TRIGGERERS, key=lambda name: held[rows[name]])
        survivor = next(name for name in TRIGGERERS if name != victim)
        assert held[rows[victim]] >= 1, held
        killed_at = time.time()
        stack.kill(victim, signal.SIGKILL)
        eventually(
            lambda: triggers_held(stack)[rows[victim]] == 0,
            timeout=120,
            interval=0.5,
            message=f"the triggers of the dead {victim} were never handed over",
        )
        handover = time.time() - killed_at
        state = client.wait_for_run(SWEEP, run_id, timeout=240)
    stack.start_component(victim)  # two triggerers again for whatever runs next

    assert state == "success"
    assert states(stack, SWEEP, run_id) == ["success"] * 6
    assert created.errors == []
    # One submission per task, on its first try: nothing was submitted twice or retried.
    assert sorted(try_number for _, try_number, _ in created.seen) == ["1"] * 6, created.seen
    values = results(stack, SWEEP, run_id, 6)
    check_sweep_timelines(values)  # none was deleted early and run again
    # Completions during the handover were noticed once the survivor ran their triggers.
    handed_over_at = dt.datetime.fromtimestamp(killed_at + handover, dt.UTC)
    tis = {ti["map_index"]: ti for ti in client.task_instances(SWEEP, run_id)}
    late = [
        (
            dt.datetime.fromisoformat(tis[index]["end_date"])
            - max(dt.datetime.fromisoformat(value["finished_at"]), handed_over_at)
        ).total_seconds()
        for index, value in enumerate(values)
    ]
    print(
        f"{victim} killed holding {held[rows[victim]]} of {sum(held.values())} triggers; {survivor} had "
        f"them all {handover:.1f} s later; task end after job end or handover: max {max(late):.1f} s"
    )
    # Airflow's 30 s heartbeat threshold, minus the dead one's heartbeat age, polled by the survivor.
    assert handover <= 90, handover
    assert max(late) < 30, late
