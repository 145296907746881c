"""Reading one gang job through `GangJobHook`: the queue check, a look, the failure and its log,
and the errors of a job its queue held too long or whose PodGroup landed in another queue.

One cluster conversation each, for the operator's waits and the sensors' pokes alike. Taking
over and submitting live in `submission`, deleting in `cleanup`.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_gang.exceptions import (
    GangAdmissionTimeout,
    GangApiError,
    GangQueueMismatch,
    GangSpecError,
    PyTorchJobFailed,
)
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs.deletion import after_deletion
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import (
    GangSnapshot,
    GangStatus,
    failing_replica,
    podgroup_queue,
    queue_mismatch_message,
)

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
    hook: GangJobHook,
    name: str,
    namespace: str,
    gang_scheduling: str,
    uid: str | None = None,
    *,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> GangSnapshot:
    """Read the job, its PodGroup and its pods once and decide where the gang stands.

    With ``uid``, a job of the same name but another uid is someone else's: it counts as lost.
    """
    job = hook.get_job(job_kind, name, namespace)
    if job is not None and uid is not None and job["metadata"].get("uid") != uid:
        job = None
    podgroup_name = job_kind.podgroup_name(name, uid)
    podgroup = hook.get_podgroup(podgroup_name, namespace) if gang_scheduling != "disabled" else None
    pods = hook.list_job_pods(name, namespace, job_kind) if job is not None else []
    return GangSnapshot.of(job, podgroup, pods, gang_scheduling, job_kind)


def log_tail(
    hook: GangJobHook,
    pod: str,
    namespace: str,
    lines: int,
    container: str = DEFAULT_JOB_KIND.container,
    *,
    previous: bool = False,
) -> str:
    """The pod's last ``lines`` log lines (of its previous run: ``previous``), or a note why they
    could not be read.

    Never waits through an outage: a log tail is worth a line in the task log, not a try.
    """
    try:
        with hook.riding_out(None):
            return hook.read_pod_log(pod, namespace, container=container, tail_lines=lines, previous=previous)
    except GangApiError as error:
        if previous:  # no previous run kept: the failed run may be the current one
            return log_tail(hook, pod, namespace, lines, container)
        return f"(log unavailable: {error})"


def failure_error(
    hook: GangJobHook,
    name: str,
    namespace: str,
    lines: int,
    job_kind: JobKind = DEFAULT_JOB_KIND,
    *,
    seen: FailureMemory | None = None,
) -> PyTorchJobFailed:
    """`PyTorchJobFailed` naming the failing replica, its exit code and reason, and its log tail.

    :param seen: what the wait saw fail, for a kind whose pods may be gone by now.
    """
    job = hook.get_job(job_kind, name, namespace) or {}
    state, said = job_kind.state(job) if job else (None, "")
    condition: JsonDict = next(
        (
            c
            for c in reversed((job.get("status") or {}).get("conditions") or [])
            if c.get("type") == "Failed" and c.get("status") == "True"
        ),
        {},
    )
    pods = hook.list_job_pods(name, namespace, job_kind)
    failure = failing_replica(pods, job_kind)
    seen_tail = ""
    if failure is None and seen is not None and seen.failure is not None:
        failure, seen_tail = seen.failure, seen.tail
    headline = (said if state == "Failed" else "") or f"{job_kind.kind} {name} failed"
    if not headline.endswith("."):
        headline += "."
    failed = job_kind.failure_error
    if failure is None:
        return failed(
            f"{headline} (no failed replica found; its pods may have been cleaned up)",
            name=name,
            namespace=namespace,
            reason=condition.get("reason"),
        )
    tail = seen_tail or log_tail(
        hook, failure.pod, namespace, lines, job_kind.container, previous=failure.previous
    )
    message = (
        f"{headline} {_sentence(job_kind.replica_phrase(failure.replica))} (pod {failure.pod}) exited with "
        f"code {failure.exit_code}"
        f" ({failure.reason or 'unknown reason'})."
    )
    if tail.strip():
        message += f" Last {lines} log lines:\n{tail.rstrip()}"
    return failed(
        message,
        name=name,
        namespace=namespace,
        replica=failure.replica,
        exit_code=failure.exit_code,
        reason=failure.reason,
        log_tail=tail,
    )


def _sentence(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:]


def admission_timeout(
    name: str,
    namespace: str,
    status: GangStatus,
    seconds: float | None,
    job_kind: JobKind = DEFAULT_JOB_KIND,
    *,
    deleted: bool | None = None,
) -> GangAdmissionTimeout:
    """The failure of a job not admitted ``seconds`` after its creation, which was deleted for it;
    ``deleted``: whether that deletion was confirmed (None: not known here)."""
    by = f"by queue {status.queue!r}" if status.queue else "(no gang scheduling: not every replica was bound)"
    within = f"within {seconds or 0:.0f}s of its creation"
    return GangAdmissionTimeout(
        f"{job_kind.kind} {namespace}/{name} was not admitted {within} {by} "
        f"({status.describe()}); {after_deletion(deleted)}",
        name=name,
        namespace=namespace,
        queue=status.queue,
        waited_seconds=seconds,
        reason=status.message or None,
    )


def queue_mismatch(
    job: JsonDict,
    asked: str | None,
    seen: GangSnapshot,
    job_kind: JobKind = DEFAULT_JOB_KIND,
    *,
    deleted: bool,
) -> GangQueueMismatch:
    """The failure of a job whose PodGroup appeared in another queue than ``asked``; ``deleted``:
    whether the job was confirmed gone as the task gave up on it."""
    metadata = job["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    actual = podgroup_queue(seen.podgroup) if seen.podgroup is not None else seen.status.queue
    return GangQueueMismatch(
        queue_mismatch_message(job_kind.kind, namespace, name, asked, actual, deleted=deleted),
        name=name,
        namespace=namespace,
        asked_queue=asked,
        queue=actual,
    )
