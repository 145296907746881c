"""`eventually()`: wait for a condition instead of sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, message: str = "") -> T:
    """Call ``probe`` until it returns something truthy (returned) or ``timeout`` passes (AssertionError).

    Exceptions raised by ``probe`` count as "not yet" until the deadline, then surface.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = probe()
            if result:
                return result
            last_error = None
        except Exception as error:
            last_error = error
        if time.monotonic() >= deadline:
            detail = f": last error {last_error!r}" if last_error else ""
            raise AssertionError(f"condition not met within {timeout}s {message}{detail}")
        time.sleep(interval)
