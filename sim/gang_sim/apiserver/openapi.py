"""Structural openAPIV3Schema handling for custom resources: defaulting, pruning, validation.

The order and the wording follow kube-apiserver's ``apiextensions-apiserver``: defaults from
``default`` fill absent fields, unknown fields are pruned (unless
``x-kubernetes-preserve-unknown-fields``), then the object is validated and every violation
becomes a field cause such as ``spec.pytorchReplicaSpecs.Master.replicas: Invalid value:
"string": spec.pytorchReplicaSpecs.Master.replicas in body must be of type integer: "string"``.
Map keys (``additionalProperties``) join the path with dots and list items with ``[i]``, as
upstream prints them. CEL rules (``x-kubernetes-validations``) are not evaluated.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any

from gang_sim.apiserver.errors import (
    Cause,
    duplicate,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
    type_invalid,
)

JsonDict = dict[str, Any]
_ROOT_META = ("apiVersion", "kind", "metadata")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _matches_type(expected: str, value: Any) -> bool:
    actual = json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def apply_defaults(schema: JsonDict, value: Any) -> None:
    """Fill absent properties that declare a ``default``, recursively, in place."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                apply_defaults(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in props:
                    apply_defaults(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(schema["items"], item)


def prune(schema: JsonDict, value: Any, root: bool = False) -> None:
    """Drop fields the schema does not know, in place (structural schema pruning)."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            known = schema.get("properties") or {}
            for name, sub in known.items():
                if name in value:
                    prune(sub, value[name])
            return
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for name in list(value):
            if name in props:
                if not (root and name == "metadata"):
                    prune(props[name], value[name])
            elif embedded and name in _ROOT_META:
                continue
            elif isinstance(extra, dict):
                prune(extra, value[name])
            elif extra is True:
                continue
            else:
                del value[name]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            prune(schema["items"], item)


def validate(schema: JsonDict, value: Any, path: str = "") -> list[Cause]:
    """All violations of ``schema`` by ``value``; ``path`` is the dotted field path."""
    causes: list[Cause] = []
    _validate(schema, value, path, causes)
    return causes


def _where(path: str) -> str:
    return path or "body"


def _validate(schema: JsonDict, value: Any, path: str, causes: list[Cause]) -> None:
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append(
                type_invalid(path, "null", f'{_where(path)} in body must be of type {schema["type"]}: "null"')
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if json_type(value) not in ("integer", "string"):
            causes.append(
                type_invalid(
                    path,
                    json_type(value),
                    f'{_where(path)} in body must be of type integer,string: "{json_type(value)}"',
                )
            )
            return
    elif "type" in schema and not _matches_type(schema["type"], value):
        causes.append(
            type_invalid(
                path,
                json_type(value),
                f'{_where(path)} in body must be of type {schema["type"]}: "{json_type(value)}"',
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        causes.append(not_supported(path, value, list(schema["enum"])))
    if isinstance(value, str):
        _validate_string(schema, value, path, causes)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(schema, value, path, causes)
    elif isinstance(value, list):
        _validate_array(schema, value, path, causes)
    elif isinstance(value, dict):
        _validate_object(schema, value, path, causes)
    for option in ("allOf",):
        for sub in schema.get(option) or []:
            _validate(sub, value, path, causes)


def _validate_string(schema: JsonDict, value: str, path: str, causes: list[Cause]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(too_long(path, schema["maxLength"]))
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(
            invalid(
                path, value, f"{_where(path)} in body should be at least {schema['minLength']} chars long"
            )
        )
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        causes.append(invalid(path, value, f"{_where(path)} in body should match '{schema['pattern']}'"))


def _validate_number(schema: JsonDict, value: float, path: str, causes: list[Cause]) -> None:
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            op = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            causes.append(invalid(path, value, f"{_where(path)} in body should be {op} {low}"))
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") and value == high):
            op = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            causes.append(invalid(path, value, f"{_where(path)} in body should be {op} {high}"))


def _validate_array(schema: JsonDict, value: list[Any], path: str, causes: list[Cause]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(too_many(path, len(value), schema["maxItems"]))
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(
            invalid(
                path, len(value), f"{_where(path)} in body should have at least {schema['minItems']} items"
            )
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _validate(items, item, f"{path}[{index}]", causes)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: list[Any] = []
        for index, item in enumerate(value):
            ident = (
                tuple(item.get(k) for k in keys) if list_type == "map" and isinstance(item, dict) else item
            )
            if ident in seen:
                shown = (
                    {k: item.get(k) for k in keys} if list_type == "map" and isinstance(item, dict) else item
                )
                causes.append(duplicate(f"{path}[{index}]", shown))
            else:
                seen.append(ident)


def _validate_object(schema: JsonDict, value: JsonDict, path: str, causes: list[Cause]) -> None:
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or []:
        if name not in value:
            causes.append(required(f"{prefix}{name}"))
    props = schema.get("properties") or {}
    for name, item in value.items():
        if name in props:
            if not path and name == "metadata":
                continue  # ObjectMeta is validated by the API server itself
            _validate(props[name], item, f"{prefix}{name}", causes)
        elif isinstance(schema.get("additionalProperties"), dict):
            _validate(schema["additionalProperties"], item, f"{prefix}{name}", causes)
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(too_many(path, len(value), schema["maxProperties"]))
