"""A trigger that measures its own triggerer's event-loop lag (issue 33), for `bench_triggerer.py`.

`LoopProbeTrigger` runs in the same ``airflow triggerer`` as the triggers under test. It sleeps
``period`` seconds (``asyncio.sleep``) again and again and records how late each wake-up is:
``time.monotonic()`` after the sleep minus (``time.monotonic()`` before it + ``period``). Whatever
holds the event loop (a trigger that blocks, a burst of callbacks, a starved CPU) delays the
wake-up by as much. Each sample is one CSV line ``<wall>,<lag ms>``: ``wall`` the Unix time
(``time.time()``) of the wake-up, ``lag ms`` the lateness in milliseconds (can be slightly
negative: timer granularity). Samples are buffered and appended to ``path`` about once every
``flush_interval`` seconds in a worker thread (`asyncio.to_thread`), so the probe itself never
blocks the loop with file I/O; what is buffered when the trigger is cancelled is written then.

It fires no event before ``until`` (an ISO 8601 UTC time or Unix seconds); without ``until`` it
runs until it is cancelled (its task instance leaves ``deferred``, or the triggerer stops). The
triggerer imports it as ``loop_probe.LoopProbeTrigger``: the benchmarks directory must be on its
``PYTHONPATH``. `read_samples` reads a probe's file.

`IdleTrigger` (``loop_probe.IdleTrigger``) is the benchmark's baseline: a trigger that does
nothing at all (no line, no I/O) until it is cancelled. A thousand of them show what Airflow's
triggerer itself does to its loop when that many triggers start, with no provider code running.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CLASSPATH = "loop_probe.LoopProbeTrigger"
IDLE_CLASSPATH = "loop_probe.IdleTrigger"


def _deadline(until: str | float | None) -> float | None:
    """``until`` as Unix seconds (None: no deadline)."""
    if until is None or until == "":
        return None
    if isinstance(until, int | float):
        return float(until)
    try:
        return float(until)
    except ValueError:
        moment = dt.datetime.fromisoformat(until.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return moment.timestamp()


def _append(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as output:
        output.write("".join(lines))


class LoopProbeTrigger(BaseTrigger):
    """Sleeps ``period`` s in a loop and appends each wake-up's lateness to ``path`` (see module)."""

    def __init__(
        self,
        path: str,
        period: float = 0.02,
        until: str | float | None = None,
        flush_interval: float = 1.0,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.path = str(path)
        self.period = float(period)
        self.until = until
        self.flush_interval = float(flush_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "path": self.path,
                "period": self.period,
                "until": self.until,
                "flush_interval": self.flush_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        path = Path(self.path)
        deadline = _deadline(self.until)
        buffer: list[str] = []
        samples = 0
        next_flush = time.monotonic() + self.flush_interval
        try:
            while deadline is None or time.time() < deadline:
                before = time.monotonic()
                await asyncio.sleep(self.period)
                now = time.monotonic()
                buffer.append(f"{time.time():.6f},{1000 * (now - before - self.period):.3f}\n")
                samples += 1
                if now >= next_flush:
                    lines, buffer = buffer, []
                    await asyncio.to_thread(_append, path, lines)
                    next_flush = time.monotonic() + self.flush_interval
        finally:
            if buffer:  # cancelled (or the deadline passed) with samples not yet written
                _append(path, buffer)
        done = {"status": "done", "samples": samples, "path": self.path}
        yield TriggerEvent(done)  # type: ignore[no-untyped-call]


class IdleTrigger(BaseTrigger):
    """Waits, doing nothing, until it is cancelled (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (IDLE_CLASSPATH, {})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.Event().wait()
        yield TriggerEvent({"status": "never"})  # type: ignore[no-untyped-call]


def read_samples(path: str | Path) -> list[tuple[float, float]]:
    """(Unix time, lag ms) of every sample in a probe's file; [] when there is none yet."""
    samples: list[tuple[float, float]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return samples
    for line in text.splitlines():
        wall, _, lag = line.partition(",")
        try:
            samples.append((float(wall), float(lag)))
        except ValueError:
            continue  # a line being written right now
    return samples
