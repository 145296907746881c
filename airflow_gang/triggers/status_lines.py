"""The lines a waiting trigger writes about its gang into the task log, written off the event loop.

Each phase the gang reaches (queued, running, succeeded...) is one INFO line; the finer changes
within a phase (the PodGroup's phase, pods bound one by one, a scheduler's message) go at DEBUG,
and so does the admitted phase, which the trigger announces with its own ``gang admitted`` line.

A triggerer's log lines travel to its supervisor over one socket. When a wave of gangs is
admitted or finishes, a thousand triggers' lines filled it while the supervisor was busy, and a
synchronous write then held the whole event loop (issue 33, py-spy: structlog's
``BytesLogger.msg`` on the loop). So the lines are written with the logger's asynchronous
methods where it has them (structlog's, which Airflow's triggerer uses: they write in a worker
thread) and awaited, so one trigger's lines stay in order; a plain stdlib logger writes as usual.
"""

from __future__ import annotations

from typing import Any, Literal

from airflow_gang.gang_state import GangPhase, GangStatus
from airflow_gang.outage import OutageLog


async def write(log: OutageLog, level: Literal["info", "debug", "warning"], message: str, *args: Any) -> None:
    """Write one line off the event loop when ``log`` can (its ``a<level>`` method), else directly."""
    asynchronous = getattr(log, f"a{level}", None)
    if asynchronous is not None:
        await asynchronous(message, *args)
    else:
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

    async def admitted(self, queue: str | None, at: str | None) -> None:
        await write(self.log, "info", "gang admitted job=%s queue=%s at %s", self.where, queue, at)
