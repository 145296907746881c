"""Watch fan-out: one bounded asyncio queue per watcher, fed by the store's writers.

A writer offers each committed event to the watchers of that resource while it holds the
store lock, so every watcher sees events in resourceVersion order and none is missed between
its replay and its registration. Offering never blocks: a watcher whose queue is full is
closed (its stream ends, as kube-apiserver drops an unresponsive watcher) and the client
re-watches from its last resourceVersion. Writers on other threads hand events to the
watcher's loop with ``call_soon_threadsafe``; ``pending`` counts those still in flight so a
BOOKMARK never claims a resourceVersion whose events have not been queued yet.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

from gang_sim import json_wire

JsonDict = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


class Event:
    """A committed change. ``prev`` is the object before it (None for ADDED)."""

    __slots__ = ("_line", "key", "name", "namespace", "obj", "prev", "rv", "type")

    def __init__(self, rv: int, type_: EventType, key: str, obj: JsonDict, prev: JsonDict | None):
        self.rv = rv
        self.type: EventType = type_
        self.key = key
        meta = obj.get("metadata") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta.get("name", "")
        self.obj = obj
        self.prev = prev
        self._line: bytes | None = None

    def line(self) -> bytes:
        """The newline-terminated wire form, serialised once and shared by all watchers."""
        if self._line is None:
            self._line = encode_event(self.type, self.obj)
        return self._line


def encode_event(type_: str, obj: JsonDict) -> bytes:
    return json_wire.dumps({"type": type_, "object": obj}) + b"\n"


class Watcher:
    """One watch request's queue. ``None`` in the queue means the stream must end."""

    def __init__(self, key: str, namespace: str | None, loop: asyncio.AbstractEventLoop, queue_size: int):
        self.key = key
        self.namespace = namespace
        self.loop = loop
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=queue_size)
        self.pending = 0
        self.closed = False
        self.lagged = False
        self._thread = threading.get_ident()

    def offer(self, event: Event) -> None:
        """Called by a writer holding the store lock; never blocks."""
        if self.closed or (self.namespace and event.namespace != self.namespace):
            return
        if threading.get_ident() == self._thread:
            self._put(event)
        else:
            self.pending += 1
            try:
                self.loop.call_soon_threadsafe(self._put_foreign, event)
            except RuntimeError:  # the loop is closed: nobody is reading any more
                self.closed = True

    def _put_foreign(self, event: Event) -> None:
        self.pending -= 1
        self._put(event)

    def _put(self, event: Event) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.lagged = True
            self._terminate()

    def close(self) -> None:
        """End the stream from any thread (server shutdown)."""
        if threading.get_ident() == self._thread:
            self._terminate()
        else:
            try:
                self.loop.call_soon_threadsafe(self._terminate)
            except RuntimeError:
                self.closed = True

    def _terminate(self) -> None:
        if self.closed:
            return
        self.closed = True
        # Make room for the end marker: the reader stops at it, queued events are moot.
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)
