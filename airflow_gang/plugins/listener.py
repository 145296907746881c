"""The plugin's listener: runs the orphan reaper (`airflow_gang.state.reaper`) inside the scheduler.

Every Airflow component loads plugins, and with them this listener; only the scheduler starts a
reaper. Airflow calls ``on_starting`` before a job knows its type, so a reaper thread is started
for every job component and the thread itself checks, on its first sweep, that it lives in a
scheduler (a dag-processor's or triggerer's reaper stops there). It also imports the Kubernetes
clients before the triggerer forks its trigger runner (see ``on_starting``). ``on_task_instance_failed`` is
called in the scheduler when it fails a task instance from outside (a state mismatch with the
executor, a missing heartbeat): that wakes the reaper at once instead of at its next period.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)
SCHEDULER_JOB_TYPE = "SchedulerJob"


class GangReaperListener:
    """Starts, wakes and stops the orphan reaper of a scheduler process."""

    def __init__(self) -> None:
        self._reaper: Any = None

    @hookimpl
    def on_starting(self, component: Any) -> None:
        if not hasattr(component, "job_type") or self._reaper is not None:
            return  # a task runner, or a second job in one process
        # The triggerer forks its trigger runner after this: importing the Kubernetes clients
        # here (most of a second) spares the runner's event loop from importing them while
        # other triggers wait ("async thread was blocked"). The scheduler's reaper needs them too.
        from airflow.configuration import conf

        import airflow_gang.hooks.gang_async  # noqa: F401
        from airflow_gang.state.reaper import OrphanReaper, find_candidates

        interval = conf.getfloat("gang", "orphan_reaper_interval", fallback=30.0)
        if interval <= 0:
            return

        self._reaper = OrphanReaper(
            interval,
            finder=find_candidates,
            enabled=lambda: getattr(component, "job_type", None) == SCHEDULER_JOB_TYPE,
        ).start()
        self._reaper.wake()  # first sweep soon after start: catch what a stopped scheduler missed

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        if self._reaper is not None:
            self._reaper.wake()

    @hookimpl
    def before_stopping(self, component: Any) -> None:
        if self._reaper is not None and hasattr(component, "job_type"):
            self._reaper.stop()
            self._reaper = None


listener = GangReaperListener()
