"""Writes that go out together, as the real controllers' worker goroutines send them.

A controller that awaits one request at a time spends its round waiting on the API server; the
real vc-scheduler binds and updates statuses from goroutines, and the training-operator works
on many jobs at once. `in_parallel` starts the writes in the order given (so the server sees
them in about that order) with a bounded number in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

log = logging.getLogger(__name__)

WRITES_IN_FLIGHT = 16


async def in_parallel(writes: Iterable[Coroutine[Any, Any, Any]], limit: int = WRITES_IN_FLIGHT) -> None:
    """Await ``writes``, at most ``limit`` at once; the first failure propagates once all ended."""
    gate = asyncio.Semaphore(limit)

    async def gated(write: Coroutine[Any, Any, Any]) -> None:
        try:
            async with gate:
                await write
        finally:
            write.close()  # a no-op once awaited; silences a write cancelled before it started

    pending = list(writes)
    try:
        outcomes = await asyncio.gather(*(gated(write) for write in pending), return_exceptions=True)
    except BaseException:  # cancelled: writes whose turn never came were never started
        for write in pending:
            write.close()
        raise
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


class BackgroundWrites:
    """Status writes that go out while the controller goes on, one in flight per object.

    vc-scheduler's status updater runs beside its sessions: a session that waited for every
    PodGroup status and pod condition it changed would stretch its period under a long queue,
    and binding is what the next gang waits for. A write submitted for an object that has one
    in flight replaces any other waiting for it and runs after it: the object gets the latest
    state, never two writes at once. A write should read the cache when it runs (it may run a
    while after it was submitted). ``close()`` cancels what is still running.
    """

    def __init__(self, limit: int = WRITES_IN_FLIGHT) -> None:
        self._gate = asyncio.Semaphore(limit)
        self._in_flight: dict[object, asyncio.Task[None]] = {}
        self._next: dict[object, Callable[[], Coroutine[Any, Any, None]]] = {}

    def submit(self, key: object, write: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``write()`` for ``key`` now, or after the one in flight (replacing a waiting one)."""
        if key in self._in_flight:
            self._next[key] = write
            return
        task = asyncio.create_task(self._gated(write))
        self._in_flight[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))

    async def _gated(self, write: Callable[[], Coroutine[Any, Any, None]]) -> None:
        async with self._gate:
            await write()

    def _finished(self, key: object, task: asyncio.Task[None]) -> None:
        if self._in_flight.get(key) is task:
            del self._in_flight[key]
        if task.cancelled():
            return
        if task.exception() is not None:
            log.debug("background write %s failed: %s", key, task.exception())
        following = self._next.pop(key, None)
        if following is not None:
            self.submit(key, following)

    async def close(self) -> None:
        self._next.clear()
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._in_flight.clear()
