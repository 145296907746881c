"""What a task instance keeps of its gang jobs once cleanup deleted them: one record per job.

The operator writes the records to Airflow 3.3's task state store (key ``gang_history``, a
list, newest last) when it submits or takes over a job and again when the job ends, so the
Gang jobs page and the "Gang job" link still show a job, its outcome, times and GPU-seconds
after its objects are gone. Retries of a task instance share its state store entries, so an
admission timeout followed by a retry leaves two records: one per try's job.

Records are small (no log): the master's tail of each job is kept under ``gang_log_tail``
(by job uid) for the job page only. A sensor waiting for a job another task submitted writes
``gang_waits_for`` (`waits_for`), so the page can link the task that waits. Everything here is
pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from airflow_gang.kinds import JobKind, job_kind_of_object
from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]
HISTORY_KEY = "gang_history"
LOG_TAIL_KEY = "gang_log_tail"
# A sensor's entry naming the job it waits for, so the job's page can link the task that waits.
WAITS_FOR_KEY = "gang_waits_for"
GPU = "nvidia.com/gpu"
# A task instance with more jobs than this (a long retry storm) keeps its newest ones. The
# sizes keep each entry under Airflow's [state_store] max_value_storage_bytes (64 KiB by
# default), past which every write logs a warning in the task log.
MAX_RECORDS = 40
MAX_LOG_TAILS = 4
MAX_LOG_TAIL_CHARS = 8_000
MAX_REASON_CHARS = 2_000

# How a job ended, as the page tells it. "submitted" is a job whose end was not recorded (yet):
# the page joins it with the live cluster, or with the task instance's state once it is gone.
SUBMITTED = "submitted"
ENDED_STATES = ("succeeded", "failed", "admission_timeout", "lost", "killed", "timed_out", "disrupted")
# A job's record keeps its newest disruption episodes (`airflow_gang.jobs.disruption`), one row each.
MAX_DISRUPTIONS = 20


def waits_for(name: str, namespace: str, wait_for: str) -> JsonDict:
    """A sensor's ``gang_waits_for`` entry: the job it waits for, and for what."""
    return {"name": name, "namespace": namespace, "wait_for": wait_for}


def gang_resources(job: JsonDict) -> dict[str, float]:
    """What the whole gang asks for: every replica's pod requests times its replica count (a
    TrainJob's ``resourcesPerNode`` times its nodes; what its runtime adds is not counted)."""
    requests = job_kind_of(job).gang_requests(job)
    return {resource: float(total) for resource, total in sorted(requests.items())}


def queue_of(job: JsonDict) -> str | None:
    """The Volcano queue the job names (``schedulingPolicy.queue``, a TrainJob's queue
    annotation), or None."""
    queue = job_kind_of(job).queue(job)
    return str(queue) if queue else None


def job_kind_of(job: JsonDict) -> JobKind:
    """The `JobKind` of a job object (PyTorchJob when it does not say)."""
    return job_kind_of_object(job)


def started(
    job: JsonDict, *, try_number: int, gang_scheduling: str, now: dt.datetime, waits_for: str = "completion"
) -> JsonDict:
    """The record of a job this try submitted or took over, before it ended.

    :param waits_for: what the task waits for: ``completion``, ``admission`` or ``submission``
        (a task that does not wait for the end records none).
    """
    metadata = job.get("metadata") or {}
    job_kind = job_kind_of(job)
    created = parse_time(metadata.get("creationTimestamp"))
    return {
        "kind": job_kind.kind,
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "try_number": try_number,
        "queue": queue_of(job) or ("default" if gang_scheduling != "disabled" else None),
        "gang_scheduling": gang_scheduling,
        "waits_for": waits_for,
        "replicas": job_kind.replica_counts(job),
        "resources": gang_resources(job),
        "state": SUBMITTED,
        "submitted_at": (created or now).isoformat(),
        "admitted_at": None,
        "finished_at": None,
        "queued_seconds": None,
        "run_seconds": None,
        "gpu_seconds": None,
        "reason": None,
        "recorded_at": now.isoformat(),
    }


def ended(
    record: JsonDict,
    state: str,
    *,
    now: dt.datetime,
    admitted_at: str | None = None,
    finished_at: str | None = None,
    reason: str | None = None,
    failed_replica: str | None = None,
    exit_code: int | None = None,
) -> JsonDict:
    """``record`` closed in ``state`` (one of `ENDED_STATES`), with its moments and why."""
    if state not in ENDED_STATES:
        raise ValueError(f"unknown end state {state!r}: choose from {', '.join(ENDED_STATES)}")
    submitted = parse_time(record.get("submitted_at"))
    admitted = parse_time(admitted_at) or parse_time(record.get("admitted_at"))
    finished = parse_time(finished_at) or now
    if admitted is not None and finished < admitted:
        finished = admitted  # completionTime has 1 s resolution
    queued_end = admitted or finished
    run_seconds = _seconds(admitted, finished) if admitted is not None else None
    gpus = float((record.get("resources") or {}).get(GPU) or 0)
    closed = {
        **record,
        "state": state,
        "admitted_at": admitted.isoformat() if admitted else None,
        "finished_at": finished.isoformat(),
        "queued_seconds": _seconds(submitted, queued_end) if submitted else None,
        "run_seconds": run_seconds,
        "gpu_seconds": round(gpus * run_seconds, 1) if run_seconds is not None and gpus else None,
        "reason": _short(reason),
        "recorded_at": now.isoformat(),
    }
    if failed_replica is not None:
        closed["failed_replica"] = failed_replica
    if exit_code is not None:
        closed["exit_code"] = exit_code
    return closed


def with_disruptions(record: JsonDict, episodes: list[JsonDict]) -> JsonDict:
    """``record`` with its job's disruption episodes (the newest `MAX_DISRUPTIONS`)."""
    return {**record, "disruptions": [dict(e) for e in episodes][-MAX_DISRUPTIONS:]}


def upsert(records: Any, record: JsonDict) -> list[JsonDict]:
    """``records`` (the stored list, or anything else: a fresh start) with ``record`` put in by
    job uid: a job taken over again keeps one record; the newest `MAX_RECORDS` are kept."""
    kept = [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    uid = record.get("uid")
    for index, existing in enumerate(kept):
        if uid and existing.get("uid") == uid:
            if existing.get("state") in ENDED_STATES and record.get("state") == SUBMITTED:
                return kept  # a finished job taken over to deliver its result keeps its end
            kept[index] = {**existing, **record, "try_number": existing.get("try_number")}
            return kept[-MAX_RECORDS:]
    return [*kept, record][-MAX_RECORDS:]


def find(records: Any, uid: str | None, *, name: str | None = None) -> JsonDict | None:
    """The record of job ``uid`` (or, without a uid, the newest of job ``name``), or None."""
    if not isinstance(records, list):
        return None
    kept = [r for r in records if isinstance(r, dict)]
    if uid:
        return next((r for r in kept if r.get("uid") == uid), None)
    return next((r for r in reversed(kept) if name and r.get("name") == name), None)


def with_log_tail(tails: Any, uid: str, text: str) -> dict[str, str]:
    """The stored ``gang_log_tail`` mapping with ``text`` (its end) kept for job ``uid``."""
    kept = {k: v for k, v in tails.items() if isinstance(v, str)} if isinstance(tails, Mapping) else {}
    kept.pop(uid, None)
    kept[uid] = text[-MAX_LOG_TAIL_CHARS:]
    return dict(list(kept.items())[-MAX_LOG_TAILS:])


def failure_headline(message: str) -> str:
    """A `PyTorchJobFailed` message's first part (which replica, exit code, reason), without the
    log lines it appends: what a record keeps as the reason."""
    return message.split("\n", 1)[0].split(" Last ", 1)[0]


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 3)


def _short(text: str | None) -> str | None:
    if not text:
        return None
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"
