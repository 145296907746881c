"""The trigger's check of the queue a gang's PodGroup appears in (`GangJobTrigger`).

A TrainJob names its Volcano queue in a runtime patch; Trainer, then Volcano's mutating webhook
(on CREATE only), decide the queue the PodGroup is created in. Once created, nothing in the wait
moves it, so the first look at the PodGroup is the one check: the queue is logged, and when it is
not the one the task asked for, the job is deleted at once (in a wrong queue it may wait for
capacity that never comes, or run on GPUs meant for others; a retry would land there too) and
the wait ends with ``queue_mismatch``. The worker's wait (`airflow_gang.operators.worker_wait`)
does the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from airflow_gang.model.gang_state import GangSnapshot, podgroup_queue, queue_mismatch, queue_mismatch_message
from airflow_gang.model.outage import OutageLog
from airflow_gang.triggers.events import WaitingFor, gang_event
from airflow_gang.triggers.status_lines import write

JsonDict = dict[str, Any]


async def wrong_queue_event(
    wait: WaitingFor,
    seen: GangSnapshot,
    expected_queue: str | None,
    delete: Callable[[], Awaitable[bool]],
    log: OutageLog,
) -> JsonDict | None:
    """At the first look at the PodGroup in ``seen``: log its queue; in another than
    ``expected_queue``, ``delete`` the job and return the ``queue_mismatch`` event (else None)."""
    if seen.podgroup is None:
        return None
    # At DEBUG: the status lines name the queue too; off the loop like them (`status_lines.write`).
    queue = podgroup_queue(seen.podgroup)
    await write(log, "debug", "PodGroup %s/%s is in queue %s", wait.namespace, wait.name, queue)
    actual = queue_mismatch(expected_queue, seen)
    if actual is None:
        return None
    log.warning(
        "PodGroup %s/%s is in queue %r, not %r: deleting the job",
        wait.namespace,
        wait.name,
        actual,
        expected_queue,
    )
    gone = await delete()
    message = queue_mismatch_message(
        wait.job_kind, wait.namespace, wait.name, expected_queue, actual, deleted=gone
    )
    return {
        **gang_event(wait, "queue_mismatch", seen, message),
        "queue": actual,
        "asked_queue": expected_queue,
    }
