"""The ``scale`` subresource of custom resources, as apiextensions-apiserver serves it.

A CRD that declares ``subresources.scale`` names three paths in its objects: the desired
replicas (``specReplicasPath``), the observed ones (``statusReplicasPath``) and optionally a
label selector (``labelSelectorPath``). ``GET .../{name}/scale`` reads them into an
``autoscaling/v1`` ``Scale``; ``PUT`` and ``PATCH`` (merge, JSON or strategic merge patch,
applied to that Scale) write ``spec.replicas`` back to the spec path and answer the new Scale.
The usual checks hold: a ``metadata.resourceVersion`` in the Scale is a precondition (409
Conflict when stale), ``spec.replicas`` must be >= 0 (422 ``Scale.autoscaling``), the object
still passes its schema. As upstream, a missing spec path fails a GET with 500 and an update
that leaves it unset with 400; the CRD's webhooks do not run (they are registered for the
resource, not its ``scale`` subresource).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from gang_sim.apiserver import objects, patching
from gang_sim.apiserver.errors import (
    BadRequest,
    Conflict,
    InternalError,
    Invalid,
    UnprocessablePatch,
    invalid,
)
from gang_sim.apiserver.operations import Api
from gang_sim.apiserver.registry import ResourceInfo, ScalePaths

JsonDict = dict[str, Any]
SCALE_KIND, SCALE_API_VERSION = "Scale", "autoscaling/v1"
_UNSET = -2147483648  # what upstream puts in spec.replicas while the spec path is missing
_PATCH_TYPES = (patching.JSON_PATCH, patching.MERGE_PATCH, patching.STRATEGIC_MERGE_PATCH)


def path_keys(path: str) -> list[str]:
    """``.spec.pytorchReplicaSpecs.Worker.replicas`` -> its keys (CRDs allow only this form)."""
    return [key for key in path.split(".") if key]


def _get_path(obj: JsonDict, path: str) -> Any:
    value: Any = obj
    for key in path_keys(path):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _set_path(obj: JsonDict, path: str, value: Any) -> None:
    *parents, last = path_keys(path)
    target = obj
    for key in parents:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[last] = value


def _paths(info: ResourceInfo) -> ScalePaths:
    assert info.scale is not None, f"{info.resource} has no scale subresource"
    return info.scale


def to_scale(info: ResourceInfo, obj: JsonDict) -> tuple[JsonDict, bool]:
    """The object's ``Scale``, and whether its spec replicas path is set."""
    paths = _paths(info)
    meta = objects.meta(obj)
    desired, observed = _get_path(obj, paths.spec_replicas), _get_path(obj, paths.status_replicas)
    selector = _get_path(obj, paths.label_selector) if paths.label_selector else None
    status: JsonDict = {"replicas": int(observed) if isinstance(observed, int) else 0}
    if selector:
        status["selector"] = str(selector)
    found = isinstance(desired, int)
    spec = {"replicas": desired} if found and desired else {}  # replicas is omitempty in Go
    scale = {
        "kind": SCALE_KIND,
        "apiVersion": SCALE_API_VERSION,
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        },
        "spec": spec,
        "status": status,
    }
    return scale, found


class ScaleEndpoint:
    """``.../{name}/scale`` of one object of ``info`` (a kind with ``info.scale`` set)."""

    def __init__(self, api: Api, info: ResourceInfo, namespace: str, name: str) -> None:
        self.api = api
        self.info = info
        self.paths = _paths(info)
        self.namespace = namespace
        self.name = name

    def get(self) -> JsonDict:
        found_scale, found = to_scale(self.info, self.api.get(self.info, self.namespace, self.name))
        if not found:
            raise InternalError(f'the spec replicas field "{self.paths.spec_replicas}" does not exist')
        return found_scale

    def update(self, body: Any, *, dry_run: bool = False) -> JsonDict:
        """``PUT``: the body is the whole new Scale."""
        return self._write(lambda _old: body, dry_run)

    def patch(self, content_type: str, raw: bytes, *, dry_run: bool = False) -> JsonDict:
        """``PATCH``: the patch applies to the current Scale."""
        document = patching.decode_patch(content_type, raw, _PATCH_TYPES)

        def patched(old: JsonDict) -> Any:
            try:
                if content_type == patching.JSON_PATCH:
                    return patching.json_patch(old, document)
                if content_type == patching.MERGE_PATCH:
                    return patching.merge_patch(old, document)
                return patching.strategic_merge_patch(old, document)
            except patching.PatchError as exc:
                if exc.malformed:
                    raise BadRequest(str(exc)) from exc
                raise UnprocessablePatch(str(exc)) from exc

        return self._write(patched, dry_run)

    def _write(self, change: Callable[[JsonDict], Any], dry_run: bool) -> JsonDict:
        with self.api.store.lock:  # read, decide and write as one step
            current = self.api.get(self.info, self.namespace, self.name)
            old_scale, found = to_scale(self.info, current)
            if not found:
                old_scale["spec"] = {"replicas": _UNSET}
            new_scale = change(old_scale)
            replicas = _checked_replicas(new_scale, self.name, self.paths)
            precondition = (new_scale.get("metadata") or {}).get("resourceVersion")
            if precondition and precondition != objects.meta(current).get("resourceVersion"):
                raise Conflict(self.info.resource, self.name)
            updated = copy.deepcopy(current)
            _set_path(updated, self.paths.spec_replicas, replicas)
            stored = self.api.update(
                self.info, self.namespace, self.name, updated, subresource="scale", dry_run=dry_run
            )
        return to_scale(self.info, stored)[0]


def _checked_replicas(scale: Any, name: str, paths: ScalePaths) -> int:
    if not isinstance(scale, dict):
        raise BadRequest("the object provided is unrecognized (must be of type Scale)")
    kind, api_version = scale.get("kind", SCALE_KIND), scale.get("apiVersion", SCALE_API_VERSION)
    if kind != SCALE_KIND:
        raise BadRequest(f"the kind of the object ({kind}) does not match the expected kind ({SCALE_KIND})")
    if api_version != SCALE_API_VERSION:
        raise BadRequest(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({SCALE_API_VERSION})"
        )
    named = (scale.get("metadata") or {}).get("name")
    if named and named != name:
        raise BadRequest(f"the name of the object ({named}) does not match the name on the URL ({name})")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise BadRequest(f"the object provided is unrecognized: spec.replicas: {json.dumps(replicas)}")
    if replicas == _UNSET:
        raise BadRequest(f'the spec replicas field "{paths.spec_replicas}" cannot be empty')
    if replicas < 0:
        raise Invalid(
            "Scale.autoscaling",
            name,
            [invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
        )
    return replicas
