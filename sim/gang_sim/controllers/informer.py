"""List-then-watch caches of API objects, shared by all controllers of one manager.

One informer per kind lists, then watches from the list's resourceVersion, and goes back to a
fresh list after ``410 Gone`` (or any broken stream it cannot resume). Every change is offered
to the controllers subscribed to that kind (the object, or ``None`` after a re-list, meaning
"anything may have changed"); a controller that wants it wakes and reads the cache
(level-triggered), so a missed or coalesced notification can never lose work.

A controller that maps events the way controller-runtime's handlers do (which event of which
object wakes which owner) subscribes to `Change`s instead (`Informer.subscribe_changes`): the
event type, the object and its cached state before. A re-list offers, before its ``None``,
one `Change` per object that it added, changed or removed, as client-go's ``Replace`` does
(objects it finds unchanged are the resync updates that dependent-object predicates drop).

Secondary indexes (`Informer.add_index`) let a controller read just its part of a big cache —
a kubelet its node's pods — instead of scanning every object on each wake-up. A controller that
keeps state derived from cached objects learns of every change of the cache itself, including a
controller's own `Informer.observe` of a write's answer, through `Informer.subscribe_stores`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple, TypeAlias

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.kinds import Kind, object_key

log = logging.getLogger(__name__)

_RETRY_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)

Listener: TypeAlias = Callable[[JsonDict | None], None]
"""Called with each changed object (the last state seen for a deletion), or None after a re-list."""
IndexFunction: TypeAlias = Callable[[JsonDict], Iterable[str]]


class Change(NamedTuple):
    """One event of a kind, as a controller-runtime event handler receives it."""

    type: Literal["ADDED", "MODIFIED", "DELETED"]
    obj: JsonDict  # the new state; for a deletion the last state seen
    old: JsonDict | None  # the cached state before the event (None when there was none)


ChangeListener: TypeAlias = Callable[[Change | None], None]
"""Called with each `Change`, or None after a re-list (whose changes were offered first)."""
StoreListener: TypeAlias = Callable[[JsonDict | None, JsonDict | None], None]
"""Called with (before, after) each time the cache replaces, adds or drops an object (``after``
None: dropped), and with (None, None) after a re-list replaced the whole cache."""


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
        self._listeners: list[Listener] = []
        self._change_listeners: list[ChangeListener] = []
        self._store_listeners: list[StoreListener] = []
        self._index_functions: dict[str, IndexFunction] = {}
        # index name -> index value -> keys of the objects with that value
        self._indexes: dict[str, dict[str, dict[tuple[str, str], None]]] = {}

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def subscribe_changes(self, listener: ChangeListener) -> None:
        self._change_listeners.append(listener)

    def subscribe_stores(self, listener: StoreListener) -> None:
        """Call ``listener(before, after)`` synchronously on every change of the cached objects
        (see `StoreListener`): unlike the notifications, it also sees `observe` and `forget`."""
        self._store_listeners.append(listener)

    def _notify(self, obj: JsonDict | None, change: Change | None = None) -> None:
        """Offer ``obj`` to the plain listeners and ``change`` (None: a re-list) to the others."""
        for listener in self._listeners:
            listener(obj)
        for change_listener in self._change_listeners:
            change_listener(change)

    def _offer_relisted(self, before: dict[tuple[str, str], JsonDict]) -> None:
        """Offer the change listeners what a re-list added, changed or removed since ``before``."""
        if not self._change_listeners:
            return
        changes = [Change("DELETED", old, old) for key, old in before.items() if key not in self.objects]
        for key, obj in self.objects.items():
            old = before.get(key)
            if old is None:
                changes.append(Change("ADDED", obj, None))
            elif _resource_version(old) != _resource_version(obj):
                changes.append(Change("MODIFIED", obj, old))
        for change in changes:
            for change_listener in self._change_listeners:
                change_listener(change)

    def add_index(self, name: str, values_of: IndexFunction) -> None:
        """Keep objects findable by ``values_of(obj)`` (`indexed`); a second add of ``name`` is a no-op."""
        if name in self._index_functions:
            return
        self._index_functions[name] = values_of
        self._indexes[name] = {}
        for key, obj in self.objects.items():
            self._index(key, obj, name)

    def indexed(self, name: str, value: str) -> list[JsonDict]:
        """The cached objects whose index ``name`` has ``value``, in the order they were first seen."""
        keys = self._indexes[name].get(value, ())
        return [self.objects[key] for key in keys]

    def _index(self, key: tuple[str, str], obj: JsonDict, only: str | None = None) -> None:
        # Keys go in at the end, so an index lists objects in the order they first had a value.
        for name, values_of in self._index_functions.items():
            if only is None or name == only:
                for value in values_of(obj):
                    self._indexes[name].setdefault(value, {})[key] = None

    def _unindex(self, key: tuple[str, str], obj: JsonDict) -> None:
        for name, values_of in self._index_functions.items():
            index = self._indexes[name]
            for value in values_of(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[value]

    def _put(self, key: tuple[str, str], obj: JsonDict) -> None:
        previous = self.objects.get(key)
        self.objects[key] = obj
        for name, values_of in self._index_functions.items():
            index = self._indexes[name]
            old = set(values_of(previous)) if previous is not None else set()
            new = list(values_of(obj))
            for value in old.difference(new):
                keys = index[value]
                keys.pop(key, None)
                if not keys:
                    del index[value]
            for value in new:
                if value not in old:  # an unchanged value keeps the key's place in the index
                    index.setdefault(value, {})[key] = None
        for listener in self._store_listeners:
            listener(previous, obj)

    def _drop(self, key: tuple[str, str]) -> None:
        previous = self.objects.pop(key, None)
        if previous is not None:
            self._unindex(key, previous)
            for listener in self._store_listeners:
                listener(previous, None)

    def observe(self, obj: JsonDict) -> None:
        """Take an object the caller just wrote, so the next reconcile does not act on stale state."""
        key = object_key(obj)
        version = _resource_version(obj)
        if version and version <= self._deleted.get(key, 0):
            return
        current = self.objects.get(key)
        if current is None or version >= _resource_version(current):
            self._put(key, obj)

    def forget(self, obj: JsonDict) -> None:
        self._drop(object_key(obj))

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
        before = self.objects
        self.objects = {object_key(item): _with_kind(item, self.kind) for item in listing.get("items", [])}
        self._indexes = {name: {} for name in self._index_functions}
        for key, obj in self.objects.items():
            self._index(key, obj)
        self._deleted = {}
        for listener in self._store_listeners:
            listener(None, None)
        self.synced.set()
        self._offer_relisted(before)
        self._notify(None)
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
            key = object_key(obj)
            old = self.objects.get(key) if self._change_listeners else None
            if kind == "DELETED":
                self._drop(key)
                self._deleted[key] = _resource_version(obj)
            else:
                self.observe(_with_kind(obj, self.kind))
            change = None
            if self._change_listeners:
                change = Change(
                    "DELETED" if kind == "DELETED" else "ADDED" if kind == "ADDED" else "MODIFIED",
                    _with_kind(obj, self.kind),
                    old,
                )
            self._notify(obj, change)
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
