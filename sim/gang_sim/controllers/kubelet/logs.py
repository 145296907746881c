"""Container logs as a node keeps them: per container instance, read the way the kubelet reads them.

A real container runtime writes each container's output to a file named after the container
ID; a restarted container gets a new ID and a new file, and the kubelet serves the current one
(or, with ``previous``, the one before it). `NodeLogs` is that, in memory: one `ContainerLog`
per pod UID and container ID, holding its newest ``max_lines`` lines with their times, closed
when the container exits. Everything here runs on the kubelet's event loop, so followers wait
on an `asyncio.Event` and nothing needs a lock.

`log_container_id` picks the container instance a request means from the pod's status, with
the kubelet's own rules and error messages (``validateContainerLogStatus``); `render` applies
``tailLines``, then ``sinceSeconds``/``sinceTime``, ``timestamps`` and ``limitBytes`` as the
runtime's log reader does (the tail is counted first, then older lines are skipped).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]
DEFAULT_MAX_LINES = 100_000


class LogUnavailable(Exception):
    """The kubelet cannot serve this log; the message is the kubelet's own (HTTP 400)."""


@dataclass(frozen=True)
class LogLine:
    time: dt.datetime
    text: str

    def render(self, timestamps: bool) -> str:
        if not timestamps:
            return self.text + "\n"
        stamp = self.time.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        return f"{stamp}000Z {self.text}\n"  # RFC 3339 with nanoseconds, as the runtime writes


class ContainerLog:
    """One container instance's output. ``offset`` counts lines ever written, dropped ones too."""

    def __init__(self, max_lines: int = DEFAULT_MAX_LINES) -> None:
        self._lines: deque[LogLine] = deque(maxlen=max_lines)
        self._written = 0
        self.closed = False
        self._changed = asyncio.Event()

    @property
    def offset(self) -> int:
        return self._written

    def append(self, lines: Iterable[str], when: dt.datetime) -> None:
        for text in lines:
            self._lines.append(LogLine(when, text.rstrip("\n")))
            self._written += 1
        self._wake()

    def close(self) -> None:
        """The container exited: followers get what is left, then the end of the stream."""
        if not self.closed:
            self.closed = True
            self._wake()

    def lines(self, after: int = 0) -> list[LogLine]:
        """Lines written after the first ``after`` (as many of them as are still kept)."""
        kept_from = self._written - len(self._lines)
        return list(self._lines)[max(0, after - kept_from) :]

    async def wait(self, after: int) -> None:
        """Return once more than ``after`` lines were written, or the log is closed."""
        while self._written <= after and not self.closed:
            await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class NodeLogs:
    """Every container log of one node, by pod UID and container ID."""

    def __init__(self, max_lines: int = DEFAULT_MAX_LINES) -> None:
        self.max_lines = max_lines
        self._pods: dict[str, dict[str, ContainerLog]] = {}

    def container(self, pod_uid: str, container_id: str) -> ContainerLog:
        """The log of a container instance, made empty on first use."""
        logs = self._pods.setdefault(pod_uid, {})
        log = logs.get(container_id)
        if log is None:
            log = logs[container_id] = ContainerLog(self.max_lines)
        return log

    def find(self, pod_uid: str, container_id: str) -> ContainerLog | None:
        return self._pods.get(pod_uid, {}).get(container_id)

    def close_pod(self, pod_uid: str) -> None:
        for log in self._pods.get(pod_uid, {}).values():
            log.close()

    def forget(self, pod_uid: str) -> None:
        """The pod is gone: so are its logs (and their followers end)."""
        self.close_pod(pod_uid)
        self._pods.pop(pod_uid, None)

    def close_all(self) -> None:
        for pod_uid in list(self._pods):
            self.close_pod(pod_uid)


def log_container_id(pod: JsonDict, container: str, previous: bool) -> str:
    """The ID of the container instance whose log a request means (the kubelet's rules).

    :raises LogUnavailable: with the kubelet's message (the container has not started, or has
        no previous instance, ...).
    """
    name = str((pod.get("metadata") or {}).get("name", ""))
    status = pod.get("status") or {}
    entries = [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
    entry = next((e for e in entries if e.get("name") == container), None)
    if entry is None:  # admitted, not started: the kubelet's own status says ContainerCreating
        entry = {"state": {"waiting": {"reason": "ContainerCreating"}}}
    state, last = entry.get("state") or {}, entry.get("lastState") or {}
    last_id = str((last.get("terminated") or {}).get("containerID") or "")
    if previous:
        if not last_id:
            raise LogUnavailable(f'previous terminated container "{container}" in pod "{name}" not found')
        return last_id
    if "running" in state:
        return str(entry.get("containerID") or "")
    if "terminated" in state or "terminated" in last:
        found = str((state.get("terminated") or {}).get("containerID") or "") or last_id
        if not found:
            raise LogUnavailable(f'container "{container}" in pod "{name}" is terminated')
        return found
    if "waiting" in state:
        reason = (state.get("waiting") or {}).get("reason") or ""
        raise LogUnavailable(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    raise LogUnavailable(f'container "{container}" in pod "{name}" is waiting to start - no logs yet')


@dataclass(frozen=True)
class LogQuery:
    """``containerLogs`` parameters; ``since`` is the resolved ``sinceSeconds``/``sinceTime``."""

    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail: int | None = None
    since: dt.datetime | None = None
    limit_bytes: int | None = None


def render(lines: list[LogLine], query: LogQuery, budget: int | None) -> tuple[bytes, int | None]:
    """Lines as the stream carries them, cut at ``budget`` bytes; returns (bytes, budget left)."""
    if query.since is not None:
        lines = [line for line in lines if line.time >= query.since]
    data = "".join(line.render(query.timestamps) for line in lines).encode()
    if budget is None:
        return data, None
    return data[:budget], max(0, budget - len(data))


def tail(lines: list[LogLine], count: int | None) -> list[LogLine]:
    if count is None:
        return lines
    return lines[-count:] if count > 0 else []
