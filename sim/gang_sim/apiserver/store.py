"""The object store: one cluster-wide resourceVersion, a bounded event log, watch fan-out.

Every write goes through :meth:`Store.commit`, which checks the precondition (absent for
ADDED, the expected resourceVersion otherwise), bumps the single integer resourceVersion,
stores the object, appends an :class:`Event` to the log and offers it to the watchers of that
resource. The log keeps the last ``window`` events; anything older is compacted, and a watch
or a continue token that needs it gets 410 Expired, as etcd compaction causes upstream. The
log doubles as history: :meth:`snapshot` rolls the current state back to an older
resourceVersion, which is how paginated lists stay consistent across pages.

Thread and async safety: one re-entrant lock guards all state. Callers that read, decide and
write hold ``store.lock`` across the whole sequence (it is re-entrant). Stored objects are
never mutated in place: readers may keep references, writers always commit new dicts.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from gang_sim.apiserver.json_copy import json_copy
from gang_sim.apiserver.watching import Event, EventType, Watcher

JsonDict = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace, name)
Ref = tuple[str, str, str]  # (resource key, namespace, name)


class StoreError(Exception):
    """A failed write precondition; the API layer turns it into the right Status."""


class AlreadyStored(StoreError):
    pass


class NotStored(StoreError):
    pass


class StaleVersion(StoreError):
    pass


class TooOld(StoreError):
    """The requested resourceVersion is older than the retained event window."""

    def __init__(self, requested: int, oldest: int):
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class Store:
    def __init__(self, window: int = 10_000, watch_queue_size: int = 10_000):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.lock = threading.RLock()
        self.window = window
        self.watch_queue_size = watch_queue_size
        self._rv = 0
        self._compacted = 0
        self._objects: dict[str, dict[ObjectKey, JsonDict]] = defaultdict(dict)
        self._uids: dict[str, Ref] = {}
        self._dependents: dict[str, set[Ref]] = defaultdict(set)
        self._log: deque[Event] = deque()
        self._watchers: dict[str, set[Watcher]] = defaultdict(set)
        self._listeners: list[Callable[[Event], None]] = []

    # --- reads --------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def oldest_version(self) -> int:
        """The oldest resourceVersion a watch or a snapshot can still start from."""
        return self._compacted

    def get(self, key: str, namespace: str, name: str) -> JsonDict | None:
        return self._objects[key].get((namespace, name))

    def lookup(self, group: str, plural: str, namespace: str, name: str) -> JsonDict | None:
        """:class:`ClusterView` for admission hooks."""
        return self.get(f"{group}/{plural}", namespace, name)

    def objects(self, group: str, plural: str) -> list[JsonDict]:
        return self.items(f"{group}/{plural}")

    def by_uid(self, uid: str) -> tuple[Ref, JsonDict] | None:
        with self.lock:
            ref = self._uids.get(uid)
            if ref is None:
                return None
            obj = self.get(*ref)
            return (ref, obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[tuple[Ref, JsonDict]]:
        with self.lock:
            found = []
            for ref in sorted(self._dependents.get(owner_uid, ())):
                obj = self.get(*ref)
                if obj is not None:
                    found.append((ref, obj))
            return found

    def items(self, key: str, namespace: str | None = None) -> list[JsonDict]:
        """Objects of a resource sorted by (namespace, name), the order lists use."""
        with self.lock:
            entries = self._objects[key]
            keys = sorted(k for k in entries if namespace is None or k[0] == namespace)
            return [entries[k] for k in keys]

    def count(self, key: str, namespace: str) -> int:
        with self.lock:
            return sum(1 for k in self._objects[key] if k[0] == namespace)

    def snapshot(self, key: str, namespace: str | None, rv: int) -> list[JsonDict]:
        """The objects as they were at ``rv``, rolled back through the event log."""
        with self.lock:
            if rv < self._compacted:
                raise TooOld(rv, self._compacted + 1)
            state = {k: v for k, v in self._objects[key].items() if namespace is None or k[0] == namespace}
            for event in reversed(self._log):
                if event.rv <= rv:
                    break
                if event.key != key or (namespace is not None and event.namespace != namespace):
                    continue
                ident = (event.namespace, event.name)
                if event.type == "ADDED":
                    state.pop(ident, None)
                elif event.prev is not None:
                    state[ident] = event.prev
            return [state[k] for k in sorted(state)]

    # --- writes -------------------------------------------------------------------------------

    def commit(
        self,
        type_: EventType,
        key: str,
        obj: JsonDict,
        expected_rv: str | None = None,
        *,
        owned: bool = False,
    ) -> JsonDict:
        """The one write path. ``obj`` is copied; the stored copy (new resourceVersion) is returned.

        ADDED requires the object to be absent; MODIFIED and DELETED require it present and,
        if ``expected_rv`` is given, at that resourceVersion.

        ``owned``: the caller built ``obj`` for this write and hands it over; it is kept as it is
        (only its metadata is copied, to take the new resourceVersion). Its parts may be shared
        with other stored objects: stored objects are never changed in place, every change is a
        new object.
        """
        with self.lock:
            meta = obj["metadata"]
            ident = (meta.get("namespace", ""), meta["name"])
            current = self._objects[key].get(ident)
            if type_ == "ADDED" and current is not None:
                raise AlreadyStored(meta["name"])
            if type_ != "ADDED":
                if current is None:
                    raise NotStored(meta["name"])
                if expected_rv is not None and current["metadata"].get("resourceVersion") != expected_rv:
                    raise StaleVersion(meta["name"])
            self._rv += 1
            stored = {**obj, "metadata": dict(obj["metadata"])} if owned else json_copy(obj)
            stored["metadata"]["resourceVersion"] = str(self._rv)
            ref = (key, *ident)
            if current is not None:
                self._unindex(ref, current)
            if type_ == "DELETED":
                del self._objects[key][ident]
            else:
                self._objects[key][ident] = stored
                self._index(ref, stored)
            event = Event(self._rv, type_, key, stored, current)
            self._log.append(event)
            if len(self._log) > self.window:
                self._compacted = self._log.popleft().rv
            for watcher in self._watchers.get(key, ()):
                watcher.offer(event)
            for listener in self._listeners:
                listener(event)
            return stored

    def _index(self, ref: Ref, obj: JsonDict) -> None:
        meta = obj["metadata"]
        self._uids[meta["uid"]] = ref
        for owner in meta.get("ownerReferences") or []:
            self._dependents[owner.get("uid", "")].add(ref)

    def _unindex(self, ref: Ref, obj: JsonDict) -> None:
        meta = obj["metadata"]
        self._uids.pop(meta["uid"], None)
        for owner in meta.get("ownerReferences") or []:
            deps = self._dependents.get(owner.get("uid", ""))
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self._dependents[owner.get("uid", "")]

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Call ``listener(event)`` after every commit, under the lock; it must be quick."""
        with self.lock:
            self._listeners.append(listener)

    # --- watches ------------------------------------------------------------------------------

    def watch(
        self, key: str, namespace: str | None, since: int | None, loop: asyncio.AbstractEventLoop
    ) -> tuple[Watcher, list[Event]]:
        """Register a watcher and return the events it must replay first, atomically.

        ``since=None`` replays the current objects as synthetic ADDED events (a watch without a
        resourceVersion, or "0"); otherwise the logged events after ``since``, or TooOld.
        """
        with self.lock:
            if since is None:
                replay = [
                    Event(int(obj["metadata"]["resourceVersion"]), "ADDED", key, obj, None)
                    for obj in self.items(key, namespace)
                ]
            else:
                if since < self._compacted:
                    raise TooOld(since, self._compacted + 1)
                replay = [
                    e
                    for e in self._log
                    if e.rv > since and e.key == key and (not namespace or e.namespace == namespace)
                ]
            watcher = Watcher(key, namespace, loop, self.watch_queue_size)
            self._watchers[key].add(watcher)
            return watcher, replay

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers[watcher.key].discard(watcher)

    def watcher_count(self) -> int:
        with self.lock:
            return sum(len(w) for w in self._watchers.values())

    def close_watchers(self) -> None:
        with self.lock:
            for watchers in self._watchers.values():
                for watcher in watchers:
                    watcher.close()

    def settled_version(self, watcher: Watcher) -> int | None:
        """The resourceVersion a BOOKMARK may claim, or None while events are in flight."""
        with self.lock:
            if watcher.pending or not watcher.queue.empty():
                return None
            return self._rv
