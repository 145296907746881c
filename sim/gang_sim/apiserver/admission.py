"""The admission chain every write passes, in kube-apiserver's order.

``decode`` checks kind/apiVersion/namespace against the URL and applies the schema's
defaults and pruning (what decoding does upstream); ``mutate`` runs defaulting and mutating
admission; ``check`` runs validation (422 ``Invalid`` with every cause) and then the
validating admission webhooks. The ``status`` and ``scale`` subresources skip mutation, kind
validators and webhooks, as upstream registers them on the main resource only.
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver import objects, openapi
from gang_sim.apiserver.errors import BadRequest, Cause, Invalid
from gang_sim.apiserver.json_copy import json_copy
from gang_sim.apiserver.registry import ClusterView, Operation, ResourceInfo
from gang_sim.apiserver.validation import validate_metadata, validate_metadata_update

JsonDict = dict[str, Any]


def decode(info: ResourceInfo, namespace: str, body: Any, *, owned: bool = False) -> JsonDict:
    """A private copy of ``body`` checked against the URL, with schema defaults and pruning.

    ``owned``: the caller hands ``body`` over (parsed from this very request, shared with
    nothing), so it is edited in place instead of copied.
    """
    if not isinstance(body, dict):
        raise BadRequest(f"the object provided is unrecognized (must be of type {info.kind})")
    obj = body if owned else json_copy(body)
    kind, api_version = obj.setdefault("kind", info.kind), obj.setdefault("apiVersion", info.api_version)
    if kind != info.kind:
        raise BadRequest(f"the kind of the object ({kind}) does not match the expected kind ({info.kind})")
    if api_version != info.api_version:
        raise BadRequest(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({info.api_version})"
        )
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be an object")
    if info.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if info.schema is not None:
        openapi.apply_defaults(info.schema, obj)
        openapi.prune(info.schema, obj, root=True)
    return obj


def mutate(
    op: Operation,
    info: ResourceInfo,
    new: JsonDict,
    old: JsonDict | None,
    view: ClusterView,
    *,
    subresource: str = "",
) -> None:
    """Defaulting and mutating admission, in place."""
    if subresource:
        return
    for mutator in info.mutators:
        mutator(op, new, old, view)
    if info.schema is not None and info.mutators:
        # Upstream defaults again after mutating admission changed the object.
        openapi.apply_defaults(info.schema, new)


def check(
    op: Operation,
    info: ResourceInfo,
    new: JsonDict,
    old: JsonDict | None,
    view: ClusterView,
    *,
    subresource: str = "",
) -> None:
    """Validation (422 with causes), then validating admission (webhooks)."""
    causes: list[Cause] = validate_metadata(info, new)
    if old is not None:
        causes += validate_metadata_update(old, new)
    if not subresource:
        for validator in info.validators:
            causes += validator(new, old)
    if info.schema is not None:
        causes += openapi.validate(info.schema, {k: v for k, v in new.items() if k != "metadata"})
    if causes:
        raise Invalid(info.qualified_kind, objects.meta(new).get("name", ""), causes)
    if subresource:
        return
    for admit in info.admission:
        admit(op, new, old, view)
