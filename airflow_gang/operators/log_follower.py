"""Streams the master replica's log into the task log while a sync-mode task waits.

A daemon thread follows rank 0's training container (a PyTorchJob's ``<job>-master-0``
``pytorch``, a TrainJob's ``<job>-node-0-0-<random>`` ``node``) (the API server ends the
stream when the container terminates) and writes each line to the task logger as it arrives, so
people watching the Airflow UI see training progress live rather than at the end.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow_gang.exceptions import GangError
from airflow_gang.hooks.gang import GangJobHook


class LogFollower:
    """Follow one pod's log on a background thread; `stop` waits a little for the stream to end."""

    def __init__(
        self, hook: GangJobHook, pod: str, namespace: str, logger: Any, *, container: str = "pytorch"
    ) -> None:
        self._hook = hook
        self._container = container
        self._pod = pod
        self._namespace = namespace
        self._logger = logger
        self.lines = 0
        # True once the server ended the stream (the container terminated): the whole log is in
        # the task log. False after a broken stream (an API outage): print the tail at the end.
        self.complete = False
        self._thread = threading.Thread(target=self._follow, name=f"gang-log-{pod}", daemon=True)

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def _follow(self) -> None:
        try:
            for line in self._hook.stream_pod_log(self._pod, self._namespace, container=self._container):
                self.lines += 1
                self._logger.info("[%s] %s", self._pod, line)
            self.complete = True
        except GangError as error:  # a broken stream must never fail the task
            self._logger.warning("log stream of %s/%s ended early: %s", self._namespace, self._pod, error)

    def stop(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)
