"""Handing a wait to the triggerer: the `GangJobTrigger` for a job and a `WaitPlan`.

One builder for every waiter (the operator, the decorator, the sensors), so they defer alike:
the same deadlines, the same resume hold (`airflow_gang.jobs.resume_hold`), and the framework's
own deferral timeout padded so the trigger reports ``execution_timeout`` first, with a useful
message. How the wait ended comes back as a `airflow_gang.triggers.events.GangEvent`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_gang.jobs import resume_hold
from airflow_gang.jobs.wait_plan import WaitPlan
from airflow_gang.triggers.gang import GangJobTrigger

# How much later than the trigger's own execution deadline the framework's deferral timeout fires.
TIMEOUT_PADDING = dt.timedelta(seconds=60)


def trigger_for(
    name: str, namespace: str, uid: str, plan: WaitPlan, **trigger_kwargs: Any
) -> tuple[GangJobTrigger, dt.timedelta | None]:
    """The trigger to defer to and the deferral's timeout (None: none).

    :param trigger_kwargs: the rest of `GangJobTrigger`'s arguments (connection, poll interval,
        ``delete_on_kill``...).
    """
    timeout = None
    if plan.execution_deadline is not None:
        left = max(dt.timedelta(seconds=1), plan.execution_deadline - dt.datetime.now(dt.UTC))
        timeout = left + TIMEOUT_PADDING
    trigger = GangJobTrigger(
        name=name,
        namespace=namespace,
        uid=uid,
        not_before=resume_hold.resume_not_before(),
        **trigger_kwargs,
        **plan.kwargs(),
    )
    return trigger, timeout
