"""Deleting a gang job on purpose, and confirming it is gone, from a worker or the scheduler.

The provider deletes a job only for a reason of its own: its admission timeout, a person's kill
or clear, the task's own give-up (``execution_timeout``), or ``delete_on_finish`` after the
end. Never because the API could not be read (`airflow_gang.outage`).

A delete is uid-guarded (a same-named object of another try or another owner answers 409 and
is left alone), Foreground (the job stays until its pods and its blocking-owned PodGroup are
gone) and confirmed by a watch, with a one-second poll only when the watch fails. It is bounded,
also against an API server that accepts connections and never answers: no request outlasts the
budget (`RetryPolicy.within`), no call starts after it, and `kill_budget_seconds` keeps
``on_kill`` inside Airflow's kill grace period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.gang_state import owned_by
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.outage import Outage, ride_out

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


def delete_gang(
    hook: GangJobHook,
    name: str,
    namespace: str,
    uid: str | None,
    *,
    timeout: float = DEFAULT_CONFIRM_SECONDS,
    reason: str,
    logger: logging.Logger | Any = log,
) -> bool:
    """Delete the job of ``uid`` and its PodGroup and wait until they and their pods are gone.

    Returns whether that was confirmed within ``timeout``; an outage during the delete is ridden
    out within the same budget, and a request that hangs is cut at its end (returns False). Raises
    `GangApiError` only for a refusal (403...).

    :param reason: why (for the log line a user reads: "admission timeout", "task killed"...).
    """
    deadline = time.monotonic() + timeout
    outage = Outage(f"the deletion of PyTorchJob {namespace}/{name}", timeout=timeout)
    logger.info("deleting PyTorchJob %s/%s and its PodGroup (%s)", namespace, name, reason)

    def remaining() -> float:
        return max(0.0, deadline - time.monotonic())

    def in_time(call: Callable[[], T]) -> Callable[[], T]:
        def bounded() -> T:
            if remaining() <= 0:  # no call starts once the budget is spent
                raise GangApiUnavailable(
                    f"no time left to delete PyTorchJob {namespace}/{name}",
                    unavailable_seconds=outage.seconds(),
                    last_error=outage.last_error,
                )
            return call()

        return bounded

    def ride(call: Callable[[], T]) -> T:
        return ride_out(
            in_time(call), outage, logger, sleep=lambda seconds: time.sleep(min(seconds, remaining()))
        )

    try:
        with hook.retries(hook.retry_policy.within(timeout)):
            ride(lambda: _delete_job(hook, name, namespace, uid))
            ride(lambda: _delete_podgroup(hook, name, namespace, uid))
            gone = ride(
                lambda: (
                    hook.wait_gone("pytorchjob", name, namespace, uid=uid, timeout=remaining())
                    and hook.wait_gone("podgroup", name, namespace, timeout=remaining())
                    and _pods_gone(hook, name, namespace, remaining())
                )
            )
    except GangApiUnavailable:
        gone = False
    if not gone:
        logger.warning(
            "PyTorchJob %s/%s not confirmed deleted after %.0fs; the orphan reaper finishes the job",
            namespace,
            name,
            timeout,
        )
    return gone


def _delete_job(hook: GangJobHook, name: str, namespace: str, uid: str | None) -> None:
    try:
        hook.delete_pytorchjob(name, namespace, propagation="Foreground", uid=uid)
    except GangApiError as error:
        if error.status != 409:
            raise
        log.info("PyTorchJob %s/%s now has another uid than %s: not ours, left alone", namespace, name, uid)


def _delete_podgroup(hook: GangJobHook, name: str, namespace: str, job_uid: str | None) -> None:
    """Delete the job's PodGroup by its own uid, unless another job of the same name owns it."""
    podgroup = hook.get_podgroup(name, namespace)
    if podgroup is None:
        return
    references = podgroup["metadata"].get("ownerReferences") or []
    if references and not owned_by(podgroup, job_uid):
        return  # another job's (a same-named job of someone else): never ours to delete
    try:
        hook.delete_podgroup(name, namespace, uid=podgroup["metadata"].get("uid"))
    except GangApiError as error:
        if error.status != 409:  # 409: replaced meanwhile, so not the one we looked at
            raise


def _pods_gone(hook: GangJobHook, name: str, namespace: str, seconds: float) -> bool:
    """The job's pods are gone (a Foreground job delete waits for them; this is the last look)."""
    deadline = time.monotonic() + seconds
    while hook.list_job_pods(name, namespace):
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
    return True
