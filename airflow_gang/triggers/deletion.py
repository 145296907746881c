"""Deleting a gang job from the triggerer (admission timeout, a person's kill), confirmed by a watch.

The asynchronous twin of `airflow_gang.operators.cleanup.delete_gang`, with the same rules:
uid-guarded Foreground deletes, a PodGroup another job owns is left alone, confirmation by a
watch (a one-second poll only while watches fail), an outage ridden out within the budget, and
the budget kept also when a request hangs (the whole deletion runs under ``asyncio.timeout``).
It imports no Kubernetes client (the hook arrives as an argument), so the trigger module that
the triggerer imports on its event loop stays light.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.gang_state import owned_by
from airflow_gang.outage import Outage, OutageLog, aride_out

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


async def delete_gang(
    hook: AsyncGangJobHook,
    name: str,
    namespace: str,
    uid: str | None,
    *,
    gang_scheduling: str,
    timeout: float,
    log: OutageLog,
) -> bool:
    """Delete the job of ``uid`` and its PodGroup; whether all was confirmed gone within ``timeout``.

    Never runs longer than ``timeout`` (a hung request is cancelled at its end: False).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    outage = Outage(f"the deletion of PyTorchJob {namespace}/{name}", timeout=timeout)

    def remaining() -> float:
        return max(0.0, deadline - loop.time())

    async def delete_job() -> None:
        try:
            await hook.delete_pytorchjob(name, namespace, propagation="Foreground", uid=uid)
        except GangApiError as error:
            if error.status != 409:  # 409: the name now holds another job, not ours
                raise

    async def delete_podgroup() -> None:
        podgroup = await hook.get_podgroup(name, namespace)
        if podgroup is None:
            return
        references = podgroup["metadata"].get("ownerReferences") or []
        if references and not owned_by(podgroup, uid):
            return
        try:
            await hook.delete_podgroup(name, namespace, uid=podgroup["metadata"].get("uid"))
        except GangApiError as error:
            if error.status != 409:
                raise

    async def confirmed() -> bool:
        if not await hook.wait_gone("pytorchjob", name, namespace, uid=uid, timeout=remaining()):
            return False
        if gang_scheduling != "disabled" and not await hook.wait_gone(
            "podgroup", name, namespace, timeout=remaining()
        ):
            return False
        while await hook.list_job_pods(name, namespace):
            if remaining() <= 0:
                return False
            await asyncio.sleep(1.0)
        return True

    try:
        async with asyncio.timeout(timeout):
            await aride_out(delete_job, outage, log)
            if gang_scheduling != "disabled":
                await aride_out(delete_podgroup, outage, log)
            return await aride_out(confirmed, outage, log)
    except (GangApiUnavailable, TimeoutError):
        return False
