"""How a finished job ended, as a value: its result or its failure, and the master's log tail.

Every way of waiting (in the worker, in the triggerer, a job adopted after it ended) reads the
end of a job through `read_outcome`, so all of them return the same result dict (metrics,
timeline) and raise the same `PyTorchJobFailed`. The caller decides what to do with it: the
operator logs the tail, turns the result into the task's value, and deletes the job per
``delete_on_finish`` (`deletes_on_finish`). Nothing here calls back into the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from airflow_gang.exceptions import PyTorchJobFailed
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import observation
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.result import job_result
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.reports.metrics import parse_metrics

JsonDict = dict[str, Any]
DeleteOnFinish = Literal["always", "on_success", "never"]
DELETE_ON_FINISH_CHOICES = ("always", "on_success", "never")
# KubernetesPodOperator's names for the same choice (its on_finish_action), for its users.
ON_FINISH_ACTIONS: dict[str, DeleteOnFinish] = {
    "delete_job": "always",
    "delete_succeeded_job": "on_success",
    "keep_job": "never",
}


@dataclass(frozen=True)
class Outcome:
    """The end of one job.

    :param job: the job as read at its end (its status: conditions, completion time).
    :param result: the task's result dict when it succeeded, else None.
    :param error: the failure (which replica, exit code, log tail) when it failed, else None.
    :param master_log: the master replica's last lines for the task log, when asked for (None:
        not asked, its log was streamed already).
    :param log_tail: the master replica's last lines, always read (the job's history keeps them).
    """

    job: JsonDict
    result: JsonDict | None
    error: PyTorchJobFailed | None
    master_log: str | None
    log_tail: str = ""

    @property
    def succeeded(self) -> bool:
        return self.error is None


def read_outcome(
    hook: GangJobHook,
    job: JsonDict,
    state: str,
    *,
    admitted_at: str | None,
    finished_at: str | None,
    log_tail_lines: int,
    read_master_log: bool,
    collect_metrics: bool,
    job_kind: JobKind = DEFAULT_JOB_KIND,
    seen_failure: FailureMemory | None = None,
) -> Outcome:
    """Read the end of ``job``, which finished in ``state`` (``succeeded`` or ``failed``).

    :param read_master_log: give the master's last ``log_tail_lines`` lines for the task log
        (False when its log was streamed whole already; they are read for the history anyway).
    :param collect_metrics: parse ``name=value`` pairs of the master's tail into the result.
    """
    metadata = job["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    current = hook.get_job(job_kind, name, namespace) or job
    tail = leader_log_tail(hook, job_kind, name, namespace, log_tail_lines)
    shown = tail if read_master_log else None
    if state == "failed":
        error = observation.failure_error(hook, name, namespace, log_tail_lines, job_kind, seen=seen_failure)
        return Outcome(current, None, error, shown, tail)
    metrics = parse_metrics(tail) if collect_metrics else {}
    result = job_result(current, state, admitted_at, finished_at, metrics=metrics, job_kind=job_kind)
    return Outcome(current, result, None, shown, tail)


def leader_pod(hook: GangJobHook, job_kind: JobKind, name: str, namespace: str) -> str | None:
    """The name of the job's rank-0 pod: derived for a PyTorchJob, found among a TrainJob's pods."""
    derived = job_kind.leader_pod(name)
    if derived is not None:
        return derived
    return job_kind.leader_pod(name, hook.list_job_pods(name, namespace, job_kind))


def leader_log_tail(hook: GangJobHook, job_kind: JobKind, name: str, namespace: str, lines: int) -> str:
    """Rank 0's last ``lines`` log lines, or a note why they could not be read."""
    pod = leader_pod(hook, job_kind, name, namespace)
    if pod is None:
        return f"(log unavailable: no rank-0 pod of {job_kind.kind} {namespace}/{name} is left)"
    return observation.log_tail(hook, pod, namespace, lines, job_kind.container)


def deletes_on_finish(delete_on_finish: str, succeeded: bool) -> bool:
    """Whether ``delete_on_finish`` (``always``, ``on_success``, ``never``) deletes this job now."""
    return delete_on_finish == "always" or (delete_on_finish == "on_success" and succeeded)
