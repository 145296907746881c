"""The ``?watch=true`` response: newline-delimited JSON events from one watcher's queue.

The stream replays (synthetic ADDED events for a watch without a resourceVersion, else the
logged events after it), then follows the queue until ``timeoutSeconds``, the server stops or
the watcher is closed for lagging. With selectors, an update that makes an object start or
stop matching arrives as ADDED or DELETED, as from kube-apiserver's watch cache. With
``allowWatchBookmarks`` an idle stream gets BOOKMARK events carrying the latest
resourceVersion every ``bookmark_interval`` and once more when it times out. A
resourceVersion older than the event window gets one ERROR event with a 410 ``Expired``
Status, then the stream ends: clients must list again.

Injected faults (``ServerState.faults``) act here too: a watch resuming from a resourceVersion
may get that same 410 ERROR event, and a stream may end after N events or T seconds, as one
that kube-apiserver closes early (events are ADDED/MODIFIED/DELETED lines; BOOKMARKs do not
count).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from gang_sim.apiserver.errors import Expired
from gang_sim.apiserver.faults.injector import WatchFault
from gang_sim.apiserver.objects import edited
from gang_sim.apiserver.options import ListOptions, check_fields, parse_version
from gang_sim.apiserver.registry import ResourceInfo
from gang_sim.apiserver.state import ServerState
from gang_sim.apiserver.store import TooOld
from gang_sim.apiserver.watching import Event, Watcher, encode_event

JsonDict = dict[str, Any]
INJECTED = "injected by the simulator's fault spec"


def _passes(obj: JsonDict, options: ListOptions) -> bool:
    return options.labels.matches((obj.get("metadata") or {}).get("labels")) and options.fields.matches(obj)


def _render(event: Event, options: ListOptions) -> bytes | None:
    """The event as this watcher must see it, or None if it is filtered out."""
    if options.labels.empty and options.fields.empty:
        return event.line()
    now = _passes(event.obj, options)
    if event.type == "ADDED":
        return event.line() if now else None
    if event.type == "DELETED":
        return event.line() if now else None
    before = event.prev is not None and _passes(event.prev, options)
    if now and before:
        return event.line()
    if now:
        return encode_event("ADDED", event.obj)
    if before and event.prev is not None:
        # Leaving the selection reads as a deletion of the last matching state, at this version.
        return encode_event("DELETED", edited(event.prev, resourceVersion=str(event.rv)))
    return None


def _bookmark(info: ResourceInfo, rv: int) -> bytes:
    return encode_event(
        "BOOKMARK",
        {"kind": info.kind, "apiVersion": info.api_version, "metadata": {"resourceVersion": str(rv)}},
    )


def watch_response(
    request: Request, state: ServerState, info: ResourceInfo, namespace: str | None, options: ListOptions
) -> StreamingResponse:
    check_fields(info, options)
    since = None if options.resource_version in ("", "0") else parse_version(options.resource_version)
    timeout = request.query_params.get("timeoutSeconds")
    low, high = state.config.watch_timeout
    seconds = float(timeout) if timeout not in (None, "") else random.uniform(low, high)
    bookmarks = request.query_params.get("allowWatchBookmarks", "").lower() in ("true", "1")
    fault = state.faults.watch(request.headers.get("user-agent", ""), resumed=since is not None)
    if fault is not None and fault.gone:
        injected = f"too old resource version: {since} ({state.store.resource_version}) ({INJECTED})"
        return _error_response(Expired(injected))
    loop = asyncio.get_running_loop()
    try:
        watcher, replay = state.store.watch(info.key, namespace or None, since, loop)
    except TooOld as exc:
        return _error_response(Expired(str(exc)))
    follow = _Follow(state, info, watcher, options=options, since=since, cut=_Cut(fault, state))
    return StreamingResponse(follow.stream(replay, seconds, bookmarks), media_type="application/json")


def _error_response(gone: Expired) -> StreamingResponse:
    """A watch that ends at once with one ERROR event (the client must list again)."""
    return StreamingResponse(_single(encode_event("ERROR", gone.to_status())), media_type="application/json")


class _Follow:
    """One watcher's stream: the replay, then its queue, until timeout, a close or a cut."""

    def __init__(
        self,
        state: ServerState,
        info: ResourceInfo,
        watcher: Watcher,
        *,
        options: ListOptions,
        since: int | None,
        cut: _Cut,
    ) -> None:
        self.state = state
        self.info = info
        self.watcher = watcher
        self.options = options
        self.since = since
        self.cut = cut

    async def stream(self, replay: list[Event], seconds: float, bookmarks: bool) -> AsyncIterator[bytes]:
        state, watcher, cut = self.state, self.watcher, self.cut
        loop = asyncio.get_running_loop()
        try:
            initial = cut.admit([line for e in replay if (line := _render(e, self.options)) is not None])
            if initial:
                yield b"".join(initial)
            if cut.done:
                return
            deadline = loop.time() + cut.seconds(seconds)
            interval = state.config.bookmark_interval
            next_bookmark = loop.time() + interval
            while True:
                wake = min(deadline, next_bookmark) if bookmarks else deadline
                try:
                    async with asyncio.timeout_at(wake):
                        first = await watcher.queue.get()
                except TimeoutError:
                    if bookmarks and loop.time() >= min(next_bookmark, deadline):
                        settled = state.store.settled_version(watcher)
                        if settled is not None:
                            yield _bookmark(self.info, settled)
                        next_bookmark = loop.time() + interval
                    if loop.time() >= deadline:
                        cut.timed_out()
                        return
                    continue
                batch: list[Event | None] = [first]
                while not watcher.queue.empty():
                    batch.append(watcher.queue.get_nowait())
                chunk = cut.admit(self._lines(batch))
                if chunk:
                    yield b"".join(chunk)
                if None in batch or cut.done:
                    return
        finally:
            state.store.unwatch(watcher)

    def _lines(self, batch: list[Event | None]) -> list[bytes]:
        lines = []
        for event in batch:
            if event is None:
                break
            if self.since is not None and event.rv <= self.since:
                continue  # a watch from a future resourceVersion starts there
            line = _render(event, self.options)
            if line is not None:
                lines.append(line)
        return lines


async def _single(line: bytes) -> AsyncIterator[bytes]:
    yield line


class _Cut:
    """Where an injected fault ends one stream early: after N event lines, or after T seconds."""

    def __init__(self, fault: WatchFault | None, state: ServerState) -> None:
        self._left = fault.cut_after_events if fault is not None else None
        self._after = fault.cut_after_seconds if fault is not None else None
        self._by_time = False
        self._state = state
        self.done = False

    def admit(self, lines: list[bytes]) -> list[bytes]:
        """The lines to send of ``lines``; ``done`` once the event budget is spent."""
        if self._left is None or self.done:
            return lines
        sent = lines[: self._left]
        self._left -= len(sent)
        if self._left == 0:
            self.done = True
            self._state.faults.count("watch_cut")
        return sent

    def seconds(self, requested: float) -> float:
        """How long the stream may last, given the client's ``timeoutSeconds`` (or the default)."""
        if self._after is not None and self._after < requested:
            self._by_time = True
            return self._after
        return requested

    def timed_out(self) -> None:
        if self._by_time:
            self._state.faults.count("watch_cut")
