"""Events written the way client-go's recorder writes them: queued, in the background, deduplicated.

A scheduler's session must not wait for its events (vc-scheduler and kube-scheduler hand them to
an asynchronous broadcaster), so `EventRecorder.record` only queues; a few worker tasks create
them through the API. A repeat of the same (object, type, reason, message) is dropped where the
real recorder would bump ``count`` on the existing Event: one record per message here. Events
are best effort on a real cluster too: one that cannot be written is logged and dropped.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.kinds import EVENTS

log = logging.getLogger(__name__)

WORKERS = 4
_FORGET_AFTER = 50_000  # remembered identities; past it the memory restarts (one repeat each)


class EventRecorder:
    """Queues Events from ``component`` and writes them from background tasks of the running loop."""

    def __init__(
        self, client: KubeClient, component: str, clock: Callable[[], dt.datetime] = utc_now
    ) -> None:
        self.client = client
        self.component = component
        self.clock = clock
        self._queue: asyncio.Queue[JsonDict] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._recorded: set[tuple[str, str, str, str]] = set()
        # After close(): a sync still finishing during shutdown must not start workers that
        # nobody cancels (they would outlive the loop).
        self._closed = False

    def record(self, obj: JsonDict, type_: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (``type_`` Normal or Warning) unless this one was recorded.

        The repeat check comes first and costs a tuple: a scheduler offers the same events for
        every waiting gang in every session.
        """
        if self._closed:
            return
        metadata = obj.get("metadata") or {}
        key = metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}"
        identity = (str(key), type_, reason, message)
        if identity in self._recorded:
            return
        if len(self._recorded) >= _FORGET_AFTER:
            self._recorded.clear()
        self._recorded.add(identity)
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._workers = [asyncio.create_task(self._write_forever()) for _ in range(WORKERS)]
        self._queue.put_nowait(self._body(obj, type_, reason, message))

    async def close(self) -> None:
        self._closed = True
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers, self._queue = [], None

    def _body(self, obj: JsonDict, type_: str, reason: str, message: str) -> JsonDict:
        now = rfc3339(self.clock())
        metadata = obj.get("metadata") or {}
        name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "")
        involved_object: JsonDict = {
            "apiVersion": str(obj.get("apiVersion") or "v1"),
            "kind": str(obj.get("kind") or ""),
            "name": name,
            "namespace": namespace,
            "uid": str(metadata.get("uid") or ""),
        }
        if metadata.get("resourceVersion") is not None:
            involved_object["resourceVersion"] = metadata["resourceVersion"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": involved_object,
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    async def _write_forever(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            body = await queue.get()
            try:
                await self.client.create(EVENTS, body, body["metadata"]["namespace"])
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                involved = body["involvedObject"]
                log.debug(
                    "%s: event %s on %s/%s not recorded: %s",
                    self.component,
                    body["reason"],
                    involved["namespace"],
                    involved["name"],
                    error,
                )
            except Exception:  # a worker must outlive any one event
                log.exception("%s: event not recorded", self.component)
            finally:
                queue.task_done()
