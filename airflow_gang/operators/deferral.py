"""Handing a try's wait to the triggerer, and reading back how it ended.

`build_trigger` turns the try's `WaitPlan` into the `GangJobTrigger` it defers to, with the
framework's own deferral timeout padded so the trigger reports ``execution_timeout`` first, with
a useful message. `event_error` turns the trigger's event into the exception the task fails with
(nothing of it deletes a job: an admission timeout was deleted by the trigger, an outage deletes
nothing, a refused read deletes nothing); the operator handles the rest (a success to finish, an
earlier try's job deleted meanwhile, its own ``execution_timeout``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from airflow_gang.exceptions import GangAdmissionTimeout, GangApiError, GangApiUnavailable, GangJobLost
from airflow_gang.operators import lifecycle
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
        not_before=lifecycle.resume_not_before(),
        **trigger_kwargs,
        **plan.kwargs(),
    )
    return trigger, timeout


def is_execution_timeout(event: JsonDict) -> bool:
    """An ``error`` event for the task's own ``execution_timeout`` (the task then deletes the job)."""
    message = str(event.get("message") or "")
    # A trigger serialized by 0.1 gave no reason; its execution_timeout said so in words.
    reason = event.get("reason") or ("execution_timeout" if "execution_timeout" in message else None)
    return event["status"] == "error" and reason == "execution_timeout"


def event_error(event: JsonDict) -> Exception | None:
    """The exception the task fails with for this event; None for an event the task goes on from.

    A ``lost`` job counts as `GangJobLost` here; the operator first checks whether it was an
    earlier try's job (then it submits anew).
    """
    name, namespace, status = event["name"], event["namespace"], event["status"]
    message = str(event.get("message") or "")
    if status == "api_unavailable":  # nothing deleted: the next try reattaches
        return GangApiUnavailable(
            message,
            unavailable_seconds=float(event.get("unavailable_seconds") or 0.0),
            last_error=str(event.get("last_error") or message),
            name=name,
            namespace=namespace,
        )
    if status == "lost":
        return GangJobLost(message, name=name, namespace=namespace)
    if status == "admission_timeout":
        return GangAdmissionTimeout(
            f"PyTorchJob {namespace}/{name} was not admitted in time ({message}); "
            "it was deleted so a retry starts clean",
            name=name,
            namespace=namespace,
            queue=event.get("queue"),
            reason=message,
        )
    if status == "error":
        return GangApiError(f"waiting for PyTorchJob {namespace}/{name} failed: {message}", name=name)
    return None
