"""Retry an API call through transient failures: the server down, overloaded, or erring.

Reconcilers need none of this (their next round retries), but a kubelet writing a pod's status
in the middle of its lifecycle has no next round: like the real kubelet's status manager, it
keeps trying until the API server answers, with capped exponential backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp

from gang_sim.controllers.client import ApiError

T = TypeVar("T")
MAX_DELAY = 2.0


def is_transient(error: BaseException) -> bool:
    """Connection failures (refused, reset, timed out), 5xx and 429 may succeed if tried again."""
    if isinstance(error, ApiError):
        return error.status >= 500 or error.status == 429
    return isinstance(error, aiohttp.ClientError | OSError)


async def retry_transient(
    call: Callable[[], Awaitable[T]], *, still_wanted: Callable[[], bool] = lambda: True
) -> T | None:
    """``await call()`` until it succeeds (its result) or ``still_wanted()`` turns False (None).

    Non-transient errors propagate at once.
    """
    delay = 0.05
    while True:
        try:
            return await call()
        except (ApiError, aiohttp.ClientError, OSError) as error:
            if not is_transient(error):
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
        if not still_wanted():
            return None
