"""Writes that go out together, as the real controllers' worker goroutines send them.

A controller that awaits one request at a time spends its round waiting on the API server; the
real vc-scheduler binds and updates statuses from goroutines, and the training-operator works
on many jobs at once. `in_parallel` starts the writes in the order given (so the server sees
them in about that order) with a bounded number in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any

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
