"""`GangJobTrigger`: waits asynchronously for a gang's admission, then (optionally) its completion.

It follows the job, its PodGroup and its pods with list + watch (re-listing after ``410 Gone``,
falling back to polling every ``poll_interval`` when a watch fails), re-evaluates
`airflow_gang.gang_state.gang_status` on every change, and yields exactly one event:

``{status: admitted|succeeded|failed|admission_timeout|lost|error, name, namespace, uid, phase,
message, timeline, ...}``.

Deadlines travel as absolute UTC times, so a triggerer restart does not reset the clock. On an
admission timeout the trigger deletes the job and its PodGroup and confirms they are gone before
it reports, so a retry starts clean. ``on_kill`` (Airflow 3.3: the user marked the task failed or
success, or cleared it) deletes the job and PodGroup too.

One deferral covers the whole wait of a try: phase changes go to the task log from here (the
trigger's log is the try's log), never back to a worker. The event is held until ``not_before``
(the deferral moment plus ``[gang] resume_hold_seconds``): Airflow 3.3.2 fails a task whose
resumed try is already queued or running when the scheduler reads the executor's "success" of
the deferring try (apache/airflow#72716, #71580), and a trigger that fires seconds after the
deferral hits that window. The event's timeline comes from the cluster's own objects (bind
times, conditions, ``completionTime``), not from when this trigger happened to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_gang.exceptions import GangApiError
from airflow_gang.gang_state import GangPhase, GangSnapshot
from airflow_gang.timeline import finished_at

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

JsonDict = dict[str, Any]
WaitFor = Literal["admission", "completion", "both"]
_WATCH_SECONDS = 60
_DELETE_CONFIRM_SECONDS = 60.0


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _parse(moment: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(moment) if moment else None


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


class GangJobTrigger(BaseTrigger):
    """Wait for a gang-scheduled PyTorchJob without holding a worker slot.

    :param name: PyTorchJob name (its PodGroup has the same name).
    :param namespace: namespace of both.
    :param uid: the job's uid; a job of the same name with another uid counts as lost.
    :param wait_for: ``admission``, ``completion``, or ``both`` (admission then completion).
    :param gang_scheduling: ``provider``, ``training-operator`` or ``disabled``.
    :param admission_deadline: ISO UTC time after which a job still queued is deleted and
        ``admission_timeout`` is reported; None waits forever.
    :param execution_deadline: ISO UTC time after which ``error`` is reported (the task's
        ``execution_timeout``); the job is left to the operator's cleanup.
    :param submitted_at: ISO UTC submission time (for the timeline).
    :param admitted_at: ISO UTC admission time if already known (``completion`` waits).
    :param poll_interval: seconds between re-checks when no watch event arrives.
    :param kubernetes_conn_id: Airflow connection (cncf ``kubernetes`` type).
    :param hook_kwargs: `AsyncGangJobHook` keyword arguments resolved on the worker
        (``GangJobHook.async_hook_kwargs()``: the connection's extras and kubeconfig content), so
        the triggerer needs neither the metadata database nor the worker's files.
    :param delete_on_kill: delete job and PodGroup when the user kills the deferred task.
    :param not_before: ISO UTC time before which no event is fired (the deferral moment plus
        ``[gang] resume_hold_seconds``; see the module docstring for the Airflow race it avoids).
    :param report_phase_changes: ignored; accepted so triggers serialized by 0.1 still load
        (they ended on every phase change; phase changes are now logged here instead).
    :param reported_phase: ignored, as ``report_phase_changes``.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        uid: str,
        *,
        wait_for: WaitFor = "both",
        gang_scheduling: str = "provider",
        admission_deadline: str | None = None,
        execution_deadline: str | None = None,
        submitted_at: str | None = None,
        admitted_at: str | None = None,
        poll_interval: float = 10.0,
        kubernetes_conn_id: str | None = "kubernetes_default",
        hook_kwargs: dict[str, Any] | None = None,
        delete_on_kill: bool = True,
        not_before: str | None = None,
        report_phase_changes: bool = False,
        reported_phase: str | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.wait_for = wait_for
        self.gang_scheduling = gang_scheduling
        self.admission_deadline = admission_deadline
        self.execution_deadline = execution_deadline
        self.submitted_at = submitted_at
        self.admitted_at = admitted_at
        self.poll_interval = poll_interval
        self.kubernetes_conn_id = kubernetes_conn_id
        self.hook_kwargs = hook_kwargs
        self.delete_on_kill = delete_on_kill
        self.not_before = not_before
        del report_phase_changes, reported_phase  # see the docstring
        self._event_sent = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "wait_for": self.wait_for,
                "gang_scheduling": self.gang_scheduling,
                "admission_deadline": self.admission_deadline,
                "execution_deadline": self.execution_deadline,
                "submitted_at": self.submitted_at,
                "admitted_at": self.admitted_at,
                "poll_interval": self.poll_interval,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "hook_kwargs": self.hook_kwargs,
                "delete_on_kill": self.delete_on_kill,
                "not_before": self.not_before,
            },
        )

    async def hook(self) -> AsyncGangJobHook:
        """The async hook, its module imported in a thread.

        The triggerer imports this trigger's module inside its event loop; kubernetes_asyncio and
        the cncf hooks take most of a second to import, which would stall every other trigger
        (the "async thread was blocked" warning). So this module imports no client at its top.
        """
        module = await asyncio.to_thread(importlib.import_module, "airflow_gang.hooks.gang_async")
        kwargs = dict(self.hook_kwargs or {})
        kwargs.setdefault("conn_id", self.kubernetes_conn_id)
        hook: AsyncGangJobHook = module.AsyncGangJobHook(**kwargs)
        return hook

    # --- the wait ----------------------------------------------------------------------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = await self.hook()
        changed = asyncio.Event()
        followers = [
            asyncio.create_task(
                self._follow(hook, "pytorchjob", changed, field=f"metadata.name={self.name}")
            ),
            asyncio.create_task(
                self._follow(hook, "pod", changed, label=f"training.kubeflow.org/job-name={self.name}")
            ),
        ]
        if self.gang_scheduling != "disabled":
            followers.append(
                asyncio.create_task(
                    self._follow(hook, "podgroup", changed, field=f"metadata.name={self.name}")
                )
            )
        try:
            try:
                event = await self._wait(hook, changed)
            except GangApiError as error:
                event = self._event("error", None, f"{error}")
            finally:
                for follower in followers:
                    follower.cancel()
                await asyncio.gather(*followers, return_exceptions=True)
            await self._hold()
        finally:
            await hook.close()
        self._event_sent = True
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def _hold(self) -> None:
        """Fire no event before ``not_before`` (apache/airflow#72716: see the module docstring)."""
        not_before = _parse(self.not_before)
        if not_before is None:
            return
        wait = (not_before - utc_now()).total_seconds()
        if wait > 0:
            self.log.info(
                "holding the event %.1fs so the scheduler settles the deferral first (apache/airflow#72716)",
                wait,
            )
            await asyncio.sleep(wait)

    async def _wait(self, hook: AsyncGangJobHook, changed: asyncio.Event) -> dict[str, Any]:
        waiting_for_admission = self.wait_for in ("admission", "both") and self.admitted_at is None
        last_line = ""
        while True:
            changed.clear()
            seen = await self._observe(hook)
            status = seen.status
            line = status.describe()
            if line != last_line:
                self.log.info("gang job %s/%s: %s", self.namespace, self.name, line)
                last_line = line
            if status.phase is GangPhase.LOST:
                return self._event(
                    "lost", seen, f"PyTorchJob {self.namespace}/{self.name} was deleted while waiting"
                )
            if status.admitted and self.admitted_at is None and seen.job is not None:
                self.admitted_at = seen.admitted_at()
                self.log.info(
                    "gang admitted job=%s/%s queue=%s at %s",
                    self.namespace,
                    self.name,
                    status.queue,
                    self.admitted_at,
                )
            if waiting_for_admission and status.admitted:
                waiting_for_admission = False
                if self.wait_for == "admission":
                    return self._event("admitted", seen, "")
            if status.finished:
                return self._event(status.phase.value, seen, status.message)
            now = utc_now()
            admission_deadline = _parse(self.admission_deadline)
            if waiting_for_admission and admission_deadline is not None and now >= admission_deadline:
                await self._delete(hook)
                return self._event(
                    "admission_timeout",
                    seen,
                    f"gang not admitted by {self.admission_deadline}: {status.describe()}",
                )
            execution_deadline = _parse(self.execution_deadline)
            if execution_deadline is not None and now >= execution_deadline:
                return self._event("error", seen, f"execution_timeout reached at {self.execution_deadline}")
            deadlines = [
                d for d in (admission_deadline if waiting_for_admission else None, execution_deadline) if d
            ]
            timeout = min([self.poll_interval, *((d - now).total_seconds() for d in deadlines)])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(0.0, timeout))

    async def _observe(self, hook: AsyncGangJobHook) -> GangSnapshot:
        job = await hook.get_pytorchjob(self.name, self.namespace)
        if job is not None and job["metadata"].get("uid") != self.uid:
            job = None  # a new job under the same name is not ours
        podgroup = (
            await hook.get_podgroup(self.name, self.namespace) if self.gang_scheduling != "disabled" else None
        )
        pods = await hook.list_job_pods(self.name, self.namespace) if job is not None else []
        return GangSnapshot.of(job, podgroup, pods, self.gang_scheduling)

    async def _follow(
        self,
        hook: AsyncGangJobHook,
        kind: Literal["pytorchjob", "podgroup", "pod"],
        changed: asyncio.Event,
        *,
        field: str | None = None,
        label: str | None = None,
    ) -> None:
        """List then watch one kind, setting ``changed`` on every event; re-list after 410."""
        while True:
            try:
                _, version = await hook.list_with_version(
                    kind, self.namespace, field_selector=field, label_selector=label
                )
                changed.set()
                while True:
                    async for event in hook.watch(
                        kind,
                        self.namespace,
                        resource_version=version,
                        field_selector=field,
                        label_selector=label,
                        timeout_seconds=_WATCH_SECONDS,
                    ):
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        if event.get("type") != "BOOKMARK":
                            changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the poll in _wait still runs; back off and watch again
                self.log.debug("watch of %s %s/%s interrupted: %s", kind, self.namespace, self.name, error)
                await asyncio.sleep(min(self.poll_interval, 5.0))

    def _event(self, status: str, seen: GangSnapshot | None, message: str) -> dict[str, Any]:
        gang = seen.status if seen else None
        finished = finished_at(seen.job) if seen is not None and seen.job is not None else None
        return {
            "status": status,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "phase": gang.phase.value if gang else None,
            "podgroup_phase": gang.podgroup_phase if gang else None,
            "queue": gang.queue if gang else None,
            "message": message,
            # What the task needs to finish the wait, carried in the event itself: dag.test()
            # resumes a task with the event alone, without the defer kwargs.
            "wait": {
                "wait_for": self.wait_for,
                "gang_scheduling": self.gang_scheduling,
                "admission_deadline": self.admission_deadline,
                "execution_deadline": self.execution_deadline,
            },
            # The task state store's ``progress`` entry, written by the task when it resumes.
            "progress": gang.progress(utc_now().isoformat()) if gang else None,
            "timeline": {
                "submitted_at": self.submitted_at,
                "admitted_at": self.admitted_at,
                "finished_at": _iso(finished) if gang is not None and gang.finished else None,
            },
        }

    async def _delete(self, hook: AsyncGangJobHook) -> None:
        await hook.delete_pytorchjob(self.name, self.namespace, propagation="Foreground", uid=self.uid)
        if self.gang_scheduling != "disabled":
            await hook.delete_podgroup(self.name, self.namespace)
        deadline = asyncio.get_running_loop().time() + _DELETE_CONFIRM_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            job = await hook.get_pytorchjob(self.name, self.namespace)
            podgroup = (
                await hook.get_podgroup(self.name, self.namespace)
                if self.gang_scheduling != "disabled"
                else None
            )
            pods = await hook.list_job_pods(self.name, self.namespace)
            if job is None and podgroup is None and not pods:
                return
            await asyncio.sleep(0.2)
        self.log.warning(
            "job %s/%s not fully deleted after %.0fs", self.namespace, self.name, _DELETE_CONFIRM_SECONDS
        )

    async def on_kill(self) -> None:
        """The user marked the deferred task failed/success or cleared it: delete what we submitted."""
        if self._event_sent or not self.delete_on_kill:
            return
        self.log.info("task killed: deleting PyTorchJob %s/%s and its PodGroup", self.namespace, self.name)
        hook = await self.hook()
        try:
            await self._delete(hook)
        finally:
            await hook.close()

