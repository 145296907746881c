"""When a deferred wait may end at the earliest: ``[gang] resume_hold_seconds`` after the deferral.

Airflow 3.3.2 fails a task whose resumed try races the scheduler's handling of the deferral
(apache/airflow#72716); a trigger fires no event before its ``not_before`` (see `GangJobTrigger`).
"""

from __future__ import annotations

import datetime as dt

from airflow_gang.exceptions import GangSpecError


def resume_hold_seconds() -> float:
    """``[gang] resume_hold_seconds``: how long after a deferral a trigger may fire at the earliest."""
    from airflow.configuration import conf

    configured = conf.get("gang", "resume_hold_seconds", fallback="10")
    try:
        return max(0.0, float(configured or 0))
    except ValueError:
        raise GangSpecError(
            f"[gang] resume_hold_seconds={configured!r} is invalid: use a number of seconds (0 turns the "
            "hold off)",
            field="resume_hold_seconds",
        ) from None


def resume_not_before() -> str:
    """The ``not_before`` of a trigger deferred now (ISO UTC); see `GangJobTrigger`."""
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=resume_hold_seconds())).isoformat()
