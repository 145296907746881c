"""List-then-watch caches of API objects, shared by all controllers of one manager.

One informer per kind lists, then watches from the list's resourceVersion, and goes back to a
fresh list after ``410 Gone`` (or any broken stream it cannot resume). Every change wakes the
controllers subscribed to that kind; they then read the whole cache (level-triggered), so a
missed or coalesced notification can never lose work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from airflow_gang.sim.controllers.client import ApiError, JsonDict, KubeClient
from airflow_gang.sim.controllers.kinds import Kind, object_key

log = logging.getLogger(__name__)

_RETRY_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


def _resource_version(obj: JsonDict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # opaque versions from a real apiserver are still ordered as integers
        return 0


class Informer:
    """A cache of every object of one kind, kept current by list + watch."""

    def __init__(self, client: KubeClient, kind: Kind) -> None:
        self.client = client
        self.kind = kind
        self.objects: dict[tuple[str, str], JsonDict] = {}
        # resourceVersion at which each key was last seen deleted, so that a late observe() of
        # a write answer cannot resurrect an object the watch already reported gone.
        self._deleted: dict[tuple[str, str], int] = {}
        self.synced = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    def observe(self, obj: JsonDict) -> None:
        """Take an object the caller just wrote, so the next reconcile does not act on stale state."""
        key = object_key(obj)
        version = _resource_version(obj)
        if version and version <= self._deleted.get(key, 0):
            return
        current = self.objects.get(key)
        if current is None or version >= _resource_version(current):
            self.objects[key] = obj

    def forget(self, obj: JsonDict) -> None:
        self.objects.pop(object_key(obj), None)

    async def run(self) -> None:
        attempt = 0
        while True:
            try:
                version: str | None = await self._list()
                attempt = 0
                while version is not None:
                    version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except (TimeoutError, ApiError, aiohttp.ClientError, OSError, ValueError) as error:
                delay = _RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)]
                attempt += 1
                log.debug("informer %s: %s; retrying in %.2fs", self.kind.plural, error, delay)
                await asyncio.sleep(delay)

    async def _list(self) -> str:
        listing = await self.client.list_objects(self.kind)
        self.objects = {object_key(item): _with_kind(item, self.kind) for item in listing.get("items", [])}
        self._deleted = {}
        self.synced.set()
        self._notify()
        return str(listing["metadata"]["resourceVersion"])

    async def _watch(self, version: str) -> str | None:
        """Follow the stream; return the version to resume from, or None to list again."""
        async for event in self.client.watch(self.kind, version):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                log.debug("informer %s: watch error %s; listing again", self.kind.plural, obj.get("message"))
                return None
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self.objects.pop(object_key(obj), None)
                self._deleted[object_key(obj)] = _resource_version(obj)
            else:
                self.observe(_with_kind(obj, self.kind))
            self._notify()
        return version


def _with_kind(obj: JsonDict, kind: Kind) -> JsonDict:
    # List items omit apiVersion/kind; controllers build ownerReferences from them.
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return obj


class Cache:
    """All informers of a manager, by kind; an informer is created the first time it is asked for."""

    def __init__(self, client: KubeClient, kinds: Iterable[Kind] = ()) -> None:
        self.client = client
        self.informers: dict[Kind, Informer] = {}
        for kind in kinds:
            self[kind]

    def __getitem__(self, kind: Kind) -> Informer:
        if kind not in self.informers:
            self.informers[kind] = Informer(self.client, kind)
        return self.informers[kind]

    def items(self, kind: Kind) -> list[JsonDict]:
        return list(self[kind].objects.values())

    def get(self, kind: Kind, namespace: str, name: str) -> JsonDict | None:
        return self[kind].objects.get((namespace, name))

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()))


def deep_get(obj: Any, *path: str, default: Any = None) -> Any:
    """``obj[path[0]][path[1]]...`` or ``default`` when any step is missing."""
    for step in path:
        if not isinstance(obj, dict) or step not in obj:
            return default
        obj = obj[step]
    return obj
