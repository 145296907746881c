"""The end of a wait: the master's log, the failure with its replica, the result, the cleanup.

Shared by both ways of waiting (worker and triggerer), so a job that finished while deferred, in
the worker, or before a try adopted it ends the same way: the same result dict (metrics,
timeline), the same `PyTorchJobFailed`, the same ``delete_on_finish``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol

from airflow_gang.gang_state import master_pod_name
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import cleanup, observation
from airflow_gang.jobs.result import job_result
from airflow_gang.metrics import parse_metrics
from airflow_gang.outage import Outage, ride_out

JsonDict = dict[str, Any]


class Finishing(Protocol):
    """What `finish` needs of the operator (read only)."""

    @property
    def hook(self) -> GangJobHook: ...

    @property
    def log(self) -> Any: ...

    @property
    def get_logs(self) -> bool: ...

    @property
    def log_tail_lines(self) -> int: ...

    @property
    def collect_metrics(self) -> bool: ...

    @property
    def delete_on_finish(self) -> str: ...

    @property
    def gang_scheduling(self) -> str | None: ...


def finish(
    task: Finishing,
    job: JsonDict,
    state: str,
    *,
    admitted_at: str | None,
    finished_at: str | None,
    log_streamed: bool,
    outage: Outage,
    on_success: Callable[[JsonDict, JsonDict], Any] | None = None,
) -> Any:
    """Log the master's tail (unless streamed), raise `PyTorchJobFailed` or return the result.

    ``on_success(job, result)``, when given, turns the result into the task's return value while
    the job and its pods are still there; if it raises, the job is cleaned up as a failed one.
    The job is deleted per ``delete_on_finish`` in every case.
    """
    hook = task.hook
    metadata = job["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    current = ride_out(lambda: hook.get_pytorchjob(name, namespace), outage, task.log) or job
    tail: str | None = None
    if task.get_logs and not log_streamed:
        tail = observation.log_tail(hook, master_pod_name(name), namespace, task.log_tail_lines)
        if tail.strip():
            task.log.info("master replica log (last %d lines):\n%s", task.log_tail_lines, tail.rstrip())
    if state == "failed":
        error = ride_out(
            lambda: observation.failure_error(hook, name, namespace, task.log_tail_lines), outage, task.log
        )
        _cleanup(task, current, succeeded=False)
        raise error
    metrics: dict[str, float] = {}
    if task.collect_metrics:
        if tail is None:
            tail = observation.log_tail(hook, master_pod_name(name), namespace, task.log_tail_lines)
        metrics = parse_metrics(tail)
    value = job_result(current, state, admitted_at, finished_at, metrics=metrics)
    task.log.info(
        "PyTorchJob %s/%s %s: queued %ss, ran %ss",
        namespace,
        name,
        state,
        value["queued_seconds"],
        value["run_seconds"],
    )
    if on_success is not None:
        try:
            value = on_success(current, value)
        except Exception:
            _cleanup(task, current, succeeded=False)
            raise
    _cleanup(task, current, succeeded=True)
    return value


def _cleanup(task: Finishing, job: JsonDict, *, succeeded: bool) -> None:
    if task.delete_on_finish == "always" or (task.delete_on_finish == "on_success" and succeeded):
        metadata = job["metadata"]
        cleanup.delete_gang(
            task.hook,
            metadata["name"],
            metadata["namespace"],
            metadata.get("uid"),
            gang_scheduling=task.gang_scheduling,
            reason=f"delete_on_finish={task.delete_on_finish}",
            logger=task.log,
        )


def event_progress(event: JsonDict) -> JsonDict:
    """The ``progress`` entry after a deferred wait: the trigger's last look, else the event."""
    progress = event.get("progress")
    if isinstance(progress, dict):
        return progress
    return {
        "phase": event.get("phase") or event.get("status"),
        "podgroup_phase": event.get("podgroup_phase"),
        "queue": event.get("queue"),
        "replicas_bound": None,
        "replicas_running": None,
        "replicas": None,
        "message": event.get("message") or "",
        "updated_at": dt.datetime.now(dt.UTC).isoformat(),
    }
