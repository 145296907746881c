"""Container log storage behind ``pods/{name}/log``.

A real API server proxies logs from the kubelet; the simulator has no container runtime, so
whoever "runs" a pod (the simulator's kubelet controller, an ordinary API client) appends
lines through the simulator-only endpoint ``POST /sim/v1/namespaces/{ns}/pods/{name}/log``
(see ``subresources.py``) and readers use the standard ``GET .../pods/{name}/log``. Lines are
kept per pod UID and container, so a pod recreated under the same name starts empty; each
container keeps its newest ``max_lines`` lines. Followers wait on an asyncio event woken by
appends and by any change of their pod (the store notifies), never by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from collections import deque
from dataclasses import dataclass

from airflow_gang.sim.apiserver.objects import rfc3339_nano, utc_now


@dataclass(frozen=True)
class LogLine:
    seq: int
    time: dt.datetime
    text: str

    def render(self, timestamps: bool) -> str:
        return f"{rfc3339_nano(self.time)} {self.text}\n" if timestamps else f"{self.text}\n"


class _Waiter:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.event = asyncio.Event()
        self.thread = threading.get_ident()

    def wake(self) -> None:
        if threading.get_ident() == self.thread:
            self.event.set()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                self.loop.call_soon_threadsafe(self.event.set)


class PodLogs:
    def __init__(self, max_lines: int = 100_000):
        self.max_lines = max_lines
        self._lock = threading.Lock()
        self._lines: dict[tuple[str, str], deque[LogLine]] = {}
        self._seq = 0
        self._waiters: dict[str, set[_Waiter]] = {}

    def append(self, pod_uid: str, container: str, lines: list[str], when: dt.datetime | None = None) -> int:
        """Store lines (one per element, trailing newlines stripped); returns how many."""
        moment = when or utc_now()
        with self._lock:
            buffer = self._lines.setdefault((pod_uid, container), deque(maxlen=self.max_lines))
            for text in lines:
                self._seq += 1
                buffer.append(LogLine(self._seq, moment, text.rstrip("\n")))
        self.wake(pod_uid)
        return len(lines)

    def read(self, pod_uid: str, container: str, after_seq: int = 0) -> list[LogLine]:
        with self._lock:
            return [line for line in self._lines.get((pod_uid, container), ()) if line.seq > after_seq]

    def has_lines(self, pod_uid: str, container: str) -> bool:
        with self._lock:
            return bool(self._lines.get((pod_uid, container)))

    def forget(self, pod_uid: str) -> None:
        with self._lock:
            for key in [k for k in self._lines if k[0] == pod_uid]:
                del self._lines[key]

    def subscribe(self, pod_uid: str, loop: asyncio.AbstractEventLoop) -> _Waiter:
        waiter = _Waiter(loop)
        with self._lock:
            self._waiters.setdefault(pod_uid, set()).add(waiter)
        return waiter

    def unsubscribe(self, pod_uid: str, waiter: _Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(pod_uid)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[pod_uid]

    def wake(self, pod_uid: str) -> None:
        with self._lock:
            waiters = list(self._waiters.get(pod_uid, ()))
        for waiter in waiters:
            waiter.wake()

    def wake_all(self) -> None:
        with self._lock:
            waiters = [w for group in self._waiters.values() for w in group]
        for waiter in waiters:
            waiter.wake()


def select(lines: list[LogLine], since: dt.datetime | None, tail: int | None) -> list[LogLine]:
    """Apply ``sinceSeconds``/``sinceTime`` then ``tailLines``, as the kubelet does."""
    if since is not None:
        lines = [line for line in lines if line.time >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return lines
