"""Time as the controllers write it: UTC now, and metav1.Time's wire form (seconds, ``Z``)."""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    """metav1.Time's wire form: seconds precision, ``Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
