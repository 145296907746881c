"""When each gang job was queued, admitted and finished: read off the cluster's own objects.

A `JobTimeline` comes from a PyTorchJob and its pods alone (no Airflow state), so it describes
any job, whoever submitted it, also after the task that waited for it is gone:

- queued: the job's ``creationTimestamp``;
- admitted: when the last replica pod was bound to a node (its ``PodScheduled=True``
  transition), which is the moment Volcano placed the whole gang;
- running: the job's ``Running`` condition;
- finished: ``completionTime``, else the ``Succeeded``/``Failed`` condition.

`format_table` renders timelines as a text table for task logs and terminals, `render_svg` as a
self-contained SVG chart (one bar per job: grey while queued, then green/red while running).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind

JsonDict = dict[str, Any]

QUEUED, RUNNING, SUCCEEDED, FAILED, TIMED_OUT = "queued", "running", "succeeded", "failed", "timed out"


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 time as Kubernetes writes it (``...Z``), or None when unset."""
    if not value:
        return None
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _condition_time(job: JsonDict, condition_type: str) -> dt.datetime | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == condition_type and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


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
    return _condition_time(job, "Running")


def finished_at(job: JsonDict) -> dt.datetime | None:
    """``completionTime``, else the ``Succeeded``/``Failed`` condition's time (a TrainJob's
    ``Complete``/``Failed``: it has no ``completionTime``)."""
    status = job.get("status") or {}
    return (
        parse_time(status.get("completionTime"))
        or _condition_time(job, "Succeeded")
        or _condition_time(job, "Complete")
        or _condition_time(job, "Failed")
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
    running = _condition_time(job, "Running") or (None if job_kind.running_condition else bound)
    succeeded = _condition_time(job, "Succeeded") or _condition_time(job, "Complete")
    failed = _condition_time(job, "Failed")
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


# --- chart --------------------------------------------------------------------------------------

_COLOURS = {
    "queued": "#c8ccd4",
    SUCCEEDED: "#3fa46a",
    RUNNING: "#4a90d9",
    FAILED: "#d64545",
    TIMED_OUT: "#e8a33d",
}
_ROW, _LABEL, _WIDTH, _TOP = 26, 220, 900, 48


def render_svg(
    timelines: Sequence[JobTimeline],
    *,
    title: str = "Gang jobs: time in queue and running",
    now: dt.datetime | None = None,
    gave_up_after: float | None = None,
) -> str:
    """A Gantt-style SVG: per job a grey bar while queued, then a bar coloured by outcome.

    :param now: where open bars end (default: the latest moment any job reached).
    :param gave_up_after: for timed-out jobs, how long they queued (their admission timeout).
    """
    ordered = sorted(timelines, key=lambda t: (t.queued_at, t.name))
    if not ordered:
        return _svg(_WIDTH, _TOP + 40, [_text(16, 28, title, 15, "bold"), _text(16, _TOP + 20, "no jobs")])
    origin = ordered[0].queued_at
    moments = [m for t in ordered for m in (t.queued_at, t.admitted_at, t.finished_at) if m]
    end = now or max(moments)
    if gave_up_after is not None:
        gave_up = [t.queued_at + dt.timedelta(seconds=gave_up_after) for t in ordered if t.state == TIMED_OUT]
        end = max([end, *gave_up])
    span = max((end - origin).total_seconds(), 1.0)
    plot = _WIDTH - _LABEL - 30

    def x(moment: dt.datetime) -> float:
        return _LABEL + plot * max(0.0, (moment - origin).total_seconds()) / span

    parts = [_text(16, 28, title, 15, "bold")]
    height = _TOP + _ROW * len(ordered) + 60
    for tick in _ticks(span):
        tx = _LABEL + plot * tick / span
        parts.append(
            f'<line x1="{tx:.1f}" y1="{_TOP - 6}" x2="{tx:.1f}" y2="{height - 44}" stroke="#eceef2"/>'
        )
        parts.append(_text(tx, height - 28, f"{tick:g}s", 11, anchor="middle", fill="#666"))
    for row, t in enumerate(ordered):
        y = _TOP + row * _ROW
        parts.append(_text(_LABEL - 8, y + 16, t.name, 12, anchor="end"))
        queued_end = t.admitted_at
        if queued_end is None:
            if t.state == TIMED_OUT and gave_up_after is not None:
                queued_end = t.queued_at + dt.timedelta(seconds=gave_up_after)
            else:
                queued_end = end
        queued_colour = _COLOURS[TIMED_OUT] if t.state == TIMED_OUT else _COLOURS["queued"]
        parts.append(
            _bar(
                x(t.queued_at), x(queued_end), y, queued_colour, f"{t.name}: queued {_seconds(t.queue_wait)}"
            )
        )
        if t.admitted_at is not None:
            run_end = t.finished_at or end
            colour = _COLOURS.get(t.state, _COLOURS[RUNNING])
            parts.append(
                _bar(
                    x(t.admitted_at), x(run_end), y, colour, f"{t.name}: {t.state} {_seconds(t.run_seconds)}"
                )
            )
    legend_y = height - 10
    for index, (label, colour) in enumerate(
        (
            ("queued", _COLOURS["queued"]),
            ("running", _COLOURS[RUNNING]),
            ("succeeded", _COLOURS[SUCCEEDED]),
            ("failed", _COLOURS[FAILED]),
            ("timed out in queue", _COLOURS[TIMED_OUT]),
        )
    ):
        lx = _LABEL + index * 130
        parts.append(f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(_text(lx + 17, legend_y, label, 11))
    return _svg(_WIDTH, height, parts)


def _ticks(span: float) -> list[float]:
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200) if span / s <= 10)
    return [i * step for i in range(int(span // step) + 1)]


def _bar(x1: float, x2: float, y: float, colour: str, tip: str) -> str:
    width = max(x2 - x1, 2.0)
    return (
        f'<rect x="{x1:.1f}" y="{y + 4}" width="{width:.1f}" height="{_ROW - 8}" rx="3" fill="{colour}">'
        f"<title>{html.escape(tip)}</title></rect>"
    )


def _text(
    x: float,
    y: float,
    text: str,
    size: int = 12,
    weight: str = "normal",
    *,
    anchor: str = "start",
    fill: str = "#222",
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" text-anchor="{anchor}" '
        f'fill="{fill}">{html.escape(text)}</text>'
    )


def _svg(width: int, height: int, parts: list[str]) -> str:
    body = "\n  ".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">\n'
        f'  <rect width="100%" height="100%" fill="white"/>\n  {body}\n</svg>\n'
    )
