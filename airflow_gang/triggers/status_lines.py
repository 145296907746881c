"""The lines a waiting trigger writes about its gang into the task log, written off the event loop.

Each phase the gang reaches (queued, running, succeeded...) is one INFO line; the finer changes
within a phase (the PodGroup's phase, pods bound one by one, a scheduler's message) go at DEBUG,
and so does the admitted phase, which the trigger announces with its own ``gang admitted`` line.

Every line is written from a worker thread (`write`). In Airflow's triggerer a trigger's line is
rendered and written, on the calling thread, into a socket that the triggerer's supervisor
drains: the supervisor, one process that also opens each trigger's log file on its first line
and records every event in the metadata DB, writes it into the task's trigger log. When the
supervisor falls behind, the socket fills and the write waits. Written on the event loop, a
thousand triggers' lines held the loop every trigger shares (issue 33: py-spy showed structlog's
``BytesLogger.msg`` on the loop); from a worker thread, a wait holds only that thread. A
trigger awaits its own lines, so they stay in order; ``asyncio.to_thread`` carries the context
Airflow binds a trigger's lines with. A line below the logger's level costs no thread at all.

Fewer lines matter as much: a full socket also holds Airflow's own lines, which it writes on the
loop (issue 33: its "trigger ... starting" line held the loop for over a second when a thousand
triggers began, triggers that wrote nothing at all). So a gang's admission is one line, not
two: the ``gang admitted`` line carries the status it was seen with.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from airflow_gang.gang_state import GangPhase, GangStatus
from airflow_gang.outage import OutageLog


async def write(log: OutageLog, level: Literal["info", "debug", "warning"], message: str, *args: Any) -> None:
    """Write one line from a worker thread (see the module docstring)."""
    if _enabled(log, LEVELS[level]):
        await asyncio.to_thread(_write_now, log, level, message, args)


LEVELS = {"info": logging.INFO, "debug": logging.DEBUG, "warning": logging.WARNING}


def _enabled(log: OutageLog, level: int) -> bool:
    """Whether ``log`` would write a line at ``level`` (structlog's filtering loggers, which
    Airflow's are, and the standard library's can tell; for any other, assume it would)."""
    check = getattr(log, "is_enabled_for", None) or getattr(log, "isEnabledFor", None)
    return True if check is None else bool(check(level))


def _write_now(log: OutageLog, level: str, message: str, args: tuple[Any, ...]) -> None:
    getattr(log, level)(message, *args)


class StatusLines:
    """Logs a gang's status as it changes (see the module docstring)."""

    def __init__(self, log: OutageLog, namespace: str, name: str) -> None:
        self.log = log
        self.where = f"{namespace}/{name}"
        self._line = ""
        self._phase: GangPhase | None = None

    async def saw(self, status: GangStatus) -> None:
        line = status.describe()
        if line == self._line:
            return
        new_phase = status.phase is not self._phase and status.phase is not GangPhase.ADMITTED
        self._line, self._phase = line, status.phase
        await write(self.log, "info" if new_phase else "debug", "gang job %s: %s", self.where, line)

    async def admitted(self, status: GangStatus, at: str | None) -> None:
        """The admission line, with the status it was seen in (no separate line for that status)."""
        line = status.describe()
        self._line, self._phase = line, status.phase
        message = "gang admitted job=%s queue=%s at %s: %s"
        await write(self.log, "info", message, self.where, status.queue, at, line)
