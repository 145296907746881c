"""Stopping a foreground simulator command: SIGINT/SIGTERM to an event, and waiting on it."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the yielded event while the block runs.

    Installed before anything starts, so a stop requested while the servers are still coming
    up (a supervisor's SIGTERM right after the first answer) ends the command cleanly instead
    of killing it midway.
    """
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def wait_until(stop: threading.Event) -> None:
    while not stop.wait(1.0):
        pass
