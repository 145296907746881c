"""A StatsD server for tests: a UDP socket on loopback that keeps every datagram it receives,
and Airflow's metrics facade pointed at it as a component sets it up at start."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.waiting import eventually


class StatsdListener:
    """Collects StatsD lines (``name:value|type``) sent to ``127.0.0.1:port``."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = int(self._socket.getsockname()[1])
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, name="statsd-listener", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._socket.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.lines.extend(line for line in data.decode().splitlines() if line)

    def metrics(self, prefix: str = "airflow.gang.") -> list[tuple[str, float, str]]:
        """``(name, value, type)`` of every line whose name starts with ``prefix``."""
        found = []
        with self._lock:
            lines = list(self.lines)
        for line in lines:
            name, _, rest = line.partition(":")
            value, _, kind = rest.partition("|")
            if name.startswith(prefix):
                found.append((name, float(value), kind.split("|")[0]))
        return found

    def names(self, prefix: str = "airflow.gang.") -> list[str]:
        return [name for name, _, _ in self.metrics(prefix)]

    def wait_for(self, name: str, count: int = 1, timeout: float = 10.0) -> list[tuple[str, float, str]]:
        """Wait until ``name`` arrived ``count`` times; its lines."""
        eventually(
            lambda: self.names().count(name) >= count,
            timeout=timeout,
            message=f"(StatsD saw {self.names()})",
        )
        return [metric for metric in self.metrics() if metric[0] == name]

    def close(self) -> None:
        self._stop.set()
        self._socket.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def airflow_sending_to(monkeypatch: pytest.MonkeyPatch, *, core: bool = False) -> Iterator[StatsdListener]:
    """A listener, and Airflow's metrics set up to send to it as a task process (the Task SDK's
    facade) or, with ``core``, the scheduler or triggerer (Airflow core's) sets them up."""
    listener = StatsdListener()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    facade: Any
    if core:
        from airflow._shared.observability.metrics import stats as facade
        from airflow.observability.metrics import stats_utils
    else:
        from airflow.sdk._shared.observability.metrics import stats as facade
        from airflow.sdk.observability.metrics import stats_utils
    for attribute in ("_factory", "_backend", "_export_legacy_names"):
        monkeypatch.setattr(facade, attribute, getattr(facade, attribute))
    facade.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    try:
        yield listener
    finally:
        listener.close()
