"""`WaitPlan`: what a try waits for and until when, carried across a deferral unchanged.

Deadlines are absolute UTC times fixed when the job was created (admission) or the try started
(``execution_timeout``), so neither a deferral, a triggerer restart nor an API outage moves them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]


def _moment(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


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

    @classmethod
    def from_kwargs(cls, kwargs: JsonDict, event: JsonDict) -> WaitPlan:
        """The plan back from ``execute_complete``'s kwargs, the event's copy winning.

        ``dag.test()`` resumes a task with the event alone, without the defer kwargs, so the
        trigger puts the plan into its event too.
        """
        merged = {**kwargs, **(event.get("wait") or {})}
        submitted = (event.get("timeline") or {}).get("submitted_at") or merged.get("submitted_at")
        return cls(
            gang_scheduling=merged.get("gang_scheduling") or "provider",
            wait_for=merged.get("wait_for") or "both",
            admission_deadline=_moment(merged.get("admission_deadline")),
            submitted_at=_moment(submitted) or dt.datetime.now(dt.UTC),
            execution_deadline=_moment(merged.get("execution_deadline")),
        )
