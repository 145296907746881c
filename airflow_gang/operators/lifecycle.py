"""Reading and judging one gang job through `GangJobHook`: queue checks, a look, failures, the result.

Kept apart from the operator class so each step reads on its own: the operator orchestrates,
these functions do one cluster conversation each. Taking over and submitting live in
`submission`, deleting in `cleanup`.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from airflow_gang.exceptions import GangApiError, GangSpecError, PyTorchJobFailed
from airflow_gang.gang_state import GangSnapshot, failing_replica, last_true_condition
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.timeline import parse_time

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)


def check_queue(hook: GangJobHook, queue: str) -> None:
    """Fail before submitting when the Volcano queue is missing or not Open."""
    found = hook.get_queue(queue)
    if found is None:
        raise GangSpecError(
            f"queue={queue!r} does not exist in the cluster: create the Volcano queue or pass an "
            "existing one (kubectl get queues.scheduling.volcano.sh)",
            field="queue",
        )
    state = (found.get("status") or {}).get("state") or "Open"
    if state != "Open":
        raise GangSpecError(
            f"queue={queue!r} is {state}: Volcano admits nothing into a queue that is not Open; reopen it or "
            "pass another queue",
            field="queue",
        )


def observe(
    hook: GangJobHook, name: str, namespace: str, gang_scheduling: str, uid: str | None = None
) -> GangSnapshot:
    """Read the job, its PodGroup and its pods once and decide where the gang stands.

    With ``uid``, a job of the same name but another uid is someone else's: it counts as lost.
    """
    job = hook.get_pytorchjob(name, namespace)
    if job is not None and uid is not None and job["metadata"].get("uid") != uid:
        job = None
    podgroup = hook.get_podgroup(name, namespace) if gang_scheduling != "disabled" else None
    pods = hook.list_job_pods(name, namespace) if job is not None else []
    return GangSnapshot.of(job, podgroup, pods, gang_scheduling)


def log_tail(hook: GangJobHook, pod: str, namespace: str, lines: int) -> str:
    try:
        return hook.read_pod_log(pod, namespace, tail_lines=lines)
    except GangApiError as error:
        return f"(log unavailable: {error})"


def failure_error(hook: GangJobHook, name: str, namespace: str, lines: int) -> PyTorchJobFailed:
    """`PyTorchJobFailed` naming the failing replica, its exit code and reason, and its log tail."""
    job = hook.get_pytorchjob(name, namespace) or {}
    condition = last_true_condition(job) or {}
    pods = hook.list_job_pods(name, namespace)
    failure = failing_replica(pods)
    headline = str(condition.get("message") or f"PyTorchJob {name} failed")
    if failure is None:
        return PyTorchJobFailed(
            f"{headline} (no failed replica found; its pods may have been cleaned up)",
            name=name,
            namespace=namespace,
            reason=condition.get("reason"),
        )
    tail = log_tail(hook, failure.pod, namespace, lines)
    message = (
        f"{headline} Replica {failure.replica} (pod {failure.pod}) exited with code {failure.exit_code}"
        f" ({failure.reason or 'unknown reason'})."
    )
    if tail.strip():
        message += f" Last {lines} log lines:\n{tail.rstrip()}"
    return PyTorchJobFailed(
        message,
        name=name,
        namespace=namespace,
        replica=failure.replica,
        exit_code=failure.exit_code,
        reason=failure.reason,
        log_tail=tail,
    )


def resume_hold_seconds() -> float:
    """``[gang] resume_hold_seconds``: how long after a deferral a trigger may fire at the earliest."""
    from airflow.configuration import conf

    configured = conf.get("gang", "resume_hold_seconds", fallback="10")
    try:
        return max(0.0, float(configured or 0))
    except ValueError:
        raise GangSpecError(
            f"[gang] resume_hold_seconds={configured!r} is invalid: use a number of seconds (0 turns the "
            "hold off)",
            field="resume_hold_seconds",
        ) from None


def resume_not_before() -> str:
    """The ``not_before`` of a trigger deferred now (ISO UTC); see `GangJobTrigger`."""
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=resume_hold_seconds())).isoformat()


def result(
    job: JsonDict,
    state: str,
    admitted_at: str | None,
    finished_at: str | None,
    *,
    metrics: dict[str, float] | None = None,
) -> JsonDict:
    """The task's return value: small, JSON-serialisable, the same shape on every path."""
    metadata = job.get("metadata") or {}
    status = job.get("status") or {}
    submitted = parse_time(metadata.get("creationTimestamp"))
    admitted = parse_time(admitted_at)
    finished = parse_time(status.get("completionTime")) or parse_time(finished_at)
    if finished and admitted and finished < admitted:
        finished = admitted  # completionTime has 1 s resolution; never report a negative run
    replicas = {
        replica_type: int((spec or {}).get("replicas", 1))
        for replica_type, spec in ((job.get("spec") or {}).get("pytorchReplicaSpecs") or {}).items()
    }
    policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
    return {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "queue": policy.get("queue"),
        "podgroup": metadata.get("name") if policy else None,
        "state": state,
        "submitted_at": submitted.isoformat() if submitted else None,
        "admitted_at": admitted.isoformat() if admitted else None,
        "finished_at": finished.isoformat() if finished else None,
        "queued_seconds": round((admitted - submitted).total_seconds(), 3)
        if admitted and submitted
        else None,
        "run_seconds": round((finished - admitted).total_seconds(), 3) if finished and admitted else None,
        "replicas": replicas,
        "metrics": dict(metrics or {}),
    }
