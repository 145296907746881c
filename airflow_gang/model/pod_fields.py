"""Checks on the pod-template fields a job passes through (labels, annotations, node selector,
tolerations, volumes and their mounts, image pull secrets), each raising `GangSpecError` with
the field, the value and the fix, as `airflow_gang.model.validation` does for the job's own arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_gang.model.k8s_objects import to_wire
from airflow_gang.model.naming import (
    LABEL_PREFIX,
    is_dns_1123_label,
    is_dns_1123_subdomain,
    is_label_value,
    is_qualified_key,
)
from airflow_gang.model.validation import error, short

_TOLERATION_OPERATORS = {"Exists", "Equal"}
_TOLERATION_EFFECTS = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"}


def _check_keys(mapping: Mapping[str, str], field: str) -> None:
    for key in mapping:
        if not is_qualified_key(key):
            raise error(
                f"{field} key {key!r} is invalid: must be '[prefix/]name' with a DNS subdomain prefix and a "
                "name of at most 63 letters, digits, '-', '_' or '.', e.g. 'team' or 'acme.io/team'",
                field,
            )


def check_labels(value: dict[str, str]) -> dict[str, str]:
    _check_keys(value, "labels")
    for key, item in value.items():
        if key.startswith(LABEL_PREFIX):
            raise error(
                f"labels key {key!r} is reserved: keys under {LABEL_PREFIX} identify the Airflow task "
                "instance and are set by the operator",
                "labels",
            )
        if not is_label_value(item):
            raise error(
                f"labels[{key!r}]={item!r} is invalid: label values are at most 63 letters, digits, '-', '_' "
                "or '.', starting and ending with a letter or digit (put free text in annotations)",
                "labels",
            )
    return value


def check_annotations(value: dict[str, str]) -> dict[str, str]:
    _check_keys(value, "annotations")
    return value


def check_node_selector(value: dict[str, str]) -> dict[str, str]:
    _check_keys(value, "node_selector")
    for key, item in value.items():
        if not is_label_value(item):
            raise error(
                f"node_selector[{key!r}]={item!r} is invalid: must be a valid label value", "node_selector"
            )
    return value


def check_tolerations(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, toleration in enumerate(value):
        operator = toleration.get("operator", "Equal")
        effect = toleration.get("effect", "")
        if operator not in _TOLERATION_OPERATORS:
            raise error(
                f"tolerations[{index}].operator={operator!r} is invalid: use 'Exists' or 'Equal'",
                "tolerations",
            )
        if effect not in _TOLERATION_EFFECTS:
            raise error(
                f"tolerations[{index}].effect={effect!r} is invalid: use 'NoSchedule', 'PreferNoSchedule' or "
                "'NoExecute'",
                "tolerations",
            )
    return value


def check_volumes(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    for index, volume in enumerate(value):
        name = volume.get("name")
        if not isinstance(name, str) or not is_dns_1123_label(name):
            raise error(
                f"volumes[{index}].name={name!r} is invalid: every volume needs a DNS-1123 name, e.g. 'data'",
                "volumes",
            )
        if name in seen:
            raise error(
                f"volumes[{index}].name={name!r} is a duplicate: volume names must be unique", "volumes"
            )
        seen.add(name)
    return value


def check_volume_mounts(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, mount in enumerate(value):
        if not isinstance(mount.get("name"), str) or not str(mount.get("mountPath", "")).startswith("/"):
            raise error(
                f"volume_mounts[{index}]={short(mount)} is invalid: needs 'name' (a volume) and an absolute "
                "'mountPath', e.g. {'name': 'data', 'mountPath': '/data'}",
                "volume_mounts",
            )
    return value


def check_pull_secrets(value: Any) -> list[str]:
    if value is None:
        return []
    value = to_wire(value)
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise error(
            f"image_pull_secrets={short(value)} is invalid: must be a list of secret names",
            "image_pull_secrets",
        )
    names: list[str] = []
    for item in value:
        name = item.get("name") if isinstance(item, Mapping) else item
        if not isinstance(name, str) or not is_dns_1123_subdomain(name):
            raise error(
                f"image_pull_secrets entry {name!r} is invalid: must be the name of a Secret, e.g. 'regcred'",
                "image_pull_secrets",
            )
        names.append(name)
    return names


# --- whole-job checks ------------------------------------------------------------------------
