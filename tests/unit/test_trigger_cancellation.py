"""A cancelled `GangJobTrigger` stops, even when its feed signals a change at the same moment.

Python 3.11's ``asyncio.wait_for`` returns the awaited result instead of raising when the task
is cancelled as that result arrives, so a trigger waiting for its feed through it could lose
the triggerer's cancellation (a cleared task, a triggerer handing triggers over) and go on
waiting: seen as a 300 s hang in the 50-trigger event-loop test under a loaded CI.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.triggers.gang import GangJobTrigger

QUEUED_JOB = {
    "metadata": {
        "name": "train-1",
        "namespace": "ml",
        "uid": "u-1",
        "creationTimestamp": "2026-12-01T12:00:00Z",
    },
    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
    "status": {"conditions": [{"type": "Created", "status": "True"}]},
}
PENDING_GROUP = {
    "metadata": {"name": "train-1"},
    "spec": {"minMember": 2, "queue": "default"},
    "status": {"phase": "Pending"},
}


class QueuedFeed:
    """A feed that always shows the gang queued and never needs the API."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.looks = 0

    def healthy(self) -> bool:
        return True

    def look(self) -> GangSnapshot:
        self.looks += 1
        return GangSnapshot.of(QUEUED_JOB, PENDING_GROUP, [], "provider")


@pytest.mark.parametrize("rounds", range(20))
async def test_a_cancel_that_lands_with_a_change_stops_the_wait(rounds: int) -> None:
    trigger = GangJobTrigger("train-1", "ml", "u-1", poll_interval=30.0, kubernetes_conn_id=None)
    feed = QueuedFeed()
    hook: Any = None  # the feed answers every look: the wait never calls the API
    task = asyncio.ensure_future(trigger._wait(hook, feed))
    while feed.looks == 0:
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # the wait now sleeps on feed.changed
    feed.changed.set()  # the change and the cancel arrive in the same loop iteration
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
