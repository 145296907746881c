"""Controller ownerReferences: making them, and finding an object's controlling owner.

Every controller of the Trainer v2 chain (TrainJob -> JobSet -> Job -> Pod, TrainJob ->
PodGroup, JobSet -> Service) marks what it creates with one reference, ``controller: true`` and
``blockOwnerDeletion: true``, as ``ctrl.SetControllerReference`` does; the API server's garbage
collector follows these references when an owner is deleted, and the controllers find their
children through them (`controlled_by`, an informer index function).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.controllers.kinds import Kind

JsonDict = dict[str, Any]


def owner_reference(owner: JsonDict, kind: Kind) -> JsonDict:
    metadata = owner.get("metadata") or {}
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: JsonDict | None, kind: Kind) -> str | None:
    """The UID of ``obj``'s controlling owner when that owner is of ``kind``."""
    for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        if ref.get("controller") and ref.get("kind") == kind.kind and group == kind.group:
            return str(ref.get("uid") or "")
    return None


def controlled_by(kind: Kind) -> Callable[[JsonDict], list[str]]:
    """An informer index function: the owner UID of objects controlled by a ``kind``."""

    def values(obj: JsonDict) -> list[str]:
        uid = controller_uid(obj, kind)
        return [uid] if uid else []

    return values


def is_controlled_by(obj: JsonDict | None, owner: JsonDict, kind: Kind) -> bool:
    return controller_uid(obj, kind) == str((owner.get("metadata") or {}).get("uid") or "")
