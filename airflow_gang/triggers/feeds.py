"""How a `GangJobTrigger` learns that its job may have changed, and whether it may skip a GET.

A feed has ``changed`` (an event the trigger waits on), ``healthy`` (changes arrive without
polling) and ``look()`` (a snapshot from memory, or None: read the objects with GETs). Three
exist: `SharedFeed` (the triggerer's `watch_cache.WatchCache`), `change_feed.ChangeFeed` (the
trigger's own watches) and `PollingFeed` (no watch at all).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.triggers.watch_cache import WatchCache


class Feed(Protocol):
    changed: asyncio.Event

    @property
    def healthy(self) -> bool: ...

    def look(self) -> GangSnapshot | None: ...

    async def stop(self) -> None: ...


class PollingFeed:
    """No watch: the trigger reads its objects every ``poll_interval``."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    @property
    def healthy(self) -> bool:
        return False

    def look(self) -> GangSnapshot | None:
        return None

    async def stop(self) -> None:
        return None


class SharedFeed:
    """One job's view of a shared `WatchCache`: woken by its own objects' events only."""

    def __init__(
        self,
        cache: WatchCache,
        name: str,
        uid: str,
        gang_scheduling: str,
        job_kind: JobKind = DEFAULT_JOB_KIND,
    ) -> None:
        self.cache = cache
        self.job_kind = job_kind
        self.uid = uid
        self.gang_scheduling = gang_scheduling
        self.subscription = cache.subscribe(name)
        self.changed = self.subscription.changed

    @property
    def healthy(self) -> bool:
        """The cache is current and holds the job: a job it does not follow (no provider labels)
        or has not seen yet is polled every ``poll_interval`` instead."""
        return self.cache.healthy and self.cache.snapshot_job(self.subscription.name) is not None

    def look(self) -> GangSnapshot | None:
        """The job as the cache holds it; None while the cache is not current, or when the job is
        not in it (gone, or not there yet): a missing job is confirmed by a GET, never assumed."""
        if not self.cache.healthy:
            return None
        job, podgroup, pods = self.cache.snapshot(self.subscription.name)
        if job is None or job["metadata"].get("uid") != self.uid:
            return None
        if self.gang_scheduling == "disabled":
            podgroup = None
        return GangSnapshot.of(job, podgroup, pods, self.gang_scheduling, self.job_kind)

    async def stop(self) -> None:
        self.cache.unsubscribe(self.subscription)
