"""Object validation every kind shares: names, labels, annotations, owner references.

Pure functions from an object (and its previous version) to field causes, worded like
``k8s.io/apimachinery/pkg/api/validation``. Kind-specific rules live with their kind
(``kinds/core.py`` for built-ins, ``kinds/webhooks.py`` for the admission webhooks, the schema
for custom resources).
"""

from __future__ import annotations

import re
from typing import Any

from gang_sim.apiserver.errors import Cause, forbidden, invalid, required, too_long
from gang_sim.apiserver.registry import NameRule, ResourceInfo
from gang_sim.apiserver.selectors import label_key_error, label_value_error

JsonDict = dict[str, Any]

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ANNOTATIONS_MAX_BYTES = 256 * 1024
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not DNS1123_LABEL.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
            "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
            "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not DNS1123_SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return errors


def dns1035_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not DNS1035_LABEL.match(value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
            "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    return errors


def path_segment_errors(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


NAME_RULES = {
    "subdomain": dns1123_subdomain_errors,
    "label": dns1123_label_errors,
    "dns1035": dns1035_label_errors,
    "path": path_segment_errors,
}


def name_errors(rule: NameRule, name: str) -> list[str]:
    return NAME_RULES[rule](name)


def validate_metadata(info: ResourceInfo, obj: JsonDict) -> list[Cause]:
    """ObjectMeta rules for a create or an update (the name is already resolved)."""
    meta = obj.get("metadata") or {}
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        errors = name_errors(info.name_rule, name)
        if errors:
            causes.append(invalid("metadata.name", name, ", ".join(errors)))
    for key, value in (meta.get("labels") or {}).items():
        key_error = label_key_error(str(key))
        if key_error:
            causes.append(invalid("metadata.labels", key, key_error))
        if not isinstance(value, str):
            causes.append(invalid(f"metadata.labels[{key}]", value, "label values must be strings"))
        elif label_value_error(value):
            causes.append(invalid("metadata.labels", value, label_value_error(value) or ""))
    annotations = meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        key_error = label_key_error(str(key))
        if key_error:
            causes.append(invalid("metadata.annotations", key, key_error))
        if not isinstance(value, str):
            causes.append(invalid(f"metadata.annotations[{key}]", value, "annotation values must be strings"))
        size += len(str(key)) + len(str(value))
    if size > ANNOTATIONS_MAX_BYTES:
        causes.append(too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES))
    causes += _owner_reference_causes(meta.get("ownerReferences") or [])
    finalizers = meta.get("finalizers") or []
    if FOREGROUND_FINALIZER in finalizers and ORPHAN_FINALIZER in finalizers:
        causes.append(
            invalid(
                "metadata.finalizers",
                finalizers,
                "finalizer orphan and foregroundDeletion cannot be both set",
            )
        )
    for index, finalizer in enumerate(finalizers):
        if not isinstance(finalizer, str) or label_key_error(finalizer):
            causes.append(
                invalid(f"metadata.finalizers[{index}]", finalizer, "name part must be a qualified name")
            )
    return causes


def _owner_reference_causes(refs: list[Any]) -> list[Cause]:
    causes: list[Cause] = []
    controllers = 0
    for index, ref in enumerate(refs):
        path = f"metadata.ownerReferences[{index}]"
        if not isinstance(ref, dict):
            causes.append(invalid(path, ref, "must be an object"))
            continue
        for field in ("apiVersion", "kind", "name"):
            if not ref.get(field):
                causes.append(invalid(f"{path}.{field}", ref.get(field, ""), f"{field} must not be empty"))
        if not ref.get("uid"):
            causes.append(invalid(f"{path}.uid", "", "uid must not be empty"))
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        causes.append(
            invalid("metadata.ownerReferences", refs, "Only one reference can have Controller set to true")
        )
    return causes


def validate_metadata_update(old: JsonDict, new: JsonDict) -> list[Cause]:
    """Rules only an update has: an object being deleted accepts no new finalizers."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old_meta.get("deletionTimestamp"):
        added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            return [
                forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {sorted(added)!r}",
                )
            ]
    return []
