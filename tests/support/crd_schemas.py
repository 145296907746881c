"""The upstream CRD schemas a real kube-apiserver enforces (the team's shared folder, the
``shared_crds`` fixture): a CRD's schema of one version, and the fields its structural-schema
pruning would silently drop from a manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def crd_schema(crds: Path, filename: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((crds / filename).read_text())
    for candidate in crd["spec"]["versions"]:
        if candidate["name"] == version:
            schema: dict[str, Any] = candidate["schema"]["openAPIV3Schema"]
            return schema
    raise AssertionError(f"{filename} has no version {version}")


def pruned_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths the apiserver would prune because the structural schema does not declare them."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                found += pruned_fields(item, properties[key], f"{path}.{key}")
            elif isinstance(additional, dict):
                found += pruned_fields(item, additional, f"{path}.{key}")
            elif properties is not None and path != ".metadata":
                found.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += pruned_fields(item, schema["items"], f"{path}[{index}]")
    return found
