"""A controller that reconciles each object of one kind on its own, with idempotent writes.

The base of the Trainer v2 chain's controllers (TrainJob, JobSet, batch Job): every round
visits every object of ``primary`` in creation order and calls ``sync`` for it; a failed write
only stops that object's round, and the controller comes back after a short backoff (doubling
up to a second) instead of waiting for the next event. The verbs treat the outcomes a
level-triggered controller must tolerate as done: ``AlreadyExists`` on create (an earlier round
made it), ``NotFound`` on delete or on a status write (someone deleted it); whatever a write
returns goes into the cache at once, so the next round does not act on stale state.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import ClassVar

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import utc_now
from gang_sim.controllers.event_recorder import EventRecorder
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import Kind, object_key
from gang_sim.controllers.runner import Controller

log = logging.getLogger(__name__)

WRITE_ERRORS = (ApiError, aiohttp.ClientError, OSError, TimeoutError)
_BACKOFF_BASE, _BACKOFF_MAX = 0.05, 1.0


def creation_order(obj: JsonDict) -> tuple[str, str, str]:
    namespace, name = object_key(obj)
    return str(deep_get(obj, "metadata", "creationTimestamp", default="")), namespace, name


class ObjectController(Controller):
    """Subclasses set ``primary`` and ``component`` (the Events' source) and implement
    ``sync(obj)`` for one object; ``self.clock`` and ``self.events`` serve them all."""

    primary: ClassVar[Kind]
    component: ClassVar[str]

    _failures = 0
    _retry: asyncio.TimerHandle | None = None

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        period: float | None = 0.5,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        super().__init__(client, cache, period)
        self.clock = clock
        self.events = EventRecorder(client, self.component, clock)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self.events.close()

    async def sync(self, obj: JsonDict) -> None:
        raise NotImplementedError

    async def reconcile(self) -> None:
        failed = False
        for obj in sorted(self.cache.items(self.primary), key=creation_order):
            try:
                await self.sync(obj)
            except WRITE_ERRORS as error:
                failed = True
                log.debug("%s: %s/%s: %s; retrying", self.name, *object_key(obj), error)
        self.retry_if(failed)

    def retry_if(self, failed: bool) -> None:
        """After a round: come back soon if a write failed (backoff doubling up to a second)."""
        self._failures = self._failures + 1 if failed else 0
        if failed and self._retry is None:
            delay = min(_BACKOFF_BASE * 2 ** (self._failures - 1), _BACKOFF_MAX)
            self._retry = asyncio.get_running_loop().call_later(delay, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.requeue()

    # --- idempotent verbs ---------------------------------------------------------------------

    async def create(self, kind: Kind, body: JsonDict) -> JsonDict | None:
        """Create ``body``; the stored object, or None when one of that name exists already."""
        namespace = deep_get(body, "metadata", "namespace")
        try:
            created = await self.client.create(kind, body, namespace)
        except ApiError as error:
            if error.status == 409:
                return None
            raise
        self.cache[kind].observe(created)
        return created

    async def delete(self, kind: Kind, namespace: str, name: str, propagation: str = "Background") -> None:
        try:
            answer = await self.client.delete(kind, name, namespace, propagation=propagation)
        except ApiError as error:
            if error.status != 404:
                raise
            cached = self.cache.get(kind, namespace, name)
            if cached is not None:
                self.cache[kind].forget(cached)
            return
        if deep_get(answer, "metadata", "deletionTimestamp"):
            self.cache[kind].observe(answer)  # still there until its dependents or kubelet let go

    async def patch(self, kind: Kind, obj: JsonDict, patch: JsonDict) -> None:
        namespace, name = object_key(obj)
        try:
            self.cache[kind].observe(await self.client.patch(kind, name, patch, namespace or None))
        except ApiError as error:
            if error.status != 404:
                raise

    async def write_status(self, kind: Kind, obj: JsonDict, status: JsonDict) -> bool:
        """Replace ``obj``'s status through ``/status``; False when it changed nothing.

        The object's resourceVersion makes it a compare-and-swap: a conflict raises, and the
        retry decides again on fresh state.
        """
        if status == (obj.get("status") or {}):
            return False
        try:
            written = await self.client.replace(kind, {**obj, "status": status}, subresource="status")
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        self.cache[kind].observe(written)
        return True
