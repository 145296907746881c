"""Deletion semantics: finalizers, graceful pod deletion, ownerReference garbage collection.

kube-apiserver and kube-controller-manager's garbage collector share this job upstream. The
API server's part runs inside the deleting request (under the store lock): marking, finalizers,
removing what holds no finalizer. The collector's part runs later, as upstream where the
collector learns of every change through its own informers and works from a queue
(``pkg/controller/garbagecollector``): each of its steps — deleting the dependents of an owner
that went or waits in the foreground, removing the ``foregroundDeletion`` finalizer of an owner
with no blocking dependent left, deleting an object whose owners are gone — happens
``reaction_delay`` seconds after the change that calls for it (0: at once, inside the request).
Controllers therefore see an owner marked for deletion, and its dependents, for a while, and
one that keeps re-creating a dependent of an owner waiting in the foreground (Kubeflow Trainer
v2.3 does: its reconcile never checks ``deletionTimestamp``) holds that owner for as long as it
wins the race, as on a real cluster:

- Background (default): the owner goes now; dependents whose owners are all gone are deleted
  next (dependents with other live owners just lose the dangling reference).
- Foreground: the owner gets ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer,
  its dependents are deleted, and the owner goes once no dependent with
  ``blockOwnerDeletion: true`` remains (a dependent held by its own finalizer, or a pod
  waiting for its kubelet, keeps the owner visible meanwhile).
- Orphan: dependents lose their reference to the owner and stay.
- Any object with finalizers only gets ``deletionTimestamp``; it goes when an update empties
  its finalizers.
- Pods: a pod bound to a node and not finished is deleted gracefully, as upstream: the API
  sets ``deletionTimestamp`` = now + grace (``gracePeriodSeconds``, default
  ``terminationGracePeriodSeconds``) and the pod stays until its kubelet confirms with a
  delete of grace 0. An unbound or finished pod, or grace 0, goes at once.
- A namespace being deleted turns ``Terminating``, its contents are deleted, and it goes when
  empty; nothing new may be created in it meanwhile.
- An object whose owner references all point at objects that do not exist is deleted in the
  background, as the upstream collector does for dangling owners.
- A dependent that appears while its owner is being deleted in the foreground (a controller
  that had not yet seen the deletion created it) is deleted too when its reference blocks the
  owner's deletion, as the upstream collector deletes an owner's blocking dependents for as long
  as the owner waits for them; otherwise the owner would wait for it forever.
"""

from __future__ import annotations

import datetime as dt
import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from gang_sim.apiserver import objects
from gang_sim.apiserver.errors import Forbidden
from gang_sim.apiserver.registry import Registry, ResourceInfo
from gang_sim.apiserver.store import Store
from gang_sim.apiserver.validation import FOREGROUND_FINALIZER, ORPHAN_FINALIZER

JsonDict = objects.JsonDict
Propagation = Literal["Background", "Foreground", "Orphan"]
log = logging.getLogger(__name__)
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
# The collector's reaction time: one informer event plus its queue, on a quiet cluster.
DEFAULT_REACTION_DELAY = 0.1
_IDLE_EXIT_SECONDS = 5.0


class DelayedWork:
    """One thread running callables at their due time; it exits when idle and restarts on demand."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def after(self, delay: float, work: Callable[[], None]) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + delay, next(self._sequence), work))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    if not self._due:
                        if not self._wake.wait(_IDLE_EXIT_SECONDS) and not self._due:
                            self._thread = None
                            return
                        continue
                    wait = self._due[0][0] - time.monotonic()
                    if wait <= 0:
                        work = heapq.heappop(self._due)[2]
                        break
                    self._wake.wait(wait)
            try:
                work()
            except Exception:  # one failed step must not stop the collector
                log.exception("garbage collector step failed")


class Collector:
    def __init__(
        self,
        registry: Registry,
        store: Store,
        clock: objects.Clock = objects.utc_now,
        reaction_delay: float = DEFAULT_REACTION_DELAY,
    ):
        self.registry = registry
        self.store = store
        self.clock = clock
        self.reaction_delay = reaction_delay
        self._work = DelayedWork("sim-garbage-collector")

    def _later(self, work: Callable[[], None]) -> None:
        """Run ``work`` (under the store lock) once the collector would have reacted."""

        def locked() -> None:
            with self.store.lock:
                work()

        if self.reaction_delay <= 0:
            locked()
        else:
            self._work.after(self.reaction_delay, locked)

    # --- entry points -------------------------------------------------------------------------

    def delete(
        self, info: ResourceInfo, obj: JsonDict, policy: Propagation | None = None, grace: int | None = None
    ) -> JsonDict:
        """Request deletion; returns the object as the DELETE response shows it."""
        with self.store.lock:
            if info.key == "/namespaces":
                return self._delete_namespace(obj)
            fins = objects.finalizers(obj)
            if policy is None:
                policy = (
                    "Orphan"
                    if ORPHAN_FINALIZER in fins
                    else "Foreground"
                    if FOREGROUND_FINALIZER in fins
                    else "Background"
                )
            if objects.is_deleting(obj):
                return self._shorten_grace(info, obj, grace)
            if policy == "Orphan":
                self._orphan_dependents(obj)
                fins = [f for f in fins if f != ORPHAN_FINALIZER]
            period = self._grace_period(info, obj, grace)
            if policy == "Foreground":
                fins = [*[f for f in fins if f != FOREGROUND_FINALIZER], FOREGROUND_FINALIZER]
            if period > 0 or fins:
                moment = self.clock() + dt.timedelta(seconds=period)
                marked = objects.edited(
                    obj,
                    deletionTimestamp=objects.rfc3339(moment),
                    deletionGracePeriodSeconds=period,
                    finalizers=fins or None,
                )
                current = self.store.commit("MODIFIED", info.key, marked)
                if policy == "Foreground":
                    owner_uid = objects.uid(current)
                    self._later(lambda: self._delete_dependents_of(owner_uid))
                return current
            return self._remove(info, obj)

    def _delete_dependents_of(self, owner_uid: str) -> None:
        """The collector's pass over an owner waiting in the foreground: delete its dependents
        (in the foreground too), then let the owner go if none blocks it."""
        found = self.store.by_uid(owner_uid)
        if found is None:
            return
        owner = found[1]
        if not objects.is_deleting(owner) or FOREGROUND_FINALIZER not in objects.finalizers(owner):
            return
        for ref, dependent in self.store.dependents(owner_uid):
            dep_info = self.registry.by_key(ref[0])
            if dep_info is not None and not objects.is_deleting(dependent):
                self.delete(dep_info, dependent, "Foreground")
        self._release_foreground_by_uid(owner_uid)

    def finalize_if_ready(self, info: ResourceInfo, obj: JsonDict) -> JsonDict | None:
        """After an update: an object being deleted with no finalizers left goes now.

        Returns the DELETED object, or None if it stays.
        """
        with self.store.lock:
            if not objects.is_deleting(obj) or objects.finalizers(obj):
                return None
            if objects.meta(obj).get("deletionGracePeriodSeconds", 0) > 0:
                return None  # graceful deletion in progress: the kubelet finishes it
            if info.key == "/namespaces":
                return None  # a namespace goes when its contents are gone
            return self._remove(info, obj)

    def collect_dangling(self, info: ResourceInfo, obj: JsonDict) -> None:
        """Soon delete ``obj`` if every owner reference it carries points at nothing, or one of
        its owners waits in the foreground for its blocking dependents."""
        if not objects.owner_refs(obj) or objects.is_deleting(obj):
            return
        uid = objects.uid(obj)
        self._later(lambda: self._collect(info, uid))

    def _collect(self, info: ResourceInfo, uid: str) -> None:
        found = self.store.by_uid(uid)
        if found is None:
            return
        current = found[1]
        refs = objects.owner_refs(current)
        if not refs or objects.is_deleting(current):
            return
        dangling = not any(self._owner_alive(ref, current) for ref in refs)
        if dangling or any(self._blocks_foreground_deletion(ref) for ref in refs):
            self.delete(info, current, None if dangling else "Foreground")

    def _blocks_foreground_deletion(self, ref: JsonDict) -> bool:
        """The reference blocks an owner that waits in a foreground deletion for its dependents."""
        if not ref.get("blockOwnerDeletion"):
            return False
        found = self.store.by_uid(str(ref.get("uid", "")))
        if found is None:
            return False
        owner = found[1]
        return objects.is_deleting(owner) and FOREGROUND_FINALIZER in objects.finalizers(owner)

    def ensure_namespace_open(self, resource: str, name: str, namespace: str) -> None:
        ns = self.store.get("/namespaces", "", namespace)
        if ns is not None and objects.is_deleting(ns):
            raise Forbidden(
                resource,
                name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )

    # --- internals ----------------------------------------------------------------------------

    def _grace_period(self, info: ResourceInfo, obj: JsonDict, grace: int | None) -> int:
        if not info.graceful_delete:
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds", 30))
        return 1 if period < 0 else period

    def _shorten_grace(self, info: ResourceInfo, obj: JsonDict, grace: int | None) -> JsonDict:
        current_period = objects.meta(obj).get("deletionGracePeriodSeconds", 0)
        if grace is None or grace >= current_period:
            return obj
        moment = self.clock() + dt.timedelta(seconds=grace)
        updated = self.store.commit(
            "MODIFIED",
            info.key,
            objects.edited(obj, deletionTimestamp=objects.rfc3339(moment), deletionGracePeriodSeconds=grace),
        )
        return self.finalize_if_ready(info, updated) or updated

    def _remove(self, info: ResourceInfo, obj: JsonDict) -> JsonDict:
        removed = self.store.commit("DELETED", info.key, obj)
        self._after_removal(info, removed)
        return removed

    def _after_removal(self, info: ResourceInfo, removed: JsonDict) -> None:
        gone = objects.uid(removed)
        self._later(lambda: self._orphaned_by(gone))
        for owner in objects.owner_refs(removed):
            self._later(functools.partial(self._release_foreground_by_uid, str(owner.get("uid", ""))))
        namespace = objects.meta(removed).get("namespace")
        if info.namespaced and namespace:
            self._finish_namespace(namespace)

    def _orphaned_by(self, gone: str) -> None:
        """The collector's pass after an owner went: dependents with no live owner left are
        deleted, the others only lose the dangling reference."""
        for dep_ref, dependent in self.store.dependents(gone):
            dep_info = self.registry.by_key(dep_ref[0])
            if dep_info is None:
                continue
            others = [r for r in objects.owner_refs(dependent) if r.get("uid") != gone]
            live = [r for r in others if self._owner_alive(r, dependent)]
            if live:
                self.store.commit("MODIFIED", dep_info.key, objects.edited(dependent, ownerReferences=live))
            elif not objects.is_deleting(dependent):
                self.delete(dep_info, dependent)

    def _owner_alive(self, ref: JsonDict, dependent: JsonDict) -> bool:
        found = self.store.by_uid(str(ref.get("uid", "")))
        if found is None:
            return False
        (_, owner_ns, _), _ = found
        return owner_ns in ("", objects.meta(dependent).get("namespace", ""))

    def _orphan_dependents(self, owner: JsonDict) -> None:
        gone = objects.uid(owner)
        for ref, dependent in self.store.dependents(gone):
            refs = [r for r in objects.owner_refs(dependent) if r.get("uid") != gone]
            self.store.commit("MODIFIED", ref[0], objects.edited(dependent, ownerReferences=refs or None))

    def _release_foreground_by_uid(self, owner_uid: str) -> None:
        found = self.store.by_uid(owner_uid)
        if found is not None:
            info = self.registry.by_key(found[0][0])
            if info is not None:
                self._release_foreground(info, owner_uid)

    def _release_foreground(self, info: ResourceInfo, owner_uid: str) -> JsonDict | None:
        """Finish a foreground deletion once no blocking dependent remains."""
        found = self.store.by_uid(owner_uid)
        if found is None:
            return None
        owner = found[1]
        if not objects.is_deleting(owner) or FOREGROUND_FINALIZER not in objects.finalizers(owner):
            return None
        for _, dependent in self.store.dependents(owner_uid):
            if any(
                r.get("uid") == owner_uid and r.get("blockOwnerDeletion")
                for r in objects.owner_refs(dependent)
            ):
                return None
        fins = [f for f in objects.finalizers(owner) if f != FOREGROUND_FINALIZER]
        released = self.store.commit("MODIFIED", info.key, objects.edited(owner, finalizers=fins or None))
        return self.finalize_if_ready(info, released) or released

    def _delete_namespace(self, ns: JsonDict) -> JsonDict:
        name = objects.meta(ns)["name"]
        if name in PROTECTED_NAMESPACES:
            raise Forbidden("namespaces", name, "this namespace may not be deleted")
        if not objects.is_deleting(ns):
            marked = objects.edited(
                ns, deletionTimestamp=objects.rfc3339(self.clock()), deletionGracePeriodSeconds=0
            )
            marked["status"] = {**(marked.get("status") or {}), "phase": "Terminating"}
            ns = self.store.commit("MODIFIED", "/namespaces", marked)
            for info in self.registry:
                if info.namespaced:
                    for obj in self.store.items(info.key, name):
                        current = self.store.get(info.key, name, objects.meta(obj)["name"])
                        if current is not None:
                            self.delete(info, current)
        return self._finish_namespace(name) or ns

    def _finish_namespace(self, name: str) -> JsonDict | None:
        ns = self.store.get("/namespaces", "", name)
        if ns is None or not objects.is_deleting(ns):
            return None
        if any(self.store.count(info.key, name) for info in self.registry if info.namespaced):
            return None
        if objects.finalizers(ns):
            if (ns.get("spec") or {}).get("finalizers"):
                cleared = dict(ns, spec={**(ns.get("spec") or {}), "finalizers": []})
                return self.store.commit("MODIFIED", "/namespaces", cleared)
            return ns
        return self.store.commit("DELETED", "/namespaces", ns)
