"""A trigger's handling of disruptions: one look's step told, and the event when the policy gives up.

The trigger keeps one `DisruptionTracker` per wait (its ``on_disruption``, ``max_disruptions``
and ``readmission_timeout`` come from the task's `WaitPlan`). A step's lines are queued for the
trigger's writer thread like its status lines; when the policy gives the job up, the trigger
deletes the job (confirming it gone, as after an admission timeout) and ends its wait with a
``disrupted`` event (or ``admission_timeout`` when a requeued gang was not re-admitted in time).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from airflow_gang.jobs.disruption import DisruptionTracker
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.reports import disruption_report
from airflow_gang.triggers import status_lines
from airflow_gang.triggers.events import WaitingFor, gang_event

JsonDict = dict[str, Any]


def _task_tags(trigger: Any) -> dict[str, str | None]:
    """dag_id and task_id of the trigger's task instance, where the triggerer gave it one."""
    ti = getattr(trigger, "task_instance", None)
    return {"dag_id": getattr(ti, "dag_id", None), "task_id": getattr(ti, "task_id", None)}


async def follow(
    trigger: WaitingFor,
    tracker: DisruptionTracker,
    seen: GangSnapshot,
    delete: Callable[[], Awaitable[bool]],
) -> JsonDict | None:
    """Tell what this look found; the event that ends the wait when the policy gives the job up."""
    step = tracker.look(seen, admitted=trigger.admitted_at is not None)
    log = trigger.log  # type: ignore[attr-defined]

    def write(level: str, text: str) -> None:
        status_lines.queue_line(log, "warning" if level == "warning" else "info", "%s", text)

    disruption_report.report(
        step, seen.status, f"{trigger.namespace}/{trigger.name}", write, **_task_tags(trigger)
    )
    if step.give_up is None:
        return None
    gone = await delete()
    if step.give_up.kind == "readmission_timeout":
        event = gang_event(trigger, "admission_timeout", seen, step.give_up.message, reason="readmission")
    else:
        event = gang_event(trigger, "disrupted", seen, step.give_up.message)
    return {**event, "deleted": gone}
