"""Handing a try's wait to the triggerer.

`build_trigger` turns the try's `WaitPlan` into the `GangJobTrigger` it defers to, with the
framework's own deferral timeout padded so the trigger reports ``execution_timeout`` first, with
a useful message. How the wait ended comes back as a `triggers.events.GangEvent`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from airflow_gang.jobs import resume_hold
from airflow_gang.operators.wait_plan import WaitPlan
from airflow_gang.triggers.gang import GangJobTrigger

JsonDict = dict[str, Any]
# How much later than the trigger's own execution deadline the framework's deferral timeout fires.
TIMEOUT_PADDING = dt.timedelta(seconds=60)


def build_trigger(
    job: JsonDict,
    plan: WaitPlan,
    *,
    execution_timeout: dt.timedelta | None,
    started: dt.datetime | None,
    admitted_at: str | None,
    **trigger_kwargs: Any,
) -> tuple[GangJobTrigger, dt.timedelta | None]:
    """The trigger to defer to and the deferral's timeout (None: none).

    :param execution_timeout: the task's; with ``started`` (the try's start) it fixes the
        plan's execution deadline unless an earlier deferral of this try already did.
    :param trigger_kwargs: the rest of `GangJobTrigger`'s arguments (connection, poll interval...).
    """
    if plan.execution_deadline is None and execution_timeout is not None and started is not None:
        plan = dataclasses.replace(plan, execution_deadline=started + execution_timeout)
    timeout = None
    if plan.execution_deadline is not None:
        left = max(dt.timedelta(seconds=1), plan.execution_deadline - dt.datetime.now(dt.UTC))
        timeout = left + TIMEOUT_PADDING
    metadata = job["metadata"]
    trigger = GangJobTrigger(
        name=metadata["name"],
        namespace=metadata["namespace"],
        uid=metadata["uid"],
        admitted_at=admitted_at,
        not_before=resume_hold.resume_not_before(),
        **trigger_kwargs,
        **plan.kwargs(),
    )
    return trigger, timeout
