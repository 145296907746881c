"""Airflow 3.3's task state store from inside a task, read and written safely, and the
``gang_history`` / ``gang_log_tail`` records of the jobs a task instance ran (`history`).

The operator and the sensors keep a record of every job they wait for (outcome, times,
GPU-seconds, why it failed) and the master's last lines, so the Gang jobs page shows a job after
cleanup deleted it. Records follow the store's ``[state_store] default_retention_days``.

Outside a task (or on Airflow without the store) everything here is a no-op: the store is a
convenience, never a reason to fail a job.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

from airflow_gang.jobs.outcome import Outcome
from airflow_gang.reports import telemetry
from airflow_gang.state import history

if TYPE_CHECKING:
    from airflow.sdk import Context

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)


def read(context: Context, key: str) -> Any:
    store = context.get("task_state_store")
    if store is None:
        return None
    try:
        return store.get(key)
    except Exception as error:  # a store that cannot be read must not fail the job
        log.debug("task state store unavailable: %s", error)
        return None


def write(context: Context, key: str, value: Any, *, forever: bool = False) -> None:
    """Set ``key``; ``forever``: exempt from the store's retention (else its default)."""
    store = context.get("task_state_store")
    if store is None:
        return
    try:
        from airflow.sdk.execution_time.context import NEVER_EXPIRE

        store.set(key, value, retention=NEVER_EXPIRE if forever else None)
    except Exception as error:
        log.debug("task state store unavailable: %s", error)


def _try_number(context: Context) -> int:
    return int(getattr(context["ti"], "try_number", 1) or 1)


def record_start(
    context: Context, job: JsonDict, gang_scheduling: str, *, for_completion: bool, for_admission: bool
) -> None:
    """Add the job this try submitted, took over or waits for to the ``gang_history`` entry."""
    waits_for = "completion" if for_completion else "admission" if for_admission else "submission"
    now = dt.datetime.now(dt.UTC)
    try_number = _try_number(context)
    record = history.started(
        job, try_number=try_number, gang_scheduling=gang_scheduling, now=now, waits_for=waits_for
    )
    records = read(context, history.HISTORY_KEY)
    if history.find(records, record["uid"]) is None:  # a new job, not one taken over again
        previous = _last(records)
        if previous is not None and int(previous.get("try_number") or 0) < try_number:
            telemetry.try_started(previous, **_task(context))
    write(context, history.HISTORY_KEY, history.upsert(records, record))


def record_end(
    context: Context,
    job: JsonDict,
    state: str,
    *,
    log_tail: str | None = None,
    disruptions: list[JsonDict] | None = None,
    **details: Any,
) -> JsonDict | None:
    """Close the job's ``gang_history`` record in ``state`` (`history.ended`'s ``details``), keep
    its log tail and the disruption episodes the wait saw, and return the record (None outside a
    task or without a store)."""
    if context.get("task_state_store") is None:
        return None
    metadata = job.get("metadata") or {}
    uid = str(metadata.get("uid") or "")
    records = read(context, history.HISTORY_KEY)
    now = dt.datetime.now(dt.UTC)
    record = history.find(records, uid, name=metadata.get("name"))
    if record is None:  # its start was not recorded (a store added mid-wait): what the job says
        record = history.started(job, try_number=_try_number(context), gang_scheduling="unknown", now=now)
        record["queue"] = history.queue_of(job)
    if disruptions:
        record = history.with_disruptions(record, disruptions)
    closed = history.ended(record, state, now=now, **details)
    write(context, history.HISTORY_KEY, history.upsert(records, closed))
    telemetry.try_ended(closed, **_task(context))
    if log_tail and log_tail.strip() and uid:
        tails = history.with_log_tail(read(context, history.LOG_TAIL_KEY), uid, log_tail)
        write(context, history.LOG_TAIL_KEY, tails)
    return closed


def record_disruptions(context: Context, job: JsonDict, episodes: list[JsonDict]) -> None:
    """Put the disruption episodes a wait saw so far into the job's open ``gang_history`` record."""
    if context.get("task_state_store") is None or not episodes:
        return
    metadata = job.get("metadata") or {}
    records = read(context, history.HISTORY_KEY)
    record = history.find(records, str(metadata.get("uid") or ""), name=metadata.get("name"))
    if record is not None:
        updated = history.upsert(records, history.with_disruptions(record, episodes))
        write(context, history.HISTORY_KEY, updated)


def record_outcome(
    context: Context,
    outcome: Outcome,
    *,
    admitted_at: str | None,
    finished_at: str | None,
    disruptions: list[JsonDict] | None = None,
) -> None:
    """Close the history record of a job that ran to its end (before cleanup may delete it)."""
    if outcome.error is not None:
        error = outcome.error
        details: dict[str, Any] = {
            "reason": history.failure_headline(str(error)),
            "failed_replica": error.replica,
            "exit_code": error.exit_code,
        }
        tail = outcome.log_tail
        if error.log_tail and error.replica:
            tail = f"--- {error.replica}, which failed ---\n{error.log_tail}"
        moments = {"admitted_at": admitted_at, "finished_at": finished_at}
        record_end(
            context, outcome.job, "failed", log_tail=tail, disruptions=disruptions, **moments, **details
        )
    elif outcome.result is not None:
        moments = {"admitted_at": outcome.result["admitted_at"], "finished_at": outcome.result["finished_at"]}
        record_end(
            context, outcome.job, "succeeded", log_tail=outcome.log_tail, disruptions=disruptions, **moments
        )


def _last(records: Any) -> JsonDict | None:
    kept = [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    return kept[-1] if kept else None


def _task(context: Context) -> dict[str, str | None]:
    ti = context.get("ti")
    return {"dag_id": getattr(ti, "dag_id", None), "task_id": getattr(ti, "task_id", None)}
