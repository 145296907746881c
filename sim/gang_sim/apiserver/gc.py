"""Deletion semantics: finalizers, graceful pod deletion, ownerReference garbage collection.

kube-apiserver and kube-controller-manager's garbage collector share this job upstream; here
it runs synchronously inside the deleting request (under the store lock), so the outcome is
the same, only sooner:

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
from typing import Literal

from gang_sim.apiserver import objects
from gang_sim.apiserver.errors import Forbidden
from gang_sim.apiserver.registry import Registry, ResourceInfo
from gang_sim.apiserver.store import Store
from gang_sim.apiserver.validation import FOREGROUND_FINALIZER, ORPHAN_FINALIZER

JsonDict = objects.JsonDict
Propagation = Literal["Background", "Foreground", "Orphan"]
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


class Collector:
    def __init__(self, registry: Registry, store: Store, clock: objects.Clock = objects.utc_now):
        self.registry = registry
        self.store = store
        self.clock = clock

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
                    for ref, dependent in self.store.dependents(objects.uid(current)):
                        dep_info = self.registry.by_key(ref[0])
                        if dep_info is not None:
                            self.delete(dep_info, dependent, "Foreground")
                    return self._release_foreground(info, objects.uid(current)) or current
                return current
            return self._remove(info, obj)

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
        """Delete ``obj`` if every owner reference it carries points at nothing."""
        with self.store.lock:
            refs = objects.owner_refs(obj)
            if not refs or objects.is_deleting(obj):
                return
            dangling = not any(self._owner_alive(ref, obj) for ref in refs)
            if dangling or any(self._blocks_foreground_deletion(ref) for ref in refs):
                current = self.store.get(
                    info.key, objects.meta(obj).get("namespace", ""), objects.meta(obj)["name"]
                )
                if current is not None:
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
        for owner in objects.owner_refs(removed):
            self._release_foreground_by_uid(str(owner.get("uid", "")))
        namespace = objects.meta(removed).get("namespace")
        if info.namespaced and namespace:
            self._finish_namespace(namespace)

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
