"""``metav1.Condition`` lists, the way ``meta.SetStatusCondition`` maintains them.

TrainJob and JobSet report their state in such lists (type, status, reason, message,
lastTransitionTime). Setting a condition replaces the one of the same type in place; its
``lastTransitionTime`` moves only when its status changes, so re-stating a condition every
reconcile is not a change a status write would carry. Pure functions over wire dicts.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from gang_sim.controllers.clock import rfc3339

JsonDict = dict[str, Any]


def find(conditions: list[JsonDict] | None, ctype: str) -> JsonDict | None:
    return next((c for c in conditions or [] if c.get("type") == ctype), None)


def is_true(conditions: list[JsonDict] | None, ctype: str) -> bool:
    condition = find(conditions, ctype)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: list[JsonDict],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: dt.datetime,
    transition_time: str | None = None,
) -> list[JsonDict]:
    """``conditions`` with ``ctype`` set; a new list, the input is left alone.

    :param transition_time: the time to record when the status changes (a mirrored condition
        keeps its source's); ``now`` otherwise.
    """
    result = [dict(c) for c in conditions]
    existing = find(result, ctype)
    if existing is None:
        result.append(
            {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": transition_time or rfc3339(now),
            }
        )
        return result
    if existing.get("status") != status:
        existing["status"] = status
        existing["lastTransitionTime"] = transition_time or rfc3339(now)
    existing["reason"], existing["message"] = reason, message
    return result


def remove(conditions: list[JsonDict], ctype: str) -> list[JsonDict]:
    return [dict(c) for c in conditions if c.get("type") != ctype]
