"""Deleting a gang job on purpose from a worker or the scheduler: the sync driver of
`airflow_gang.jobs.deletion`'s plan (its rules are there).

Each step is bounded, also against an API server that accepts connections and never answers:
no request outlasts the budget (`RetryPolicy.within`), no call starts after it, an outage is
ridden out within it, and `kill_budget_seconds` keeps ``on_kill`` inside Airflow's kill grace
period. Deletion is confirmed by a watch, with a one-second poll only when the watch fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs.deletion import Step, deletion_plan, leftovers, not_ours, podgroup_to_delete
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.outage import Outage, ride_out

T = TypeVar("T")

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)
DEFAULT_CONFIRM_SECONDS = 60.0


def kill_budget_seconds() -> float:
    """Seconds ``on_kill`` may spend deleting: Airflow's ``[core] killed_task_cleanup_time`` less a margin.

    The task runner SIGKILLs a task that is still cleaning up after that grace period (60 s by
    default); what is not confirmed by then is the orphan reaper's.
    """
    from airflow.configuration import conf

    grace = conf.getfloat("core", "killed_task_cleanup_time", fallback=60.0)
    return max(5.0, grace - 10.0)


def leftover_looks(
    hook: GangJobHook,
    name: str,
    namespace: str,
    job_kind: JobKind,
    plan: tuple[Step, ...],
    *,
    uid: str | None = None,
) -> dict[Step, Callable[[], list[str]]]:
    """For each confirming step that lists, one look at what is still there (in words)."""

    def anything() -> list[str]:
        podgroup_name = job_kind.podgroup_name(name, uid)
        podgroup = hook.get_podgroup(podgroup_name, namespace) if Step.CONFIRM_PODGROUP_GONE in plan else None
        children = hook.list_job_children(job_kind, name, namespace)
        return leftovers(podgroup, children, hook.list_job_pods(name, namespace, job_kind))

    return {
        Step.CONFIRM_PODS_GONE: lambda: leftovers(None, [], hook.list_job_pods(name, namespace, job_kind)),
        Step.CONFIRM_NOTHING_LEFT: anything,
    }


def delete_gang(
    hook: GangJobHook,
    name: str,
    namespace: str,
    uid: str | None,
    *,
    gang_scheduling: str | None = None,
    timeout: float = DEFAULT_CONFIRM_SECONDS,
    reason: str,
    logger: logging.Logger | Any = log,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> bool:
    """Carry out the deletion plan for the job of ``uid``; whether it was confirmed within ``timeout``.

    An outage during the delete is ridden out within the same budget, and a request that hangs is
    cut at its end (returns False). Raises `GangApiError` only for a refusal (403...).

    :param gang_scheduling: the job's mode; ``"disabled"`` leaves PodGroups out (None: provider).
    :param reason: why (for the log line a user reads: "admission timeout", "task killed"...).
    :param job_kind: the job's kind (PyTorchJob, TrainJob).
    """
    deadline = time.monotonic() + timeout
    what = f"{job_kind.kind} {namespace}/{name}"
    outage = Outage(f"the deletion of {what}", timeout=timeout)
    plan = deletion_plan(gang_scheduling, job_kind)
    logger.info("deleting %s and everything it made (%s)", what, reason)
    seen_left: list[str] = []

    def remaining() -> float:
        return max(0.0, deadline - time.monotonic())

    def in_time(call: Callable[[], T]) -> Callable[[], T]:
        def bounded() -> T:
            if remaining() <= 0:  # no call starts once the budget is spent
                raise GangApiUnavailable(
                    f"no time left to delete {what}",
                    unavailable_seconds=outage.seconds(),
                    last_error=outage.last_error,
                )
            return call()

        return bounded

    def pause(seconds: float) -> None:
        time.sleep(min(seconds, remaining()))

    def delete_job() -> bool:
        try:
            hook.delete_job(job_kind, name, namespace, propagation=job_kind.deletion_propagation, uid=uid)
        except GangApiError as error:
            if not not_ours(error):
                raise
            log.info("%s now has another uid than %s: not ours, left alone", what, uid)
        return True

    def delete_podgroup() -> bool:
        podgroup_name = job_kind.podgroup_name(name, uid)
        podgroup_uid = podgroup_to_delete(hook.get_podgroup(podgroup_name, namespace), uid)
        if podgroup_uid is not None:
            try:
                hook.delete_podgroup(podgroup_name, namespace, uid=podgroup_uid)
            except GangApiError as error:
                if not not_ours(error):  # 409: replaced meanwhile, so not the one we looked at
                    raise
        return True

    def until_none(look: Callable[[], list[str]]) -> Callable[[], bool]:
        def confirmed() -> bool:
            while True:
                seen_left[:] = look()
                if not seen_left:
                    return True
                if remaining() <= 0:
                    return False
                pause(1.0)

        return confirmed

    looks = leftover_looks(hook, name, namespace, job_kind, plan, uid=uid)
    steps: dict[Step, Callable[[], bool]] = {
        Step.DELETE_JOB: delete_job,
        Step.DELETE_PODGROUP: delete_podgroup,
        Step.CONFIRM_JOB_GONE: lambda: hook.wait_gone(
            job_kind.watch_name, name, namespace, uid=uid, timeout=remaining()
        ),
        Step.CONFIRM_PODGROUP_GONE: lambda: hook.wait_gone(
            "podgroup", job_kind.podgroup_name(name, uid), namespace, timeout=remaining()
        ),
        **{step: until_none(look) for step, look in looks.items()},
    }
    current = plan[0]
    try:
        # Its own outage policy, bounded by ``timeout``: not the wait's (riding_out), which
        # could hold a kill's cleanup for as long as api_unavailable_timeout.
        with hook.retries(hook.retry_policy.within(timeout)), hook.riding_out(None):
            for current in plan:
                if not ride_out(in_time(steps[current]), outage, logger, sleep=pause):
                    break
            else:
                logger.info("deleted %s: seen gone, and its PodGroup, children and pods with it", what)
                return True
    except GangApiUnavailable:
        pass
    logger.warning(
        "%s not confirmed deleted after %.0fs (could not %s%s); the orphan reaper finishes the job",
        what,
        timeout,
        current,
        f"; still there: {', '.join(seen_left[:6])}" if seen_left else "",
    )
    return False


def give_up(
    hook: GangJobHook,
    job: JsonDict,
    reason: str,
    *,
    gang_scheduling: str | None,
    job_kind: JobKind,
    logger: logging.Logger | Any = log,
) -> bool:
    """Delete a job nobody will wait for (admission timeout, execution_timeout, a kill, a wrong
    queue, a disruption given up), within the kill budget; whether it was confirmed gone. A
    refusal is logged, not raised: the task's own failure is what it reports."""
    metadata = job["metadata"]
    try:
        return delete_gang(
            hook,
            metadata["name"],
            metadata["namespace"],
            metadata.get("uid"),
            gang_scheduling=gang_scheduling,
            timeout=kill_budget_seconds(),
            reason=reason,
            logger=logger,
            job_kind=job_kind,
        )
    except GangApiError as error:
        where = f"{job_kind.kind} {metadata['namespace']}/{metadata['name']}"
        logger.error("could not delete %s: %s", where, error)
        return False
