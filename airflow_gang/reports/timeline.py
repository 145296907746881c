"""When each gang job was queued, admitted and finished: read off the cluster's own objects.

A `JobTimeline` comes from a PyTorchJob and its pods alone (no Airflow state), so it describes
any job, whoever submitted it, also after the task that waited for it is gone:

- queued: the job's ``creationTimestamp``;
- admitted: when the last replica pod was bound to a node (its ``PodScheduled=True``
  transition), which is the moment Volcano placed the whole gang;
- running: the job's ``Running`` condition;
- finished: ``completionTime``, else the ``Succeeded``/``Failed`` condition.

`format_table` renders timelines as a text table for task logs and terminals. The chart is the
Gang jobs page's (``plugins/static/gang.js``); `airflow_gang.plugins.offline_chart` writes it, with
these timelines, into a self-contained HTML file for a report.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind, job_kind_of_object

JsonDict = dict[str, Any]

QUEUED, RUNNING, SUCCEEDED, FAILED, TIMED_OUT = "queued", "running", "succeeded", "failed", "timed out"


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 time as Kubernetes writes it (``...Z``), or None when unset."""
    if not value:
        return None
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@dataclass(frozen=True)
class JobTimeline:
    """One job's moments; None where it has not happened (or cannot be known any more)."""

    name: str
    namespace: str
    queue: str | None
    state: str
    queued_at: dt.datetime
    admitted_at: dt.datetime | None = None
    running_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @property
    def queue_wait(self) -> float | None:
        """Seconds from submission to admission."""
        if self.admitted_at is None:
            return None
        return max(0.0, (self.admitted_at - self.queued_at).total_seconds())

    @property
    def run_seconds(self) -> float | None:
        """Seconds from admission to the end."""
        if self.admitted_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.admitted_at).total_seconds())

    def to_json(self) -> JsonDict:
        def iso(moment: dt.datetime | None) -> str | None:
            return moment.isoformat() if moment else None

        return {
            "name": self.name,
            "namespace": self.namespace,
            "queue": self.queue,
            "state": self.state,
            "queued_at": iso(self.queued_at),
            "admitted_at": iso(self.admitted_at),
            "running_at": iso(self.running_at),
            "finished_at": iso(self.finished_at),
            "queue_wait_seconds": self.queue_wait,
            "run_seconds": self.run_seconds,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> JobTimeline:
        queued = parse_time(data.get("queued_at"))
        if queued is None:
            raise ValueError(f"timeline of {data.get('name')!r} has no queued_at")
        return cls(
            name=str(data["name"]),
            namespace=str(data.get("namespace") or "default"),
            queue=data.get("queue"),
            state=str(data.get("state") or QUEUED),
            queued_at=queued,
            admitted_at=parse_time(data.get("admitted_at")),
            running_at=parse_time(data.get("running_at")),
            finished_at=parse_time(data.get("finished_at")),
        )


def _replica_count(job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> int:
    return job_kind.total_replicas(job)


def _bound_times(pods: Sequence[JsonDict]) -> list[dt.datetime]:
    """When each pod was bound (its ``PodScheduled=True`` transition), earliest first."""
    bound = []
    for pod in pods:
        moment = next(
            (
                parse_time(c.get("lastTransitionTime"))
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled" and c.get("status") == "True"
            ),
            None,
        )
        if moment is not None:
            bound.append(moment)
    return sorted(bound)


def _gang_bound_at(
    job: JsonDict, pods: Sequence[JsonDict], needed: int | None = None, job_kind: JobKind = DEFAULT_JOB_KIND
) -> dt.datetime | None:
    """When the ``needed``-th replica pod (default: every replica) was bound, once that many were."""
    bound = _bound_times(pods)
    needed = needed if needed and needed > 0 else _replica_count(job, job_kind)
    if not bound or len(bound) < needed:
        return None
    return bound[needed - 1]


def gang_admitted_at(
    job: JsonDict, podgroup: JsonDict | None, pods: Sequence[JsonDict], min_member: int | None = None
) -> dt.datetime | None:
    """When the cluster admitted the gang, read off its objects (not when someone looked).

    In order: the bind time of the ``min_member``-th pod (Volcano binds the whole gang in one
    session); the PodGroup's ``Scheduled`` condition; the job's ``Running`` condition. None when
    none of them shows it yet.
    """
    bound = _gang_bound_at(job, pods, min_member)
    if bound is not None:
        return bound
    for condition in ((podgroup or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled" and condition.get("status") == "True":
            moment = parse_time(condition.get("lastTransitionTime"))
            if moment is not None:
                return moment
    return parse_time(job_kind_of_object(job).state_time(job, "Running"))


def finished_at(job: JsonDict) -> dt.datetime | None:
    """``completionTime``, else when the job's status says it succeeded or failed (a TrainJob's
    ``Complete``/``Failed`` condition, a Volcano Job's phase: neither has a ``completionTime``)."""
    job_kind = job_kind_of_object(job)
    status = job.get("status") or {}
    return (
        parse_time(status.get("completionTime"))
        or parse_time(job_kind.state_time(job, "Succeeded"))
        or parse_time(job_kind.state_time(job, "Failed"))
    )


def job_timeline(
    job: JsonDict, pods: Sequence[JsonDict] = (), job_kind: JobKind = DEFAULT_JOB_KIND
) -> JobTimeline:
    """The timeline of a PyTorchJob (or TrainJob), from the job and the pods it owns.

    A TrainJob has no ``Running`` condition: it counts as running from its gang's binding.
    """
    metadata = job.get("metadata") or {}
    queued = parse_time(metadata.get("creationTimestamp"))
    if queued is None:
        raise ValueError(f"{job_kind.kind} {metadata.get('name')!r} has no creationTimestamp")
    status = job.get("status") or {}
    bound = _gang_bound_at(job, pods, job_kind=job_kind)
    running = parse_time(job_kind.state_time(job, "Running")) or (
        None if job_kind.running_condition else bound
    )
    succeeded = parse_time(job_kind.state_time(job, "Succeeded"))
    failed = parse_time(job_kind.state_time(job, "Failed"))
    finished = parse_time(status.get("completionTime")) or succeeded or failed
    admitted = bound or running
    if failed is not None:
        state = FAILED
    elif succeeded is not None:
        state = SUCCEEDED
    elif running is not None:
        state = RUNNING
    else:
        state = QUEUED
    if finished is not None and admitted is not None and finished < admitted:
        finished = admitted  # completionTime has one-second resolution
    return JobTimeline(
        name=str(metadata.get("name")),
        namespace=str(metadata.get("namespace") or "default"),
        queue=job_kind.queue(job),
        state=state,
        queued_at=queued,
        admitted_at=admitted,
        running_at=running,
        finished_at=finished,
    )


def timed_out(name: str, namespace: str, queue: str | None, queued_at: dt.datetime) -> JobTimeline:
    """A job deleted by its admission timeout: it never left the queue."""
    return JobTimeline(name=name, namespace=namespace, queue=queue, state=TIMED_OUT, queued_at=queued_at)


# --- text ---------------------------------------------------------------------------------------


def _clock(moment: dt.datetime | None) -> str:
    return moment.astimezone(dt.UTC).strftime("%H:%M:%S.%f")[:-5] if moment else "-"


def _seconds(value: float | None) -> str:
    return f"{value:.1f}s" if value is not None else "-"


def format_table(timelines: Sequence[JobTimeline]) -> str:
    """A fixed-width table, earliest submission first (times in UTC)."""
    headers = ("job", "queue", "queued at", "admitted at", "finished at", "queue wait", "run", "outcome")
    rows = [
        (
            t.name,
            t.queue or "-",
            _clock(t.queued_at),
            _clock(t.admitted_at),
            _clock(t.finished_at),
            _seconds(t.queue_wait),
            _seconds(t.run_seconds),
            t.state,
        )
        for t in sorted(timelines, key=lambda t: (t.queued_at, t.name))
    ]
    widths = [max(len(str(row[i])) for row in (headers, *rows)) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (headers, *rows)
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)
