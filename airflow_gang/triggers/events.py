"""The one event a `GangJobTrigger` fires, when it may fire, and the UTC times its wait is measured in.

An event carries everything the task needs to finish the wait without the trigger: the status and
why, the gang's last look (phase, queue, the ``progress`` entry), the wait's plan (``dag.test()``
resumes a task with the event alone, without its defer kwargs) and the timeline, taken from the
cluster's own objects. Deadlines travel as ISO UTC strings, so a triggerer restart does not
reset them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from airflow_gang.exceptions import (
    GangAdmissionTimeout,
    GangApiError,
    GangApiUnavailable,
    GangJobLost,
    GangQueueMismatch,
)
from airflow_gang.jobs.deletion import after_deletion
from airflow_gang.kinds import DEFAULT_JOB_KIND
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.model.outage import OutageLog
from airflow_gang.reports.disruption_report import give_up_error
from airflow_gang.reports.timeline import finished_at

JsonDict = dict[str, Any]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def parse_moment(moment: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(moment) if moment else None


def past(moment: str | None) -> bool:
    """Whether the ISO UTC time ``moment`` (None: never) has come."""
    parsed = parse_moment(moment)
    return parsed is not None and utc_now() >= parsed


async def hold_until(not_before: str | None, log: OutageLog) -> None:
    """Fire no event before ``not_before``: Airflow 3.3.2 fails a task whose resumed try races the
    scheduler's handling of the deferral (apache/airflow#72716; see `GangJobTrigger`)."""
    moment = parse_moment(not_before)
    if moment is None:
        return
    wait = (moment - utc_now()).total_seconds()
    if wait > 0:
        log.info(
            "holding the event %.1fs so the scheduler settles the deferral first (apache/airflow#72716)", wait
        )
        await asyncio.sleep(wait)


class EventStatus(StrEnum):
    """How a trigger's wait ended."""

    ADMITTED = "admitted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ADMISSION_TIMEOUT = "admission_timeout"  # the trigger deleted the job
    QUEUE_MISMATCH = "queue_mismatch"  # the PodGroup appeared in another queue: the trigger deleted the job
    DISRUPTED = "disrupted"  # the on_disruption policy gave the running gang up: the trigger deleted the job
    LOST = "lost"  # the job is gone (someone else deleted it)
    API_UNAVAILABLE = "api_unavailable"  # an outage past api_unavailable_timeout: nothing deleted
    ERROR = "error"  # see GangEvent.reason


# Waits that ended with the trigger deleting the job, and the state the job's record ends in.
TRIGGER_DELETED = {
    EventStatus.ADMISSION_TIMEOUT: "admission_timeout",
    EventStatus.DISRUPTED: "disrupted",
    EventStatus.QUEUE_MISMATCH: "failed",
}


@dataclass(frozen=True)
class GangEvent:
    """A trigger's event as the task reads it back (the ``TriggerEvent`` payload is plain JSON).

    Operator and sensors both turn it into their failure with `to_exception`.
    """

    status: EventStatus
    name: str
    namespace: str
    uid: str | None
    message: str
    reason: str | None  # with ERROR: execution_timeout (the task gives up) or api_error
    queue: str | None
    unavailable_seconds: float
    last_error: str | None
    progress: JsonDict  # the task state store's ``progress`` entry after the wait
    admitted_at: str | None
    finished_at: str | None
    reattached: bool  # the try had taken over an earlier try's job
    job_kind: str = DEFAULT_JOB_KIND.kind
    failure: JsonDict | None = None  # the failing replica the wait saw (`FailureMemory`)
    asked_queue: str | None = None  # with QUEUE_MISMATCH: the queue the task asked for
    deleted: bool | None = None  # ADMISSION_TIMEOUT, DISRUPTED: the trigger saw the job and its pods gone
    disruptions: tuple[JsonDict, ...] = ()  # the episodes the wait saw (`airflow_gang.jobs.disruption`)
    deleted_at: str | None = None  # when the trigger asked the cluster to delete the job (its record's end)

    @classmethod
    def of(cls, payload: JsonDict) -> GangEvent:
        timeline = payload.get("timeline") or {}
        return cls(
            status=EventStatus(payload["status"]),
            name=str(payload["name"]),
            namespace=str(payload["namespace"]),
            uid=payload.get("uid"),
            message=str(payload.get("message") or ""),
            reason=payload.get("reason"),
            queue=payload.get("queue"),
            unavailable_seconds=float(payload.get("unavailable_seconds") or 0.0),
            last_error=payload.get("last_error"),
            progress=_progress(payload),
            admitted_at=timeline.get("admitted_at"),
            finished_at=timeline.get("finished_at"),
            reattached=bool((payload.get("wait") or {}).get("reattached")),
            job_kind=str(payload.get("kind") or DEFAULT_JOB_KIND.kind),
            failure=payload.get("failure"),
            asked_queue=payload.get("asked_queue"),
            deleted=payload.get("deleted"),
            disruptions=tuple(d for d in payload.get("disruptions") or () if isinstance(d, dict)),
            deleted_at=timeline.get("deleted_at"),
        )

    @property
    def is_execution_timeout(self) -> bool:
        """The wait reached the task's own execution deadline (the task then deletes the job)."""
        return self.status is EventStatus.ERROR and self.reason == "execution_timeout"

    def to_exception(self, *, waited_seconds: float | None = None) -> Exception | None:
        """The exception the task fails with; None when it goes on: admitted, succeeded, or failed
        (whose `PyTorchJobFailed` names the failing replica, read from the cluster by the task).

        Nothing of it deletes a job: an admission timeout was deleted by the trigger, an outage
        or a refused read deletes nothing.
        """
        where = f"{self.job_kind} {self.namespace}/{self.name}"
        if self.status is EventStatus.API_UNAVAILABLE:  # the next try reattaches
            return GangApiUnavailable(
                self.message,
                unavailable_seconds=self.unavailable_seconds,
                last_error=self.last_error or self.message,
                name=self.name,
                namespace=self.namespace,
            )
        if self.status is EventStatus.LOST:
            return GangJobLost(self.message, name=self.name, namespace=self.namespace)
        readmission = self.status is EventStatus.ADMISSION_TIMEOUT and self.reason == "readmission"
        if self.status is EventStatus.DISRUPTED or readmission:
            return give_up_error(
                where,
                "readmission_timeout" if readmission else "disrupted",
                self.message,
                self.disruptions,
                name=self.name,
                namespace=self.namespace,
                queue=self.queue,
                deleted=self.deleted,
                waited_seconds=waited_seconds,
            )
        if self.status is EventStatus.ADMISSION_TIMEOUT:
            by = (
                f"by queue {self.queue!r}"
                if self.queue
                else "(no gang scheduling: not every replica was bound)"
            )
            return GangAdmissionTimeout(
                f"{where} was not admitted in time {by} ({self.message}); {after_deletion(self.deleted)}",
                name=self.name,
                namespace=self.namespace,
                queue=self.queue,
                waited_seconds=waited_seconds,
                reason=self.message or None,
            )
        if self.status is EventStatus.QUEUE_MISMATCH:  # the message says whether it was deleted
            return GangQueueMismatch(
                self.message,
                name=self.name,
                namespace=self.namespace,
                asked_queue=self.asked_queue,
                queue=self.queue,
            )
        if self.status is EventStatus.ERROR:
            return GangApiError(
                f"waiting for {where} failed: {self.message}", name=self.name, namespace=self.namespace
            )
        return None


def _progress(payload: JsonDict) -> JsonDict:
    """The trigger's last look, else what the event says (a wait that ended without a look)."""
    progress = payload.get("progress")
    if isinstance(progress, dict):
        return progress
    return {
        "phase": payload.get("phase") or payload.get("status"),
        "podgroup_phase": payload.get("podgroup_phase"),
        "queue": payload.get("queue"),
        "replicas_bound": None,
        "replicas_running": None,
        "replicas": None,
        "message": payload.get("message") or "",
        "updated_at": utc_now().isoformat(),
    }


class WaitingFor(Protocol):
    """What the event says about the wait (`GangJobTrigger`'s attributes, read only)."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def wait_for(self) -> str: ...
    @property
    def gang_scheduling(self) -> str: ...
    @property
    def admission_deadline(self) -> str | None: ...
    @property
    def execution_deadline(self) -> str | None: ...
    @property
    def submitted_at(self) -> str | None: ...
    @property
    def admitted_at(self) -> str | None: ...
    @property
    def reattached(self) -> bool: ...
    @property
    def job_kind(self) -> str: ...


def gang_event(
    wait: WaitingFor, status: str, seen: GangSnapshot | None, message: str, *, reason: str | None = None
) -> JsonDict:
    """The event of a wait that ended with ``status`` after its last look ``seen`` (None: no look)."""
    gang = seen.status if seen else None
    finished = finished_at(seen.job) if seen is not None and seen.job is not None else None
    return {
        "status": status,
        # For "error": execution_timeout (the task gives up: the job is deleted), api_error
        # (the API refused a read: nothing is deleted).
        "reason": reason,
        "kind": wait.job_kind,
        "name": wait.name,
        "namespace": wait.namespace,
        "uid": wait.uid,
        "phase": gang.phase.value if gang else None,
        "podgroup_phase": gang.podgroup_phase if gang else None,
        "queue": gang.queue if gang else None,
        "message": message,
        # What the task needs to finish the wait, carried in the event itself: dag.test()
        # resumes a task with the event alone, without the defer kwargs.
        "wait": {
            "wait_for": wait.wait_for,
            "gang_scheduling": wait.gang_scheduling,
            "admission_deadline": wait.admission_deadline,
            "execution_deadline": wait.execution_deadline,
            "reattached": wait.reattached,
        },
        # The task state store's ``progress`` entry, written by the task when it resumes.
        "progress": gang.progress(utc_now().isoformat()) if gang else None,
        "timeline": {
            "submitted_at": wait.submitted_at,
            "admitted_at": wait.admitted_at,
            "finished_at": finished.isoformat() if finished and gang is not None and gang.finished else None,
        },
    }


def api_unavailable_event(wait: WaitingFor, unavailable: GangApiUnavailable) -> JsonDict:
    """The event of a wait past ``api_unavailable_timeout``: nothing deleted, the outage's length
    and last error for the task's `GangApiUnavailable`."""
    event = gang_event(wait, "api_unavailable", None, str(unavailable), reason="api_unavailable")
    event["unavailable_seconds"] = unavailable.unavailable_seconds
    event["last_error"] = unavailable.last_error
    return event


def execution_timeout_event(wait: WaitingFor, seen: GangSnapshot | None) -> JsonDict:
    """The event of a wait past the task's ``execution_timeout`` (the task then deletes the job)."""
    message = f"execution_timeout reached at {wait.execution_deadline}"
    return gang_event(wait, "error", seen, message, reason="execution_timeout")
