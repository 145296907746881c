"""The lines a waiting trigger writes about its gang into the task log, written off the event loop.

Each phase the gang reaches (queued, running, succeeded...) is one INFO line, and so is a restart
by the job's own controller (its condition ``Restarting``, e.g. a Volcano Job's ``RestartJob``
policy, and the end of it); the finer changes
within a phase (the PodGroup's phase, pods bound one by one, a scheduler's message) go at DEBUG,
and so does the admitted phase, which the trigger announces with its own ``gang admitted`` line.

Every line is written by one thread of its own per process (`queue_line`), in the order the
lines were queued. In Airflow's triggerer a trigger's line is rendered and written, on the
calling thread, into a socket that the triggerer's supervisor drains: the supervisor, one process
that also opens each trigger's log file on its first line and records every event in the
metadata DB, writes it into the task's trigger log. When the supervisor falls behind (a wave of
completions is a wave of DB writes), the socket fills and the write waits. Written on the event
loop, a thousand triggers' lines held the loop every trigger shares (issue 33: py-spy showed
structlog's ``BytesLogger.msg`` on the loop); written from asyncio's default executor, waiting
writes took all its threads, which Airflow's own logging also uses, and each trigger waited for
its line before deciding (at 10,000 jobs over two triggerers, completions were decided 58 and
95 s late at p99; 0.9 and 3.2 s with the writer). So a trigger queues its status lines and goes
on deciding; before it fires its event it waits until its lines are written (`written`), so
they stay in its task log, ahead of the event. The context Airflow binds a trigger's lines with
is carried to the thread. A line below the logger's level is not queued.

Fewer lines matter as much: a full socket also holds Airflow's own lines, which it writes on the
loop (issue 33: its "trigger ... starting" line held the loop for over a second when a thousand
triggers began, triggers that wrote nothing at all). So a gang's admission is one line, not
two: the ``gang admitted`` line carries the status it was seen with.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from airflow_gang.model.gang_state import GangPhase, GangStatus
from airflow_gang.model.outage import OutageLog

LEVELS = {"info": logging.INFO, "debug": logging.DEBUG, "warning": logging.WARNING}
Level = Literal["info", "debug", "warning"]


def queue_line(log: OutageLog, level: Level, message: str, *args: Any) -> asyncio.Future[None] | None:
    """Queue one line for this process's line writer; None if ``log`` would drop it anyway."""
    if not _enabled(log, LEVELS[level]):
        return None
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(_writer(os.getpid()), context.run, _write_now, log, level, message, args)


async def write(log: OutageLog, level: Level, message: str, *args: Any) -> None:
    """Write one line through the line writer and wait until it is written."""
    if (queued := queue_line(log, level, message, *args)) is not None:
        await queued


async def written() -> None:
    """Until every line queued so far in this process is written (the writer keeps their order)."""
    await asyncio.get_running_loop().run_in_executor(_writer(os.getpid()), _nothing)


@functools.cache
def _writer(pid: int) -> ThreadPoolExecutor:
    """The line writer of process ``pid`` (a forked process gets its own: threads do not fork)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"airflow-gang-lines-{pid}")


def _enabled(log: OutageLog, level: int) -> bool:
    """Whether ``log`` would write a line at ``level`` (structlog's filtering loggers, which
    Airflow's are, and the standard library's can tell; for any other, assume it would)."""
    check = getattr(log, "is_enabled_for", None) or getattr(log, "isEnabledFor", None)
    return True if check is None else bool(check(level))


def _write_now(log: OutageLog, level: str, message: str, args: tuple[Any, ...]) -> None:
    with contextlib.suppress(Exception):  # a status line never fails a wait (nor its neighbours')
        getattr(log, level)(message, *args)


def _nothing() -> None:
    return None


RESTARTING = "Restarting"


class StatusLines:
    """Logs a gang's status as it changes (see the module docstring)."""

    def __init__(self, log: OutageLog, namespace: str, name: str) -> None:
        self.log = log
        self.where = f"{namespace}/{name}"
        self._line = ""
        self._phase: GangPhase | None = None
        self._condition: str | None = None

    def saw(self, status: GangStatus) -> None:
        """Queue a line if ``status`` reads differently from the last one (see the module)."""
        line = status.describe()
        if line == self._line:
            return
        new_phase = status.phase is not self._phase and status.phase is not GangPhase.ADMITTED
        # A restart by the job's own controller (its condition Restarting) is news within running.
        restart = status.job_condition != self._condition and RESTARTING in (
            status.job_condition,
            self._condition,
        )
        self._line, self._phase, self._condition = line, status.phase, status.job_condition
        level: Level = "info" if new_phase or restart else "debug"
        queue_line(self.log, level, "gang job %s: %s", self.where, line)

    def admitted(self, status: GangStatus, at: str | None) -> None:
        """The admission line, with the status it was seen in (no separate line for that status)."""
        line = status.describe()
        self._line, self._phase, self._condition = line, status.phase, status.job_condition
        message = "gang admitted job=%s queue=%s at %s: %s"
        queue_line(self.log, "info", message, self.where, status.queue, at, line)
