"""One job as its task instance recorded it (`HistoryRecord`): its outcome, row and timeline for
the page, and `merged`, which makes one row of the records two tasks kept of the same job. Pure:
`history` reads the records from the metadata DB.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from airflow_gang.jobs.disruption import Disruption
from airflow_gang.kinds import DEFAULT_JOB_KIND
from airflow_gang.plugins.identity import TaskIdentity
from airflow_gang.state.history import ENDED_STATES, GPU, SUBMITTED

JsonDict = dict[str, Any]
# A record whose job is gone and whose end no try wrote: killed, cleared, or its worker died.
GONE = "gone"
# A record whose job is gone while its try is still active: the try records how it ended as it
# resumes (the trigger deleted the job for its admission timeout, or saw it deleted), seconds
# later. Not "gone": that would blame a kill for what the task is about to report.
ENDING = "ending"
# Task instance states in which the try that wrote a record still runs or is about to.
ACTIVE_TASK_STATES = frozenset(
    {"deferred", "scheduled", "queued", "running", "restarting", "up_for_reschedule"}
)


@dataclass(frozen=True)
class HistoryRecord:
    """One job as its task instance recorded it, with the task instance it belongs to."""

    record: JsonDict
    identity: TaskIdentity
    task_state: str | None
    task_try: int | None = None  # the task instance's current try
    task_ended_at: str | None = None  # its end_date, when it has ended
    # Another task waiting for the same job (a sensor) whose try is still active: its state.
    active_waiter: str | None = None

    @property
    def uid(self) -> str:
        return str(self.record.get("uid") or "")

    @property
    def name(self) -> str:
        return str(self.record.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.record.get("namespace") or "")

    @property
    def kind(self) -> str:
        """``PyTorchJob`` or ``TrainJob`` (records written before kinds existed: PyTorchJob)."""
        return str(self.record.get("kind") or DEFAULT_JOB_KIND.kind)

    def outcome(self) -> tuple[str, str | None]:
        """The row's state and reason: as recorded, or ``gone`` for a job whose end nobody wrote."""
        record = self.record
        state = str(record.get("state") or SUBMITTED)
        if state in ENDED_STATES:
            return state, record.get("reason")
        if self.still_active():
            return ENDING, (
                f"the job is deleted; its task ({self.task_state}, try {self.task_try}) is still active "
                "and records how it ended as it resumes"
            )
        if self.active_waiter:
            return ENDING, (
                f"the job is deleted; the task waiting for it ({self.active_waiter}) is still active "
                "and records how it ended as it resumes"
            )
        waits_for = record.get("waits_for") or "completion"
        if waits_for != "completion":
            return GONE, (
                f"its task stopped waiting at {waits_for} (wait_for_completion=False), so no end "
                "was recorded; the job has been deleted since"
            )
        return GONE, (
            "the job was deleted before its task recorded how it ended (the task was killed or "
            f"cleared, or its worker died); task instance state: {self.task_state or 'unknown'}"
        )

    def still_active(self) -> bool:
        """Whether the try that wrote this record runs still (or is about to resume)."""
        if self.task_state not in ACTIVE_TASK_STATES:
            return False
        written_by = self.identity.try_number
        return written_by is None or self.task_try is None or written_by == self.task_try

    def last_seen_at(self) -> str | None:
        """For a job with no recorded end, the last moment it is known to have existed: its task
        instance's end (a kill or clear deletes the job then), else its record's last write.
        The chart ends the job's bar there instead of drawing it to "now" for ever."""
        if self.record.get("finished_at"):
            return None
        if self.task_ended_at and not self.still_active() and not self.active_waiter:
            return self.task_ended_at
        return self.record.get("recorded_at")

    @cached_property
    def facts(self) -> JsonDict:
        """What the table's filters and order read (`service.Row`), without building the row
        (computed once: a record is kept across reads while its entry does not change)."""
        state, reason = self.outcome()
        return {
            "kind": self.kind,
            "uid": self.uid,
            "name": self.name,
            "state": state,
            "reason": reason,
            "queue": self.record.get("queue"),
            "created_at": self.record.get("submitted_at"),
            "live": False,
            "airflow": {"dag_id": self.identity.dag_id},
        }

    def summary(self) -> JsonDict:
        """A row of the jobs table, in the shape of a live job's (`summaries.job_summary`)."""
        record = self.record
        state, reason = self.outcome()
        replicas = {str(k): int(v) for k, v in (record.get("replicas") or {}).items()}
        resources = record.get("resources") or {}
        return {
            "kind": self.kind,
            "name": record.get("name"),
            "namespace": record.get("namespace"),
            "uid": record.get("uid"),
            "created_at": record.get("submitted_at"),
            "deleting": False,
            "queue": record.get("queue"),
            "state": state,
            "job_condition": None,
            "gang_scheduling": record.get("gang_scheduling"),
            "podgroup": None,
            "podgroup_phase": None,
            "min_member": None,
            "replicas": replicas,
            "replicas_total": sum(replicas.values()),
            "replicas_bound": 0,
            "replicas_running": 0,
            "reason": reason,
            "warning": None,
            "queued_at": record.get("submitted_at"),
            "admitted_at": record.get("admitted_at"),
            "finished_at": record.get("finished_at"),
            "queued_seconds": record.get("queued_seconds"),
            "run_seconds": record.get("run_seconds"),
            "gpus": float(resources.get(GPU) or 0),
            "gpu_seconds": record.get("gpu_seconds"),
            "failed_replica": record.get("failed_replica"),
            "exit_code": record.get("exit_code"),
            "recorded_at": record.get("recorded_at"),
            "last_seen_at": self.last_seen_at(),
            # Read back through the episode's own type: a record kept by another release of
            # the provider must not break the page's typed answer with a key of its own.
            "disruptions": [
                Disruption.from_json(episode).to_json()
                for episode in record.get("disruptions") or []
                if isinstance(episode, dict)
            ],
            "live": False,
        }

    def timeline(self) -> JsonDict | None:
        """The job's moments for the charts (`timeline.JobTimeline.to_json`'s shape)."""
        row = self.summary()
        if not row["queued_at"]:
            return None
        return {
            "name": row["name"],
            "namespace": row["namespace"],
            "queue": row["queue"],
            "state": row["state"],
            "queued_at": row["queued_at"],
            "admitted_at": row["admitted_at"],
            "running_at": None,
            "finished_at": row["finished_at"],
            "queue_wait_seconds": row["queued_seconds"],
            "run_seconds": row["run_seconds"],
            "live": False,
            "last_seen_at": row["last_seen_at"],
        }


def merged(records: Iterable[HistoryRecord]) -> list[HistoryRecord]:
    """One record per job: a job submitted by one task and waited for by a sensor is recorded by
    both. The row belongs to the task that recorded it first (the submitter); its outcome is
    the newest ended record's, whoever saw the end."""
    by_uid: dict[str, list[HistoryRecord]] = {}
    for record in records:
        by_uid.setdefault(record.uid, []).append(record)
    rows = []
    for group in by_uid.values():
        owner = min(group, key=lambda r: str(r.record.get("recorded_at") or ""))
        ends = [r for r in group if r.record.get("state") in ENDED_STATES]
        if not ends or len(group) == 1:
            waiter = next((r for r in group if r is not owner and r.still_active()), None)
            if waiter is not None:  # a sensor's try about to record the end
                owner = replace(owner, active_waiter=f"{waiter.identity.task_id}: {waiter.task_state}")
            rows.append(owner)
            continue
        end = max(ends, key=lambda r: str(r.record.get("recorded_at") or ""))
        outcome = {k: v for k, v in end.record.items() if k not in ("try_number", "waits_for")}
        rows.append(replace(owner, record={**owner.record, **outcome}))
    return rows


def to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
