"""`ChangeFeed`: list + watch of one job's PyTorchJob, PodGroup and pods, as one "something changed" signal.

Each kind is followed the way an informer follows it: list (for a resourceVersion), then watch
from there, resuming from the last event's (or bookmark's) version when the server ends the
stream, listing again after ``410 Gone``. A watch that cannot be opened or breaks is logged at
WARNING once per episode (and when it is back), retried with capped backoff, and meanwhile the
trigger polls: `ChangeFeed.healthy` tells it whether it may rely on the watches.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Literal

from airflow_gang.exceptions import GangApiError
from airflow_gang.outage import OutageLog

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook

WatchedKind = Literal["pytorchjob", "podgroup", "pod"]
WATCH_SECONDS = 60
RETRY_MAX_SECONDS = 30.0


class ChangeFeed:
    """Follow a job's objects; ``changed`` is set on every event (and after every re-list).

    :param hook: the trigger's hook (its client is shared by the three followers).
    :param name: the job's name (its PodGroup's too).
    :param namespace: their namespace.
    :param with_podgroup: also follow the PodGroup (not with ``gang_scheduling="disabled"``).
    :param log: where watch failures are reported.
    """

    def __init__(
        self, hook: AsyncGangJobHook, name: str, namespace: str, *, with_podgroup: bool, log: OutageLog
    ) -> None:
        self.hook = hook
        self.name = name
        self.namespace = namespace
        self.log = log
        self.changed = asyncio.Event()
        self._selectors: dict[WatchedKind, tuple[str | None, str | None]] = {
            "pytorchjob": (f"metadata.name={name}", None),
            "pod": (None, f"training.kubeflow.org/job-name={name}"),
        }
        if with_podgroup:
            self._selectors["podgroup"] = (f"metadata.name={name}", None)
        self._watching: dict[WatchedKind, bool] = dict.fromkeys(self._selectors, False)
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

    async def _follow(self, kind: WatchedKind) -> None:
        field, label = self._selectors[kind]
        failures = gone = 0

        def opened() -> None:
            nonlocal failures
            self._watching[kind] = True
            if failures:
                self.log.info("watch of %s for %s/%s is back", kind, self.namespace, self.name)
            failures = 0

        while True:
            try:
                _, version = await self.hook.list_with_version(
                    kind, self.namespace, field_selector=field, label_selector=label
                )
                self.changed.set()
                while True:
                    async for event in self.hook.watch(
                        kind,
                        self.namespace,
                        resource_version=version,
                        field_selector=field,
                        label_selector=label,
                        timeout_seconds=WATCH_SECONDS,
                        on_open=opened,
                    ):
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        gone = 0
                        if event.get("type") != "BOOKMARK":
                            self.changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # GangApiError mostly; anything else must not end the feed
                self._watching[kind] = False
                if isinstance(error, GangApiError) and error.status == 410:
                    # The version was compacted: list again, at once the first time; a server
                    # answering 410 to every fresh version must not spin this loop.
                    gone += 1
                    if gone > 1:
                        await asyncio.sleep(min(RETRY_MAX_SECONDS, 0.5 * gone))
                    continue
                failures += 1
                if failures == 1:
                    self.log.warning(
                        "watch of %s for %s/%s failed (%s); polling until it is back",
                        kind,
                        self.namespace,
                        self.name,
                        error,
                    )
                self.changed.set()  # a look now: the watch may have missed a change
                base = min(RETRY_MAX_SECONDS, 0.5 * 2.0 ** min(failures, 8))
                await asyncio.sleep(base / 2 + random.uniform(0, base / 2))
