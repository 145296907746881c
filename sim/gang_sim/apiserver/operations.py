"""The verbs, independent of HTTP: create, get, list, update, patch, delete, deletecollection.

One generic implementation per verb serves every kind through its :class:`ResourceInfo`. The
order of checks mirrors kube-apiserver: decode and default, namespace lifecycle, mutating
admission, validation (422), validating admission (webhooks), then the storage precondition
(409). Each read-decide-write sequence holds the store lock, so concurrent requests see
optimistic concurrency exactly as clients expect: the second writer of a stale
resourceVersion gets 409 Conflict.
"""

from __future__ import annotations

import random
from typing import Any

from gang_sim.apiserver import admission, objects, patching
from gang_sim.apiserver.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Expired,
    InternalError,
    NotFound,
    UnprocessablePatch,
)
from gang_sim.apiserver.gc import DEFAULT_REACTION_DELAY, Collector
from gang_sim.apiserver.json_copy import json_copy
from gang_sim.apiserver.options import (
    CONTINUE_TOO_OLD,
    DeleteOptions,
    ListOptions,
    check_fields,
    decode_continue,
    encode_continue,
    parse_version,
)
from gang_sim.apiserver.registry import Registry, ResourceInfo
from gang_sim.apiserver.store import AlreadyStored, StaleVersion, Store, TooOld

JsonDict = objects.JsonDict
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
# What a write to the status subresource reads from its body.
_STATUS_WRITE_FIELDS = ("kind", "apiVersion", "metadata", "status")


# UIDs must be unique, not secret: uuid4() reads os.urandom and builds a UUID object on every
# call, a visible cost at thousands of creates a second; a PRNG seeded once from os.urandom
# gives the same version-4 (RFC 4122 variant) text.
_uid_source = random.Random()
_UID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UID_SET = (0x4000 << 64) | (0x8000 << 48)


def _new_uid() -> str:
    digits = f"{(_uid_source.getrandbits(128) & _UID_CLEAR) | _UID_SET:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class Api:
    def __init__(
        self,
        registry: Registry,
        store: Store,
        clock: objects.Clock = objects.utc_now,
        gc_delay: float = DEFAULT_REACTION_DELAY,
    ):
        self.registry = registry
        self.store = store
        self.clock = clock
        self.gc = Collector(registry, store, clock, reaction_delay=gc_delay)

    # --- reads --------------------------------------------------------------------------------

    def get(self, info: ResourceInfo, namespace: str, name: str) -> JsonDict:
        obj = self.store.get(info.key, namespace, name)
        if obj is None:
            raise NotFound(info.resource, name)
        return obj

    def list_objects(
        self, info: ResourceInfo, namespace: str | None, options: ListOptions
    ) -> tuple[list[JsonDict], JsonDict]:
        """Matching objects of one page and the list metadata (resourceVersion, continue)."""
        check_fields(info, options)
        with self.store.lock:
            start = ""
            if options.continue_token:
                rv, start = decode_continue(options.continue_token)
                items = self._snapshot_or_gone(info, namespace, rv, options)
            elif options.resource_version and options.resource_version_match == "Exact":
                rv = parse_version(options.resource_version)
                items = self._snapshot_or_gone(info, namespace, rv, options)
            else:
                rv = self.store.resource_version
                items = self.store.items(info.key, namespace)
        selected = [o for o in items if _matches(o, options) and _sort_key(o) > start]
        list_meta: JsonDict = {"resourceVersion": str(rv)}
        if options.limit and len(selected) > options.limit:
            page = selected[: options.limit]
            list_meta["continue"] = encode_continue(rv, _sort_key(page[-1]))
            if options.labels.empty and options.fields.empty:
                list_meta["remainingItemCount"] = len(selected) - options.limit
            selected = page
        return selected, list_meta

    def _snapshot_or_gone(
        self, info: ResourceInfo, namespace: str | None, rv: int, options: ListOptions
    ) -> list[JsonDict]:
        try:
            return self.store.snapshot(info.key, namespace, rv)
        except TooOld as exc:
            if not options.continue_token:
                raise Expired(f"too old resource version: {exc.requested} ({exc.oldest})") from exc
            # Like upstream, offer a fresh token that continues inconsistently from the same key.
            _, start = decode_continue(options.continue_token)
            fresh = encode_continue(self.store.resource_version, start)
            raise Expired(CONTINUE_TOO_OLD, metadata={"continue": fresh}) from exc

    # --- create -------------------------------------------------------------------------------

    def create(
        self, info: ResourceInfo, namespace: str, body: Any, *, dry_run: bool = False, owned: bool = False
    ) -> JsonDict:
        """``owned``: ``body`` was parsed for this call alone and may be edited in place."""
        obj = admission.decode(info, namespace, body, owned=owned)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise InternalError("resourceVersion should not be set on objects to be created")
        for name in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            meta.pop(name, None)
        meta["creationTimestamp"] = objects.rfc3339(self.clock())
        if info.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if info.custom and "status" in info.subresources:
            obj.pop("status", None)  # custom resources with a status subresource drop it on create
        with self.store.lock:
            if info.namespaced:
                self._require_namespace(info, meta.get("name") or meta.get("generateName", ""), namespace)
            generate = not meta.get("name") and meta.get("generateName")
            for _attempt in range(8 if generate else 1):
                if generate:
                    meta["name"] = objects.generate_name(meta["generateName"])
                    if self.store.get(info.key, namespace, meta["name"]) is not None:
                        continue
                # A generated name may need another attempt from the same decoded object.
                candidate = json_copy(obj) if generate else obj
                candidate["metadata"]["uid"] = _new_uid()
                admission.mutate("CREATE", info, candidate, None, self.store)
                admission.check("CREATE", info, candidate, None, self.store)
                if dry_run:
                    return candidate
                try:
                    stored = self.store.commit("ADDED", info.key, candidate, owned=True)
                except AlreadyStored:
                    if generate:
                        continue
                    raise AlreadyExists(info.resource, meta["name"]) from None
                self.gc.collect_dangling(info, stored)
                return stored
            raise AlreadyExists(info.resource, meta.get("name", ""))

    # --- update and patch ---------------------------------------------------------------------

    def update(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        owned: bool = False,
    ) -> JsonDict:
        """``owned``: ``body`` was parsed for this call alone and may be edited in place."""
        with self.store.lock:
            old = self.get(info, namespace, name)
            return self._update(
                info, namespace, name, old, body, subresource=subresource, dry_run=dry_run, owned=owned
            )

    def patch(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> JsonDict:
        accepted = [patching.JSON_PATCH, patching.MERGE_PATCH]
        if not info.custom:
            accepted.append(patching.STRATEGIC_MERGE_PATCH)
        document = patching.decode_patch(content_type, raw, accepted)
        with self.store.lock:
            old = self.get(info, namespace, name)
            try:
                if content_type == patching.JSON_PATCH:
                    patched = patching.json_patch(old, document)
                elif content_type == patching.MERGE_PATCH:
                    patched = patching.merge_patch(old, document)
                else:
                    patched = patching.strategic_merge_patch(old, document)
            except patching.PatchError as exc:
                if exc.malformed:
                    raise BadRequest(str(exc)) from exc
                raise UnprocessablePatch(str(exc)) from exc
            return self._update(info, namespace, name, old, patched, subresource=subresource, dry_run=dry_run)

    def _update(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        old: JsonDict,
        body: Any,
        *,
        subresource: str,
        dry_run: bool,
        owned: bool = False,
    ) -> JsonDict:
        if subresource == "status" and isinstance(body, dict):
            # Only the status of the body is kept (below): copying and defaulting the rest (a
            # pod's whole spec, for every kubelet and scheduler status write) would be thrown away.
            body = {key: body[key] for key in _STATUS_WRITE_FIELDS if key in body}
        new = admission.decode(info, namespace, body, owned=owned)
        meta = new["metadata"]
        if meta.get("name") != name:
            raise BadRequest(
                f"the name of the object ({meta.get('name', '')}) does not match the name on the URL ({name})"
            )
        old_meta = objects.meta(old)
        if meta.get("resourceVersion") and meta["resourceVersion"] != old_meta.get("resourceVersion"):
            raise Conflict(info.resource, name)
        for server_field in _SERVER_META:
            if server_field in old_meta:
                meta[server_field] = old_meta[server_field]
            else:
                meta.pop(server_field, None)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        meta.pop("managedFields", None)
        if subresource == "status":
            status = new.get("status")
            new = dict(old)  # shares old's parts, read only: the store copies what it keeps
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif "status" in info.subresources:
            if "status" in old:
                new["status"] = json_copy(old["status"])
            else:
                new.pop("status", None)
        admission.mutate("UPDATE", info, new, old, self.store, subresource=subresource)
        if info.generation and subresource != "status" and _spec_changed(info, old, new):
            new["metadata"]["generation"] = int(old_meta.get("generation", 0)) + 1
        if objects.without_version(new) == objects.without_version(old):
            return old  # a no-op write stores nothing and bumps no resourceVersion, as upstream
        admission.check("UPDATE", info, new, old, self.store, subresource=subresource)
        if dry_run:
            return new
        try:
            stored = self.store.commit(
                "MODIFIED", info.key, new, expected_rv=old_meta.get("resourceVersion"), owned=True
            )
        except StaleVersion:
            raise Conflict(info.resource, name) from None
        finalized = self.gc.finalize_if_ready(info, stored)
        if finalized is None:
            self.gc.collect_dangling(info, stored)
        return finalized or stored

    # --- delete -------------------------------------------------------------------------------

    def delete(
        self, info: ResourceInfo, namespace: str, name: str, options: DeleteOptions, *, dry_run: bool = False
    ) -> JsonDict:
        with self.store.lock:
            obj = self.get(info, namespace, name)
            meta = objects.meta(obj)
            if options.uid and options.uid != meta.get("uid"):
                raise Conflict(
                    info.resource,
                    name,
                    f"Precondition failed: UID in precondition: {options.uid}, "
                    f"UID in object meta: {meta.get('uid')}",
                )
            if options.resource_version and options.resource_version != meta.get("resourceVersion"):
                raise Conflict(
                    info.resource,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{options.resource_version}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                )
            if dry_run:
                return obj
            return self.gc.delete(info, obj, options.propagation, options.grace_period)

    def delete_collection(
        self, info: ResourceInfo, namespace: str | None, list_options: ListOptions, options: DeleteOptions
    ) -> tuple[list[JsonDict], JsonDict]:
        with self.store.lock:
            matching, _ = self.list_objects(
                info, namespace, ListOptions(list_options.labels, list_options.fields)
            )
            deleted = []
            for obj in matching:
                current = self.store.get(
                    info.key, objects.meta(obj).get("namespace", ""), objects.meta(obj)["name"]
                )
                if current is not None:
                    deleted.append(self.gc.delete(info, current, options.propagation, options.grace_period))
            return deleted, {"resourceVersion": str(self.store.resource_version)}

    # --- shared steps -------------------------------------------------------------------------

    def _require_namespace(self, info: ResourceInfo, name: str, namespace: str) -> None:
        if self.store.get("/namespaces", "", namespace) is None:
            raise NotFound("namespaces", namespace)
        self.gc.ensure_namespace_open(info.resource, name, namespace)


def _sort_key(obj: JsonDict) -> str:
    meta = objects.meta(obj)
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _matches(obj: JsonDict, options: ListOptions) -> bool:
    return options.labels.matches(objects.meta(obj).get("labels")) and options.fields.matches(obj)


def _spec_changed(info: ResourceInfo, old: JsonDict, new: JsonDict) -> bool:
    """Anything but metadata (and status, where a status subresource owns it) changed."""
    ignored = {"metadata", "status"} if "status" in info.subresources else {"metadata"}
    return {k: v for k, v in old.items() if k not in ignored} != {
        k: v for k, v in new.items() if k not in ignored
    }
