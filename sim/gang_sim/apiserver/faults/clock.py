"""One background thread that runs timed fault steps in order (outages, deletions, node failures).

Steps run on this thread, never on the API server's event loop: an outage stops that loop, and
whoever stops it must not be running on it. A new schedule replaces the pending one at once
(`replace` never blocks), and because a single thread runs every step, closing and reopening the
listener can never race each other.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

Step = tuple[float, Callable[[], None]]  # (seconds from now, action)


class FaultClock:
    """Runs ``(delay, action)`` steps at their time; `replace` swaps the schedule, `stop` ends it."""

    def __init__(self, name: str = "airflow-gang-faults") -> None:
        self._name = name
        self._condition = threading.Condition()
        self._pending: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def replace(self, steps: Iterable[Step]) -> None:
        """Drop every pending step and schedule ``steps``, their delays counted from now."""
        now = time.monotonic()
        with self._condition:
            if self._stopped:
                return
            self._pending = [(now + delay, next(self._order), action) for delay, action in steps]
            heapq.heapify(self._pending)
            if self._thread is None and self._pending:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._condition.notify_all()

    def stop(self, timeout: float = 15.0) -> None:
        """Drop pending steps and wait for a running one to finish."""
        with self._condition:
            self._stopped = True
            self._pending = []
            self._condition.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopped:
                    wait = self._pending[0][0] - time.monotonic() if self._pending else None
                    if wait is not None and wait <= 0:
                        break
                    self._condition.wait(wait)
                if self._stopped:
                    return
                _, _, action = heapq.heappop(self._pending)
            try:
                action()
            except Exception:  # one failed step must not stop the ones after it
                log.exception("fault injection: a timed fault failed")
