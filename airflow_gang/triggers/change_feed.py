"""`ChangeFeed`: list + watch of one job's PyTorchJob, PodGroup and pods, as one "something changed" signal.

Each kind is followed the way an informer follows it (`list_watch.ListWatch`: list, then watch
from there, resume, list again after ``410 Gone``). A watch that cannot be opened or breaks is logged at
WARNING once per episode (and when it is back), retried with capped backoff, and meanwhile the
trigger polls: `ChangeFeed.healthy` tells it whether it may rely on the watches.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.outage import OutageLog
from airflow_gang.triggers.list_watch import ListWatch, WatchTrouble

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

WatchedKind = str  # a job kind's `JobKind.watch_name`, "podgroup" or "pod"
WATCH_SECONDS = 60


class ChangeFeed:
    """Follow a job's objects; ``changed`` is set on every event (and after every re-list).

    :param hook: the trigger's hook (its client is shared by the three followers).
    :param name: the job's name (its PodGroup's too).
    :param namespace: their namespace.
    :param with_podgroup: also follow the PodGroup (not with ``gang_scheduling="disabled"``).
    :param uid: the job's uid, for a kind whose PodGroup is named after it (Volcano's Job).
    :param log: where watch failures are reported.
    :param job_kind: the job's kind (which resource, which pod label).
    :param clock: monotonic seconds, for the reminders while a watch fails (tests pass a fake).
    """

    def __init__(
        self,
        hook: AsyncGangJobHook,
        name: str,
        namespace: str,
        *,
        with_podgroup: bool,
        log: OutageLog,
        uid: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        job_kind: JobKind = DEFAULT_JOB_KIND,
    ) -> None:
        self.hook = hook
        self.name = name
        self.namespace = namespace
        self.log = log
        self.changed = asyncio.Event()
        self._selectors: dict[WatchedKind, tuple[str | None, str | None]] = {
            job_kind.watch_name: (f"metadata.name={name}", None),
            "pod": (None, job_kind.pod_selector(name)),
        }
        if with_podgroup:
            self._selectors["podgroup"] = (f"metadata.name={job_kind.podgroup_name(name, uid)}", None)
        self._watching: dict[WatchedKind, bool] = dict.fromkeys(self._selectors, False)
        self.trouble = {
            kind: WatchTrouble(
                log, f"watch of {kind} for {namespace}/{name}", "polling until it is back", clock=clock
            )
            for kind in self._selectors
        }
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def healthy(self) -> bool:
        """Every follower is watching: events arrive without polling."""
        return all(self._watching.values())

    def look(self) -> None:
        """Never from memory: the trigger reads its three objects on every change."""
        return None

    def start(self) -> ChangeFeed:
        self._tasks = [asyncio.create_task(self._follow(kind)) for kind in self._selectors]
        return self

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def failed(self, kind: WatchedKind, error: Exception) -> None:
        """A watch of ``kind`` failed: say so (once per episode, reminders), and look now."""
        self.trouble[kind].failed(error)
        self.changed.set()  # a look now: the watch may have missed a change

    async def _follow(self, kind: WatchedKind) -> None:
        field, label = self._selectors[kind]

        def watching(on: bool) -> None:
            self._watching[kind] = on

        await ListWatch(
            self.hook,
            kind,
            self.namespace,
            field_selector=field,
            label_selector=label,
            watch_seconds=WATCH_SECONDS,
            on_list=lambda _items: self.changed.set(),
            on_event=lambda _type, _obj: self.changed.set(),
            on_watching=watching,
            on_failure=lambda _failures, error: self.failed(kind, error),
            on_back=self.trouble[kind].back,
            relist_after_failure=True,
        ).run()
