"""Time as the controllers write and read it: UTC now, and metav1.Time's wire form (seconds, ``Z``)."""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    """metav1.Time's wire form: seconds precision, ``Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> dt.datetime | None:
    """metav1.Time read back from the wire; None for an unset one."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
