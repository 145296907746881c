"""Deleting a gang job from the triggerer (admission timeout, a person's kill): the async driver of
`airflow_gang.jobs.deletion`'s plan (its rules are there).

Confirmed by a watch (a one-second poll only while watches fail), an outage ridden out within the
budget, and the budget kept also when a request hangs (the whole deletion runs under
``asyncio.timeout``). It imports no Kubernetes client (the hook arrives as an argument), so the
trigger module that the triggerer imports on its event loop stays light.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.jobs.deletion import Step, deletion_plan, leftovers, not_ours, podgroup_to_delete
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.outage import Outage, OutageLog, aride_out

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

JsonDict = dict[str, Any]
# Left of Airflow's ``[triggerer] on_kill_timeout`` for the triggerer to log and move on.
ON_KILL_MARGIN_SECONDS = 5.0


def on_kill_budget_seconds() -> float:
    """Seconds `GangJobTrigger.on_kill` may spend: ``[triggerer] on_kill_timeout`` less a margin.

    Airflow 3.3's triggerer cancels ``on_kill`` after ``on_kill_timeout`` (30 s by default); the
    deletion is cut a little earlier so it ends (and says what it left) on its own terms. What is
    not confirmed gone by then is the orphan reaper's.
    """
    from airflow.configuration import conf

    limit = conf.getfloat("triggerer", "on_kill_timeout", fallback=30.0)
    return max(limit / 2, limit - ON_KILL_MARGIN_SECONDS)


async def delete_for_kill(
    open_hook: Callable[[], Awaitable[AsyncGangJobHook]],
    delete: Callable[[AsyncGangJobHook, float], Awaitable[bool]],
    where: str,
    log: OutageLog,
) -> None:
    """A killed trigger's deletion of its job, bounded by `on_kill_budget_seconds` (the connection
    lookup included); says so when the job was not seen gone within it."""
    budget = on_kill_budget_seconds()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget
    gone = False
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(budget):
            hook = await open_hook()
            try:
                log.info("task killed: deleting %s", where)
                gone = await delete(hook, max(0.0, deadline - loop.time()))
            finally:
                await hook.close()
    if not gone:
        log.warning(
            "%s not confirmed deleted within %.0fs ([triggerer] on_kill_timeout less a margin); "
            "the orphan reaper finishes the job",
            where,
            budget,
        )


async def delete_gang(
    hook: AsyncGangJobHook,
    name: str,
    namespace: str,
    uid: str | None,
    *,
    gang_scheduling: str,
    timeout: float,
    log: OutageLog,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> bool:
    """Delete the job of ``uid`` and what it made; whether all was confirmed gone within ``timeout``.

    Never runs longer than ``timeout`` (a hung request is cancelled at its end: False).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    outage = Outage(f"the deletion of {job_kind.kind} {namespace}/{name}", timeout=timeout)
    plan = deletion_plan(gang_scheduling, job_kind)
    podgroup_name = job_kind.podgroup_name(name, uid)

    def remaining() -> float:
        return max(0.0, deadline - loop.time())

    async def delete_job() -> bool:
        try:
            propagation = job_kind.deletion_propagation
            await hook.delete_job(job_kind, name, namespace, propagation=propagation, uid=uid)
        except GangApiError as error:
            if not not_ours(error):
                raise
        return True

    async def delete_podgroup() -> bool:
        podgroup_uid = podgroup_to_delete(await hook.get_podgroup(podgroup_name, namespace), uid)
        if podgroup_uid is not None:
            try:
                await hook.delete_podgroup(podgroup_name, namespace, uid=podgroup_uid)
            except GangApiError as error:
                if not not_ours(error):
                    raise
        return True

    async def pods_left() -> list[str]:
        return leftovers(None, [], await hook.list_job_pods(name, namespace, job_kind))

    async def anything_left() -> list[str]:
        gang = Step.CONFIRM_PODGROUP_GONE in plan
        podgroup = await hook.get_podgroup(podgroup_name, namespace) if gang else None
        children = await hook.list_job_children(job_kind, name, namespace)
        return leftovers(podgroup, children, await hook.list_job_pods(name, namespace, job_kind))

    def until_none(look: Callable[[], Awaitable[list[str]]]) -> Callable[[], Awaitable[bool]]:
        async def confirmed() -> bool:
            while await look():
                if remaining() <= 0:
                    return False
                await asyncio.sleep(min(1.0, remaining()))
            return True

        return confirmed

    steps: dict[Step, Callable[[], Awaitable[bool]]] = {
        Step.DELETE_JOB: delete_job,
        Step.DELETE_PODGROUP: delete_podgroup,
        Step.CONFIRM_JOB_GONE: lambda: hook.wait_gone(
            job_kind.watch_name, name, namespace, uid=uid, timeout=remaining()
        ),
        Step.CONFIRM_PODGROUP_GONE: lambda: hook.wait_gone(
            "podgroup", podgroup_name, namespace, timeout=remaining()
        ),
        Step.CONFIRM_PODS_GONE: until_none(pods_left),
        Step.CONFIRM_NOTHING_LEFT: until_none(anything_left),
    }
    try:
        async with asyncio.timeout(timeout):
            for step in plan:
                if not await aride_out(steps[step], outage, log):
                    return False
            return True
    except (GangApiUnavailable, TimeoutError):
        return False
