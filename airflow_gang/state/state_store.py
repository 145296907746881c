"""The operator's two entries in Airflow 3.3's task state store, and reading them safely.

- ``pytorchjob`` (kept until the task instance is gone): name, namespace, uid, connection, try
  and ``delete_on_finish`` of the job this task instance waits for; ``delivered`` once a try
  returned its result.
  The next try reattaches through it, the scheduler's orphan reaper finds jobs through it.
- ``progress``: where the gang stands (phase, queue, replicas bound), for people and plugins.
- ``gang_history`` and ``gang_log_tail``: the records of the jobs the task instance ran, for the
  Gang jobs page (`airflow_gang.state.task_store`, shared with the sensors).

Outside a task (or on Airflow without the store) both are no-ops: the store is a convenience,
never a reason to fail a job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_gang.kinds import job_kind_of_object
from airflow_gang.state import task_store
from airflow_gang.state.reaper import STATE_STORE_JOB_KEY
from airflow_gang.state.task_store import read, record_disruptions, record_end, record_outcome, record_start

if TYPE_CHECKING:
    from airflow.sdk import Context

JsonDict = dict[str, Any]
STATE_STORE_PROGRESS_KEY = "progress"

__all__ = [
    "STATE_STORE_JOB_KEY",
    "STATE_STORE_PROGRESS_KEY",
    "read",
    "record_disruptions",
    "record_end",
    "record_outcome",
    "record_start",
    "remember_job",
    "write",
]


def write(context: Context, key: str, value: Any) -> None:
    """Set ``key``; the job's identity never expires (the reaper and reattach need it)."""
    task_store.write(context, key, value, forever=key == STATE_STORE_JOB_KEY)


def remember_job(
    context: Context,
    job: JsonDict,
    conn_id: str,
    delete_on_finish: str | None = None,
    *,
    delivered: bool = False,
) -> None:
    """Write the ``pytorchjob`` entry for ``job`` (``delivered``: its result was returned;
    ``delete_on_finish``: for the reaper, when the task ends from outside after the job)."""
    metadata = job["metadata"]
    entry: JsonDict = {
        "kind": job_kind_of_object(job).kind,
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "uid": metadata["uid"],
        "kubernetes_conn_id": conn_id,
        "try_number": int(getattr(context["ti"], "try_number", 1) or 1),
    }
    if delete_on_finish is not None:
        entry["delete_on_finish"] = delete_on_finish
    if delivered:
        entry["delivered"] = True
    write(context, STATE_STORE_JOB_KEY, entry)
