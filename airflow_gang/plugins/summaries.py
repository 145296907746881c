"""What the page shows about jobs, PodGroups, pods, events and queues, as plain JSON (pure).

Every function takes wire-form objects (as `GangJobHook` returns them) and returns small,
JSON-serialisable dicts with snake_case keys. Where a job stands is `gang_state.gang_status`,
the same decision the operator, the trigger and the sensors make, so the page can never
disagree with the task log; when it happened is `timeline.job_timeline`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_gang.jobs.pod_losses import WORDS, DisruptionReason, live_disruption
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import GangSnapshot, GangStatus, gang_status
from airflow_gang.model.k8s_objects import pod_requests
from airflow_gang.model.quantity import parse_quantity
from airflow_gang.plugins.history_record import ENDING, GONE
from airflow_gang.plugins.object_rows import condition_rows, event_row
from airflow_gang.reports.timeline import JobTimeline, job_timeline
from airflow_gang.state.history import ENDED_STATES, GPU, gang_resources

JsonDict = dict[str, Any]
# Live states (`gang_state.GangPhase`, plus "stuck": a job without gang scheduling holding part
# of what it needs, and "disrupted": a running gang losing pods, `jobs.pod_losses`), then how
# recorded jobs ended (`jobs.history`; "disrupted" there: given up after a disruption), then
# "ending" (deleted, its task about to record the end) and "gone" (deleted, nobody will record
# it): `plugins.history_record`.
STUCK = "stuck"
DISRUPTED = "disrupted"
_ENDINGS = tuple(state for state in ENDED_STATES[2:] if state != DISRUPTED)
STATES = ("queued", STUCK, "admitted", "running", DISRUPTED, "succeeded", "failed", *_ENDINGS, ENDING, GONE)
PODGROUP_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_COUNTS = ("pending", "inqueue", "running", "unknown", "completed")
RECENT_EVENTS = dt.timedelta(seconds=10)
_ALLOCATION_MESSAGE = re.compile(r"^\d+/\d+ tasks in gang unschedulable")


def _metadata(obj: Mapping[str, Any] | None) -> JsonDict:
    return dict((obj or {}).get("metadata") or {})


def _time(value: Any) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 1)


def podgroup_for(job: JsonDict, podgroups: Sequence[JsonDict]) -> JsonDict | None:
    """The job's PodGroup: the one it owns, else the one named after it (both modes name it so)."""
    metadata = _metadata(job)
    uid, name = metadata.get("uid"), metadata.get("name")
    for group in podgroups:
        owners = _metadata(group).get("ownerReferences") or []
        if uid and any(owner.get("uid") == uid for owner in owners):
            return group
    for group in podgroups:
        if _metadata(group).get("name") == name:
            return group
    return None


def replica_rows(
    job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND, pods: Sequence[JsonDict] = (), replicas: int = 0
) -> list[JsonDict]:
    """Per replica type: desired, and how many are active, succeeded and failed
    (`JobKind.replica_rows`; ``replicas``: the gang's size, for a kind whose job may not say it)."""
    return job_kind.replica_rows(job, pods, replicas)


def timeline_of(
    job: JsonDict, pods: Sequence[JsonDict], job_kind: JobKind = DEFAULT_JOB_KIND
) -> JobTimeline | None:
    """The job's timeline, or None for an object too incomplete to have one."""
    try:
        return job_timeline(job, pods, job_kind)
    except (ValueError, TypeError):
        return None


def enqueue_failure(events: Iterable[JsonDict], podgroup: str | None) -> str | None:
    """Why Volcano's enqueue gate keeps the PodGroup Pending, from its recent events saying so.

    Volcano reports a failed enqueue (queue quota, cluster overused, queue closed) only as
    ``Unschedulable`` events on the PodGroup, one per reason, repeated every session. Its
    allocation attempts use the same event reason with a message of their own (``4/4 tasks in
    gang unschedulable: ...``, also in the PodGroup's condition), which are left out here.
    Every reason seen within `RECENT_EVENTS` of the newest one is given, ``; ``-separated.
    """
    if not podgroup:
        return None
    seen: dict[str, dt.datetime] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        message = str(event.get("message") or "")
        moment = _time(event_row(event)["last_seen"])
        if (
            event.get("reason") != "Unschedulable"
            or involved.get("kind") != "PodGroup"
            or involved.get("name") != podgroup
            or not message
            or _ALLOCATION_MESSAGE.match(message)
            or moment is None
        ):
            continue
        seen[message] = max(moment, seen.get(message, moment))
    if not seen:
        return None
    newest = max(seen.values())
    return "; ".join(sorted(m for m, moment in seen.items() if newest - moment <= RECENT_EVENTS))


def _held(pods: Sequence[JsonDict], resource: str) -> float:
    """How much of ``resource`` the job's bound, unfinished pods hold."""
    held = 0.0
    for pod in pods:
        placed = (pod.get("spec") or {}).get("nodeName") and not _metadata(pod).get("deletionTimestamp")
        if placed and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            held += float(parse_quantity(pod_requests(pod).get(resource, 0)))
    return held


def stuck_reason(status: GangStatus, mode: str, job: JsonDict, pods: Sequence[JsonDict]) -> str | None:
    """Why a job placed pod by pod (no gang) is stuck, or None if it is not.

    Without a PodGroup the default scheduler places replicas one at a time; a job with some of
    them bound holds their GPUs while waiting for the rest: the deadlock gang scheduling
    prevents. It is neither queued (it holds resources) nor running (it cannot make progress).
    """
    no_gang = mode == "disabled" or bool(status.warning)
    if status.phase.value != "queued" or not no_gang or status.bound == 0:
        return None
    gpus = gang_resources(job).get(GPU, 0.0)
    if gpus:
        held = f"{_number(_held(pods, GPU))}/{_number(gpus)} GPUs"
    else:
        held = f"{status.bound}/{status.replicas} replicas' resources"
    waiting = f"; {status.message}" if status.message else ""
    return f"stuck: holding {held} (no gang), waiting for the other replicas to be placed{waiting}"


def disruption_reason(disruption: JsonDict | None) -> str | None:
    """``reclaimed: 2 pods lost since 06:00:05Z, back in the queue: Pod is evicted, ...``."""
    if disruption is None:
        return None
    reason = disruption.get("reason")
    words = WORDS[DisruptionReason(reason)] if reason else "disrupted"
    since = f" since {disruption['since']}" if disruption.get("since") else ""
    queued = ", back in the queue" if disruption.get("requeued") else ""
    lost = f"{disruption['pods_lost']} pods lost{since}{queued}"
    return f"{words}: {lost}: {disruption['detail']}" if disruption.get("detail") else f"{words}: {lost}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _reason(status: GangStatus, job: JsonDict, gate: str | None, job_kind: JobKind) -> str | None:
    if status.phase.value == "queued" and job_kind.suspended(job):
        # Not a gang waiting for GPUs: nothing of it is in a queue until someone resumes it.
        field = job_kind.suspend_field
        return f"suspended ({field}): it has no pods and waits for no GPUs until it is resumed"
    if status.phase.value == "queued":
        # A Pending gang has not passed Volcano's enqueue gate: the gate's own reason (queue
        # quota, cluster overused) says more than the allocation message of a condition.
        if status.podgroup_phase == "Pending" and gate:
            return gate
        return status.message or gate
    if status.phase.value == "failed":
        return job_kind.state(job)[1] or None
    return None


def job_summary(
    job: JsonDict,
    podgroup: JsonDict | None,
    pods: Sequence[JsonDict],
    now: dt.datetime,
    events: Iterable[JsonDict] = (),
    *,
    job_kind: JobKind = DEFAULT_JOB_KIND,
    gang_scheduling: str | None = None,
) -> JsonDict:
    """One row of the jobs table (``kind`` says which kind of job it is).

    ``queued_seconds`` is the admission wait (still counting while queued); ``run_seconds``
    the time since admission (still counting while running). ``reason`` says why a queued
    gang waits (while its PodGroup is Pending, the newest Unschedulable event among
    ``events``: why Volcano does not enqueue it; else the PodGroup's Unschedulable
    condition) or why a failed job failed. ``warning`` says a job meant to be a gang is not one.

    :param job_kind: the job's kind.
    :param gang_scheduling: the job's gang mode when known otherwise (a TrainJob's runtime's);
        None: as its objects show it.
    """
    metadata = _metadata(job)
    if gang_scheduling is not None:
        mode = gang_scheduling
    else:
        mode = job_kind.observed_gang_mode(job, podgroup, pods)
    status = gang_status(job, podgroup, list(pods), mode, job_kind)
    timeline = timeline_of(job, pods, job_kind)
    queued_at = timeline.queued_at if timeline else _time(metadata.get("creationTimestamp"))
    admitted_at = timeline.admitted_at if timeline else None
    finished_at = timeline.finished_at if timeline else None
    still_queued = status.phase.value == "queued"
    stuck = stuck_reason(status, mode, job, pods)
    disruption = None if stuck else live_disruption(GangSnapshot(status, job, podgroup, list(pods)))
    gpus = gang_resources(job).get(GPU, 0.0)
    run_seconds = _seconds(admitted_at, finished_at or (None if still_queued else now))
    return {
        "kind": job_kind.kind,
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "created_at": metadata.get("creationTimestamp"),
        "deleting": bool(metadata.get("deletionTimestamp")),
        "suspended": job_kind.suspended(job),
        "suspendable": bool(job_kind.suspend_field),
        "queue": status.queue,
        "state": STUCK if stuck else DISRUPTED if disruption else status.phase.value,
        "disruption": disruption,
        "job_condition": status.job_condition,
        "gang_scheduling": mode,
        "podgroup": _metadata(podgroup).get("name") if podgroup is not None else None,
        "podgroup_phase": status.podgroup_phase,
        "min_member": status.min_member,
        "replicas": job_kind.replica_counts(job, status.replicas),
        "replicas_total": status.replicas,
        "replicas_bound": status.bound,
        "replicas_running": status.running,
        "reason": stuck
        or disruption_reason(disruption)
        or _reason(status, job, enqueue_failure(events, _metadata(podgroup).get("name")), job_kind),
        "warning": status.warning or None,
        "queued_at": queued_at.isoformat() if queued_at else None,
        "admitted_at": admitted_at.isoformat() if admitted_at else None,
        "finished_at": finished_at.isoformat() if finished_at else None,
        "queued_seconds": _seconds(queued_at, now if still_queued else admitted_at),
        "run_seconds": run_seconds,
        "gpus": gpus,
        "gpu_seconds": round(gpus * run_seconds, 1) if gpus and run_seconds is not None else None,
        "live": True,
    }


def podgroup_view(podgroup: JsonDict | None) -> JsonDict | None:
    """A PodGroup's phase, gang size, queue, counts and conditions (Unschedulable first-class)."""
    if podgroup is None:
        return None
    spec, status = podgroup.get("spec") or {}, podgroup.get("status") or {}
    conditions = condition_rows(podgroup)
    unschedulable = next(
        (
            c["message"]
            for c in reversed(conditions)
            if c["type"] == "Unschedulable" and c["status"] == "True" and c["message"]
        ),
        None,
    )
    return {
        "name": _metadata(podgroup).get("name"),
        "phase": status.get("phase"),
        "queue": spec.get("queue"),
        "min_member": spec.get("minMember"),
        "min_resources": spec.get("minResources"),
        "running": status.get("running"),
        "succeeded": status.get("succeeded"),
        "failed": status.get("failed"),
        "unschedulable": unschedulable,
        "conditions": conditions,
    }


def queue_row(queue: JsonDict, podgroups: Sequence[JsonDict]) -> JsonDict:
    """A Volcano queue: state, capability, what it holds, and its PodGroups by phase.

    ``status_counts`` are Volcano's own (cluster-wide); ``podgroups`` counts the PodGroups the
    page can see (its namespaces) by phase.
    """
    name = _metadata(queue).get("name")
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    phases = Counter(
        str((group.get("status") or {}).get("phase") or "Pending")
        for group in podgroups
        if (group.get("spec") or {}).get("queue", "default") == name
    )
    return {
        "name": name,
        "state": status.get("state") or "Open",
        "weight": spec.get("weight"),
        "reclaimable": spec.get("reclaimable"),
        "capability": spec.get("capability") or {},
        "allocated": status.get("allocated") or {},
        "status_counts": {key: int(status.get(key) or 0) for key in QUEUE_COUNTS},
        "podgroups": {phase: phases.get(phase, 0) for phase in PODGROUP_PHASES},
    }
