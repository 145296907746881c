"""Pure helpers for Kubernetes wire objects (camelCase dicts): conversion, merging, a pod's requests.

The job spec accepts what Airflow users already have — plain dicts, YAML, or the official
client's model objects (``V1Volume``, ``V1Toleration``) — and works on plain dicts from then on.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping
from typing import Any

from airflow_gang.model.quantity import Quantity, sum_resources


def to_wire(value: Any) -> Any:
    """Turn official-client model objects (anything with ``attribute_map``) into wire dicts.

    Duck-typed on the generated models' ``openapi_types``/``attribute_map`` so that this module
    needs no client import; dicts, lists and scalars pass through (copied).
    """
    if hasattr(value, "openapi_types") and hasattr(value, "attribute_map"):
        wire: dict[str, Any] = {}
        for attribute in value.openapi_types:
            item = getattr(value, attribute)
            if item is not None:
                wire[value.attribute_map[attribute]] = to_wire(item)
        return wire
    if isinstance(value, Mapping):
        return {str(key): to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return copy.deepcopy(value)


def _is_named_list(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(item, Mapping) and "name" in item for item in items)


def merge_named_lists(base: list[Any], overlay: list[Any]) -> list[Any]:
    """Merge two lists of named items (containers, env, volumes): same name merges, new appends."""
    merged = [copy.deepcopy(item) for item in base]
    positions = {item["name"]: index for index, item in enumerate(merged)}
    for item in overlay:
        if item["name"] in positions:
            index = positions[item["name"]]
            merged[index] = deep_merge(merged[index], item)
        else:
            positions[item["name"]] = len(merged)
            merged.append(copy.deepcopy(item))
    return merged


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``overlay`` onto ``base`` the way a strategic merge patch treats pod templates.

    Mappings merge recursively; lists whose items all carry a ``name`` merge by name; any other
    value in ``overlay`` replaces the one in ``base``; ``None`` in ``overlay`` deletes the key.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        current = merged.get(key)
        if value is None:
            merged.pop(key, None)
        elif isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        elif (
            isinstance(current, list)
            and isinstance(value, list)
            and _is_named_list(current)
            and _is_named_list(value)
        ):
            merged[key] = merge_named_lists(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def pod_requests(template: Mapping[str, Any]) -> dict[str, Quantity]:
    """What one pod asks the scheduler for: its containers' requests (limits where none).

    Init containers are left out, as the training-operator leaves them out of ``minResources``.
    """
    containers = (template.get("spec") or {}).get("containers") or []
    totals = sum_resources(
        (container.get("resources") or {}).get("requests")
        or (container.get("resources") or {}).get("limits")
        or {}
        for container in containers
    )
    return dict(totals)


def ordered(mapping: dict[str, Any], first: tuple[str, ...]) -> dict[str, Any]:
    """The same mapping with ``first`` keys leading, so rendered YAML reads top-down."""
    head = {key: mapping[key] for key in first if key in mapping}
    return {**head, **{key: value for key, value in mapping.items() if key not in head}}
