"""One asynchronous look at a gang job from the triggerer: its objects, or a failing pod's log tail.

The trigger's polling reads (while its watches cannot be relied on) and the log tail a TrainJob's
wait reads as soon as it sees a node fail (`airflow_gang.jobs.failure_memory`). It imports no
Kubernetes client: the hook arrives as an argument.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.kinds import JobKind
from airflow_gang.model.gang_state import GangSnapshot

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

JsonDict = dict[str, Any]
TAIL_LINES = 100


async def observe(
    hook: AsyncGangJobHook, job_kind: JobKind, name: str, namespace: str, *, uid: str, gang_scheduling: str
) -> GangSnapshot:
    """Read the job (a same-named job of another uid is not ours: lost), its PodGroup, its pods."""
    job = await hook.get_job(job_kind, name, namespace)
    if job is not None and job["metadata"].get("uid") != uid:
        job = None
    podgroup_name = job_kind.podgroup_name(name, uid)
    podgroup = await hook.get_podgroup(podgroup_name, namespace) if gang_scheduling != "disabled" else None
    pods = await hook.list_job_pods(name, namespace, job_kind) if job is not None else []
    return GangSnapshot.of(job, podgroup, pods, gang_scheduling, job_kind)


async def log_tail(
    hook: AsyncGangJobHook, job_kind: JobKind, pod: str, namespace: str, *, previous: bool = False
) -> str:
    """The pod's last lines (of its previous run: ``previous``), or a note why they could not be
    read (never raises)."""
    try:
        return await hook.read_pod_log(
            pod, namespace, container=job_kind.container, tail_lines=TAIL_LINES, previous=previous
        )
    except GangApiError as error:
        if previous:  # no previous run kept: the failed run may be the current one
            return await log_tail(hook, job_kind, pod, namespace)
        return f"(log unavailable: {error})"


async def note_failure(
    hook: AsyncGangJobHook, memory: FailureMemory, pods: list[JsonDict], namespace: str
) -> None:
    """Note the failing pod among ``pods``; read its log tail when it is a new one."""
    failure = memory.noticed(pods)
    if failure is not None:
        memory.tail = await log_tail(hook, memory.job_kind, failure.pod, namespace, previous=failure.previous)
