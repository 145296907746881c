"""The ``?watch=true`` response: newline-delimited JSON events from one watcher's queue.

The stream replays (synthetic ADDED events for a watch without a resourceVersion, else the
logged events after it), then follows the queue until ``timeoutSeconds``, the server stops or
the watcher is closed for lagging. With selectors, an update that makes an object start or
stop matching arrives as ADDED or DELETED, as from kube-apiserver's watch cache. With
``allowWatchBookmarks`` an idle stream gets BOOKMARK events carrying the latest
resourceVersion every ``bookmark_interval`` and once more when it times out. A
resourceVersion older than the event window gets one ERROR event with a 410 ``Expired``
Status, then the stream ends: clients must list again.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from airflow_gang.sim.apiserver.errors import Expired
from airflow_gang.sim.apiserver.objects import edited
from airflow_gang.sim.apiserver.options import ListOptions, check_fields, parse_version
from airflow_gang.sim.apiserver.registry import ResourceInfo
from airflow_gang.sim.apiserver.state import ServerState
from airflow_gang.sim.apiserver.store import TooOld
from airflow_gang.sim.apiserver.watching import Event, encode_event

JsonDict = dict[str, Any]


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
    loop = asyncio.get_running_loop()
    try:
        watcher, replay = state.store.watch(info.key, namespace or None, since, loop)
    except TooOld as exc:
        gone = Expired(str(exc))
        return StreamingResponse(
            _single(encode_event("ERROR", gone.to_status())), media_type="application/json"
        )

    async def stream() -> AsyncIterator[bytes]:
        try:
            initial = b"".join(line for e in replay if (line := _render(e, options)) is not None)
            if initial:
                yield initial
            deadline = loop.time() + seconds
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
                            yield _bookmark(info, settled)
                        next_bookmark = loop.time() + interval
                    if loop.time() >= deadline:
                        return
                    continue
                batch: list[Event | None] = [first]
                while not watcher.queue.empty():
                    batch.append(watcher.queue.get_nowait())
                chunk = []
                for event in batch:
                    if event is None:
                        break
                    if since is not None and event.rv <= since:
                        continue  # a watch from a future resourceVersion starts there
                    line = _render(event, options)
                    if line is not None:
                        chunk.append(line)
                if chunk:
                    yield b"".join(chunk)
                if None in batch:
                    return
        finally:
            state.store.unwatch(watcher)

    return StreamingResponse(stream(), media_type="application/json")


async def _single(line: bytes) -> AsyncIterator[bytes]:
    yield line
