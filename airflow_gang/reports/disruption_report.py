"""Telling one look's disruption step: the task log's lines and the ``gang.disruptions`` metrics.

The worker's wait and the trigger both call `report`, so a disruption reads the same in a task
log whichever of them waited; each passes its own way of writing a line (the trigger queues its
lines for its writer thread, `airflow_gang.triggers.status_lines`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow_gang.exceptions import GangAdmissionTimeout, GangError, GangJobDisrupted
from airflow_gang.jobs.deletion import after_deletion
from airflow_gang.jobs.disruption import DisruptionStep, GiveUp
from airflow_gang.model.gang_state import GangStatus
from airflow_gang.reports import telemetry
from airflow_gang.reports.timeline import parse_time

WriteLine = Callable[[str, str], None]
"""``(level, text)``: ``info`` or ``warning``."""


def report(
    step: DisruptionStep,
    status: GangStatus,
    where: str,
    write: WriteLine,
    *,
    dag_id: str | None = None,
    task_id: str | None = None,
) -> bool:
    """Write ``step``'s lines and metrics; whether it had anything to tell."""
    for level, text in step_lines(step, where, status.replicas, status.min_member):
        write(level, text)
    tags = {"dag_id": dag_id, "task_id": task_id}
    if step.started is not None:
        telemetry.disruption_started(step.started.reason.value, step.started.queue, **tags)
    ended = step.ended
    if ended is not None and ended.readmitted_at is not None:
        start, back = parse_time(ended.started_at), parse_time(ended.readmitted_at)
        if start is not None and back is not None:
            seconds = (back - start).total_seconds()
            telemetry.disruption_readmitted(seconds, ended.reason.value, ended.queue, **tags)
    return any((step.started, step.requeued, step.ended, step.give_up))


def give_up_error(
    where: str,
    give_up_kind: str,
    message: str,
    episodes: Sequence[dict[str, Any]],
    *,
    name: str,
    namespace: str,
    queue: str | None,
    deleted: bool | None,
    waited_seconds: float | None = None,
) -> GangError:
    """The failure of a try whose policy gave its disrupted job up (``where``: ``Kind ns/name``):
    `GangAdmissionTimeout` when a requeued gang was not re-admitted in time, else `GangJobDisrupted`."""
    if give_up_kind == "readmission_timeout":
        return GangAdmissionTimeout(
            f"{where} was {message} by queue {queue!r}; {after_deletion(deleted)}",
            name=name,
            namespace=namespace,
            queue=queue,
            waited_seconds=waited_seconds,
            reason=message,
        )
    last = episodes[-1] if episodes else {}
    return GangJobDisrupted(
        f"{where} {message}; {after_deletion(deleted)}",
        name=name,
        namespace=namespace,
        reason=last.get("reason"),
        disruptions=len(episodes),
        deleted=bool(deleted),
    )


def job_given_up(
    job: dict[str, Any],
    kind: str,
    give_up: GiveUp,
    episodes: Sequence[dict[str, Any]],
    *,
    deleted: bool | None,
    waited_seconds: float | None,
) -> GangError:
    """`give_up_error` for ``job`` (a manifest or its ``metadata`` alone)."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    queue = (episodes[-1] if episodes else {}).get("queue")
    return give_up_error(
        f"{kind} {namespace}/{name}",
        give_up.kind,
        give_up.message,
        episodes,
        name=name,
        namespace=namespace,
        queue=queue,
        deleted=deleted,
        waited_seconds=waited_seconds,
    )


def step_lines(step: DisruptionStep, where: str, replicas: int, min_member: int) -> list[tuple[str, str]]:
    """The task log's lines for one look's `DisruptionStep`: (level, text), once per episode each."""
    lines: list[tuple[str, str]] = []
    if step.started is not None:
        episode = step.started
        lines.append(
            ("warning", f"gang disrupted job={where} (#{episode.number}): {episode.describe(replicas)}")
        )
    if step.requeued is not None:
        until = f", re-admission by {step.deadline.isoformat()}" if step.deadline else ""
        lines.append(
            (
                "warning",
                f"gang job {where} is below its minMember ({min_member}) and back in queue "
                f"{step.requeued.queue}: waiting for re-admission{until}",
            )
        )
    if step.ended is not None and step.ended.ended_at is not None:
        episode = step.ended
        if episode.readmitted_at is not None:
            when = episode.readmitted_at
            told = f"gang re-admitted job={where} at {when} after disruption #{episode.number}"
        else:
            told = f"gang job {where}: disruption #{episode.number} over, the gang holds its pods again"
        lines.append(("info", told))
    if step.give_up is not None:
        lines.append(("warning", f"giving up gang job {where}: {step.give_up.message}; deleting it"))
    return lines
