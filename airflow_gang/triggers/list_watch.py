"""`ListWatch`: the informer loop both the per-trigger `ChangeFeed` and the shared `WatchCache` run.

List (for a resourceVersion and the current objects), then watch from there, resuming from the
last event's or bookmark's version when the server ends the stream, and listing again after
``410 Gone`` — at once the first time, then more slowly, so a server answering 410 to every
fresh version cannot spin the loop. Any other failure is retried with capped, jittered
backoff (both rules in `airflow_gang.model.watch_rules`, shared with the worker's synchronous
`airflow_gang.jobs.job_watch`); what a failure means (polling meanwhile) is the owner's to
decide through the callbacks, and nothing but cancellation ends the loop. Owners say it with
`WatchTrouble`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.model.outage import may_mean_moved
from airflow_gang.model.watch_rules import WatchTrouble, relist_delay, retry_delay

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook
    from airflow_gang.hooks.kinds import WatchKind

JsonDict = dict[str, Any]
__all__ = ["ListWatch", "WatchTrouble"]


# A stream that broke after at least this long is resumed at once, without a failure (see run).
QUIET_RESUME_AFTER_SECONDS = 1.0


def _ignore(*_: object) -> None:
    return None


def _broke_after_a_while(error: Exception, opened_at: float | None) -> bool:
    """A watch stream that was open for `QUIET_RESUME_AFTER_SECONDS` and then broke (connection
    lost, read timed out): not a server that refuses or answers 410."""
    return (
        opened_at is not None
        and time.monotonic() - opened_at >= QUIET_RESUME_AFTER_SECONDS
        and isinstance(error, GangApiError)
        and error.status is None
    )


@dataclass
class ListWatch:
    """Follow ``kind`` objects of ``namespace`` (narrowed by the selectors) until cancelled.

    :param on_list: every fresh list's items (the first one, and after a 410 or with
        ``relist_after_failure``).
    :param on_event: each ADDED/MODIFIED/DELETED event as (type, object); bookmarks only move
        the resume version.
    :param on_watching: True once a watch stream is open, False when following breaks.
    :param on_failure: (consecutive failures, error) for each failure other than a 410; 1 starts
        an episode.
    :param on_back: a watch opened again after failures.
    :param on_page: each page of a list read (a long list making progress).
    :param relist_after_failure: list again after a failure instead of resuming the watch from
        the last version (a per-job feed has little to list; a namespace-wide cache a lot).
    """

    hook: AsyncGangJobHook
    kind: WatchKind
    namespace: str
    field_selector: str | None = None
    label_selector: str | None = None
    watch_seconds: int = 60
    on_list: Callable[[list[JsonDict]], None] = _ignore
    on_event: Callable[[str, JsonDict], None] = _ignore
    on_watching: Callable[[bool], None] = _ignore
    on_failure: Callable[[int, Exception], None] = _ignore
    on_back: Callable[[], None] = _ignore
    on_page: Callable[[], None] = _ignore
    relist_after_failure: bool = False
    lists: int = field(default=0, init=False)
    watches: int = field(default=0, init=False)

    async def run(self) -> None:
        failures = gone = 0
        version = ""
        opened_at: float | None = None  # when the current stream opened; None: none is open

        def opened() -> None:
            nonlocal failures, opened_at
            self.watches += 1
            opened_at = time.monotonic()
            if failures:
                self.on_back()
            failures = 0
            self.on_watching(True)

        while True:
            generation = self.hook.connection_generation
            try:
                if not version:
                    items, version = await self.hook.list_with_version(
                        self.kind,
                        self.namespace,
                        field_selector=self.field_selector,
                        label_selector=self.label_selector,
                        on_page=self.on_page,
                    )
                    self.lists += 1
                    self.on_list(items)
                async for event in self.hook.watch(
                    self.kind,
                    self.namespace,
                    resource_version=version,
                    field_selector=self.field_selector,
                    label_selector=self.label_selector,
                    timeout_seconds=self.watch_seconds,
                    on_open=opened,
                ):
                    obj = event["object"] or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    gone = 0
                    if event["type"] != "BOOKMARK":
                        self.on_event(event["type"], obj)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # GangApiError mostly; nothing may end the loop
                streamed, opened_at = opened_at, None
                if _broke_after_a_while(error, streamed) and not failures:
                    # A stream that worked for a while and broke: resumed at once from the last
                    # version, as an informer resumes, with the store still good. Only a resume
                    # that fails makes the owner poll.
                    continue
                if isinstance(error, GangApiError) and error.status == 410:
                    version = ""  # compacted: list again
                    gone += 1
                    await asyncio.sleep(relist_delay(gone))
                    continue
                if may_mean_moved(error) and await self.hook.refresh_connection(since=generation):
                    version = ""  # another server now, perhaps another cluster: list afresh
                    continue
                failures += 1
                self.on_watching(False)
                if self.relist_after_failure:
                    version = ""
                self.on_failure(failures, error)
                await asyncio.sleep(retry_delay(failures))
