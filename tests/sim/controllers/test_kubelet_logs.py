"""The node's log store and the kubelet's rules for which container instance a request reads."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from gang_sim.controllers.kubelet.logs import (
    ContainerLog,
    LogQuery,
    LogUnavailable,
    log_container_id,
    render,
    tail,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def pod(
    state: dict[str, Any] | None, last: dict[str, Any] | None = None, cid: str = "sim://2"
) -> dict[str, Any]:
    statuses = (
        [] if state is None else [{"name": "c", "containerID": cid, "state": state, "lastState": last or {}}]
    )
    return {"metadata": {"name": "p"}, "status": {"containerStatuses": statuses}}


@pytest.mark.parametrize(
    ("status", "previous", "expected"),
    [
        (pod({"running": {}}), False, "sim://2"),
        (pod({"terminated": {"containerID": "sim://2"}}), False, "sim://2"),
        # Between restarts (CrashLoopBackOff) the log is the run that just ended.
        (
            pod({"waiting": {"reason": "CrashLoopBackOff"}}, {"terminated": {"containerID": "sim://1"}}),
            False,
            "sim://1",
        ),
        (pod({"running": {}}, {"terminated": {"containerID": "sim://1"}}), True, "sim://1"),
    ],
)
def test_the_instance_a_log_request_reads(status: dict[str, Any], previous: bool, expected: str) -> None:
    assert log_container_id(status, "c", previous) == expected


@pytest.mark.parametrize(
    ("status", "previous", "message"),
    [
        (pod(None), False, 'container "c" in pod "p" is waiting to start: ContainerCreating'),
        (
            pod({"waiting": {"reason": "CreateContainerConfigError"}}),
            False,
            "waiting to start: CreateContainerConfigError",
        ),
        (pod({"terminated": {"exitCode": 137}}), False, 'container "c" in pod "p" is terminated'),
        (pod({"running": {}}), True, 'previous terminated container "c" in pod "p" not found'),
    ],
)
def test_when_there_is_no_log_to_read(status: dict[str, Any], previous: bool, message: str) -> None:
    with pytest.raises(LogUnavailable, match=message):
        log_container_id(status, "c", previous)


def test_tail_is_counted_before_since_and_bytes_cut_last() -> None:
    log = ContainerLog()
    log.append(["old"], T0)
    log.append(["new 1", "new 2"], T0 + dt.timedelta(seconds=10))
    since = LogQuery(since=T0 + dt.timedelta(seconds=5))

    assert render(tail(log.lines(), 2), since, None) == (b"new 1\nnew 2\n", None)
    assert render(tail(log.lines(), 3), since, None)[0] == b"new 1\nnew 2\n"
    assert render(log.lines(), LogQuery(), 7) == (b"old\nnew", 0)
    assert render(log.lines(), LogQuery(timestamps=True), None)[0].startswith(
        b"2026-01-01T00:00:00.000000000Z old\n"
    )


def test_a_full_log_keeps_the_newest_lines_and_counts_every_line() -> None:
    log = ContainerLog(max_lines=2)
    log.append(["a", "b", "c"], T0)

    assert [line.text for line in log.lines()] == ["b", "c"]
    assert [line.text for line in log.lines(after=2)] == ["c"]
    assert log.offset == 3


async def test_followers_wake_on_new_lines_and_end_when_the_container_exits() -> None:
    log = ContainerLog()
    waiter = asyncio.create_task(log.wait(0))
    await asyncio.sleep(0)
    assert not waiter.done()
    log.append(["hello"], T0)
    await asyncio.wait_for(waiter, 1)
    closed = asyncio.create_task(log.wait(1))
    log.close()
    await asyncio.wait_for(closed, 1)
