"""`WaitPlan`: what a try waits for and until when, carried across a deferral unchanged.

Deadlines are absolute UTC times fixed when the job was created (admission) or the try started
(``execution_timeout``), so neither a deferral, a triggerer restart nor an API outage moves them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]


def _text(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


@dataclass(frozen=True)
class WaitPlan:
    gang_scheduling: str
    wait_for: str  # admission | both
    admission_deadline: dt.datetime | None
    submitted_at: dt.datetime
    execution_deadline: dt.datetime | None = None

    def kwargs(self) -> JsonDict:
        """The plan as JSON-safe keyword arguments (of the trigger and of ``execute_complete``)."""
        return {
            "gang_scheduling": self.gang_scheduling,
            "wait_for": self.wait_for,
            "admission_deadline": _text(self.admission_deadline),
            "execution_deadline": _text(self.execution_deadline),
            "submitted_at": self.submitted_at.isoformat(),
        }
