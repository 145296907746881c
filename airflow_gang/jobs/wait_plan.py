"""`WaitPlan`: what a wait is for and until when, carried across a deferral unchanged.

Deadlines are absolute UTC times, fixed when the job was created (admission) or the try started
(``execution_timeout``), so neither a deferral, a triggerer restart nor an API outage moves them.
The operator, the TaskFlow decorator and the sensors all describe their waits so;
`airflow_gang.triggers.handover` turns a plan into the trigger that carries it out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]
# ``both``: admission (with its deadline) then completion; ``completion`` ignores admission.
WaitFor = Literal["admission", "completion", "both"]


def _text(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


@dataclass(frozen=True)
class WaitPlan:
    gang_scheduling: str
    wait_for: WaitFor
    admission_deadline: dt.datetime | None
    submitted_at: dt.datetime | None
    execution_deadline: dt.datetime | None = None
    # The queue the task asked for, which the PodGroup must be in when it appears (None: no check).
    expected_queue: str | None = None
    # What a disruption of the running gang does (`airflow_gang.jobs.disruption`); None: the wait
    # only reports it (a sensor does not own the job).
    on_disruption: str | None = None
    max_disruptions: int | None = None
    readmission_timeout: float | None = None

    @classmethod
    def for_job(
        cls,
        job: JsonDict | None,
        gang_scheduling: str,
        wait_for: WaitFor,
        *,
        admission_timeout: float | None,
        expected_queue: str | None = None,
        on_disruption: str | None = None,
        max_disruptions: int | None = None,
    ) -> WaitPlan:
        """The plan for ``job``: its admission clock starts at the job's creation (also when an
        earlier try, or another task, submitted it), or now if the job shows none."""
        created = parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp"))
        submitted_at = created or dt.datetime.now(dt.UTC)
        deadline = None
        if admission_timeout and wait_for != "completion":
            deadline = submitted_at + dt.timedelta(seconds=admission_timeout)
        return cls(
            gang_scheduling,
            wait_for,
            deadline,
            submitted_at,
            expected_queue=expected_queue,
            on_disruption=on_disruption,
            max_disruptions=max_disruptions,
            # A requeued gang waits for re-admission as long as a new one waits for admission.
            readmission_timeout=admission_timeout if on_disruption else None,
        )

    def until(self, moment: dt.datetime | None) -> WaitPlan:
        """This plan, ending at ``moment`` at the latest unless it already has an end."""
        if self.execution_deadline is not None or moment is None:
            return self
        return dataclasses.replace(self, execution_deadline=moment)

    def kwargs(self) -> JsonDict:
        """The plan as JSON-safe keyword arguments (of the trigger and of ``execute_complete``)."""
        return {
            "gang_scheduling": self.gang_scheduling,
            "wait_for": self.wait_for,
            "admission_deadline": _text(self.admission_deadline),
            "execution_deadline": _text(self.execution_deadline),
            "submitted_at": _text(self.submitted_at),
            "expected_queue": self.expected_queue,
            "on_disruption": self.on_disruption,
            "max_disruptions": self.max_disruptions,
            "readmission_timeout": self.readmission_timeout,
        }
