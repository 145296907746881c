"""Discovery documents derived from the registry: ``/version``, ``/api``, ``/apis``, group versions.

These are the legacy (non-aggregated) discovery shapes that kubectl 1.20, client-go and the
Python clients' ``DynamicClient`` read; newer clients that ask for aggregated discovery get
the legacy document and fall back to it, as they do with older servers.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from gang_sim.apiserver.registry import Registry, ResourceInfo

JsonDict = dict[str, Any]

SERVER_VERSION: JsonDict = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2",
    "gitCommit": "airflow-gang-simulator",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_SUBRESOURCE_VERBS = {
    "status": ("Self", ["get", "patch", "update"]),
    "binding": ("Binding", ["create"]),
    "log": ("Self", ["get"]),
    "scale": ("Scale", ["get", "patch", "update"]),
    "eviction": ("Eviction", ["create"]),
}
# Subresources served as another group's kind name it, as a CRD's ``scale`` and ``pods/eviction`` do.
_SUBRESOURCE_GROUP_VERSION = {"scale": ("autoscaling", "v1"), "eviction": ("policy", "v1")}


def _storage_hash(info: ResourceInfo) -> str:
    digest = hashlib.sha256(f"{info.api_version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_versions(server_address: str) -> JsonDict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(group: str, versions: list[str]) -> JsonDict:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> JsonDict:
    groups = [_group(g, v) for g, v in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> JsonDict | None:
    versions = registry.group_versions().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource(info: ResourceInfo) -> JsonDict:
    entry: JsonDict = {
        "name": info.plural,
        "singularName": info.singular_name,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    entry["storageVersionHash"] = _storage_hash(info)
    return entry


def resource_list(registry: Registry, group: str, version: str) -> JsonDict | None:
    infos = registry.resources_in(group, version)
    if not infos:
        return None
    resources: list[JsonDict] = []
    if not group:
        # The core group also serves the legacy bindings collection schedulers may use.
        resources.append(
            {
                "name": "bindings",
                "singularName": "binding",
                "namespaced": True,
                "kind": "Binding",
                "verbs": ["create"],
            }
        )
    for info in sorted(infos, key=lambda i: i.plural):
        resources.append(_resource(info))
        for sub in sorted(info.subresources):
            kind, verbs = _SUBRESOURCE_VERBS.get(sub, ("Self", ["get"]))
            entry: JsonDict = {
                "name": f"{info.plural}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
            }
            if sub in _SUBRESOURCE_GROUP_VERSION:
                entry["group"], entry["version"] = _SUBRESOURCE_GROUP_VERSION[sub]
            entry |= {"kind": info.kind if kind == "Self" else kind, "verbs": verbs}
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def openapi_v2(registry: Registry) -> JsonDict:
    """A minimal Swagger 2.0 document: paths omitted, custom resource schemas as definitions."""
    definitions: JsonDict = {}
    for info in registry:
        if info.schema is not None:
            name = ".".join(reversed(info.group.split("."))) + f".{info.version}.{info.kind}"
            definitions[name] = {
                **info.schema,
                "x-kubernetes-group-version-kind": [
                    {"group": info.group, "version": info.version, "kind": info.kind}
                ],
            }
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": {},
        "definitions": definitions,
    }
