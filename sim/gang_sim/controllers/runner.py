"""The loop every controller shares: wake on cache changes (or a period), reconcile, repeat.

A controller states which kinds it watches and implements ``reconcile()`` against the cache;
the runner coalesces bursts of notifications into one reconcile, and runs it again after a
failure with backoff. Writes are idempotent (409 on create means done; a conflict just waits
for the next round), so reconciling the same state twice is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import ClassVar

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.informer import Cache
from gang_sim.controllers.kinds import Kind

log = logging.getLogger(__name__)


class Controller:
    """Base class: subclasses set ``name`` and ``kinds`` and implement ``reconcile``."""

    name: ClassVar[str] = "controller"
    kinds: ClassVar[tuple[Kind, ...]] = ()

    def __init__(self, client: KubeClient, cache: Cache, period: float | None = None) -> None:
        self.client = client
        self.cache = cache
        self.period = period
        self.wakeup = asyncio.Event()
        self.reconciles = 0
        for kind in self.kinds:
            self.follow(kind)

    def follow(self, kind: Kind) -> None:
        """Wake on changes of ``kind`` that `wants` accepts (and always after a re-list)."""
        self.cache[kind].subscribe(functools.partial(self._offered, kind))

    def _offered(self, kind: Kind, obj: JsonDict | None) -> None:
        if obj is None or self.wants(kind, obj):
            self.wakeup.set()

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        """Whether a change of ``obj`` concerns this controller; every change does by default."""
        return True

    async def reconcile(self) -> None:
        raise NotImplementedError

    def requeue(self) -> None:
        """Ask for another round soon (after a conflict, or while waiting on time)."""
        self.wakeup.set()

    async def run(self) -> None:
        await self.cache.wait_synced()
        failures = 0
        while True:
            timeout = self.period
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
            # lands as the wakeup fires, and the controller would not stop with its cluster.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.wakeup.wait()
            self.wakeup.clear()
            started = time.monotonic()
            try:
                await self.reconcile()
                failures = 0
            except asyncio.CancelledError:
                raise
            except (ApiError, aiohttp.ClientError, OSError) as error:
                failures += 1
                log.debug("%s: reconcile failed (%s); retrying", self.name, error)
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
                self.wakeup.set()
            self.reconciles += 1
            log.debug("%s: reconciled in %.3fs", self.name, time.monotonic() - started)
