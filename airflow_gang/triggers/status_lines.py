"""The lines a waiting trigger writes about its gang into the task log.

Each phase the gang reaches (queued, admitted, running, succeeded...) is one INFO line; the finer
changes within a phase (the PodGroup's phase, pods bound one by one, a scheduler's message) go
at DEBUG. A triggerer's log lines travel to its supervisor over one socket: a thousand triggers
writing every small change filled it and held the event loop while the supervisor was busy
(issue 33), and a person reading a task log wants the phases.
"""

from __future__ import annotations

from airflow_gang.gang_state import GangPhase, GangStatus
from airflow_gang.outage import OutageLog


class StatusLines:
    """Logs a gang's status as it changes (see the module docstring)."""

    def __init__(self, log: OutageLog, namespace: str, name: str) -> None:
        self.log = log
        self.where = f"{namespace}/{name}"
        self._line = ""
        self._phase: GangPhase | None = None

    def saw(self, status: GangStatus) -> None:
        line = status.describe()
        if line == self._line:
            return
        say = self.log.info if status.phase is not self._phase else self.log.debug
        say("gang job %s: %s", self.where, line)
        self._line, self._phase = line, status.phase
