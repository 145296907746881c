"""Load ``apiextensions.k8s.io/v1`` CustomResourceDefinition YAML into registry rows.

Used for the upstream CRD files (the tests' ``shared_crds`` fixture) so tests can prove objects pass the
real schemas. A loaded CRD replaces the row of the same group and plural and keeps that row's
hooks (defaulting, webhooks); its served storage version, scope, short names, status
subresource, ``scale`` subresource (its replica and selector paths) and printer columns come
from the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from gang_sim.apiserver.registry import PrinterColumn, Registry, ResourceInfo, ScalePaths

JsonDict = dict[str, Any]


def _printer_columns(version: JsonDict) -> tuple[PrinterColumn, ...]:
    return tuple(
        PrinterColumn(
            name=c["name"],
            type=c.get("type", "string"),
            json_path=c["jsonPath"],
            priority=int(c.get("priority", 0)),
            format=c.get("format", ""),
            description=c.get("description", ""),
        )
        for c in version.get("additionalPrinterColumns") or []
    )


def crd_resources(documents: Iterable[JsonDict], base: Registry) -> list[ResourceInfo]:
    """ResourceInfo rows for CRD documents; rows already in ``base`` keep their hooks."""
    rows: list[ResourceInfo] = []
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        names = spec["names"]
        served = [v for v in spec["versions"] if v.get("served", True)]
        version = next((v for v in served if v.get("storage")), served[0])
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
        fields: JsonDict = {
            "version": version["name"],
            "kind": names["kind"],
            "namespaced": spec.get("scope", "Namespaced") == "Namespaced",
            "schema": schema,
            "subresources": frozenset(k for k in subresources if k in ("status", "scale")),
            "scale": ScalePaths(
                scale["specReplicasPath"], scale["statusReplicasPath"], scale.get("labelSelectorPath", "")
            )
            if scale is not None
            else None,
            "short_names": tuple(names.get("shortNames") or ()),
            "singular": names.get("singular", ""),
            "categories": tuple(names.get("categories") or ()),
            "printer_columns": _printer_columns(version),
        }
        existing = next((r for r in base if r.group == spec["group"] and r.plural == names["plural"]), None)
        if existing is not None:
            rows.append(dataclasses.replace(existing, **fields))
        else:
            rows.append(ResourceInfo(group=spec["group"], plural=names["plural"], **fields))
    return rows


def load_crds(paths: Iterable[str | Path], base: Registry) -> list[ResourceInfo]:
    """Read CRD YAML files (several documents per file allowed) into registry rows."""
    documents: list[JsonDict] = []
    # libyaml's loader when PyYAML has it: upstream CRD files are megabytes of YAML, which the
    # pure-Python loader takes seconds to read.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            documents.extend(d for d in yaml.load_all(handle, Loader=loader) if d)
    return crd_resources(documents, base)
