"""The three patch formats clients send, as pure functions over JSON values.

- JSON merge patch (RFC 7386): ``application/merge-patch+json``; what ``kubectl apply`` and
  the Python client send for custom resources.
- JSON patch (RFC 6902): ``application/json-patch+json``; what the clients send for list bodies.
- Strategic merge patch: ``application/strategic-merge-patch+json``; what the Python client
  sends for dict bodies on built-in kinds and ``kubectl apply`` for built-ins. It is a merge
  patch in which lists of named items merge by their key (``containers`` by ``name``, ports
  by ``containerPort``...) as the built-in Go types declare with ``patchMergeKey``, plus the
  ``$patch``, ``$deleteFromPrimitiveList`` and ``$setElementOrder`` directives. Custom resources
  reject it with 415, as kube-apiserver does.

Failures raise :class:`PatchError` (the HTTP layer maps malformed documents to 400 and
failing operations to 422, as kube-apiserver does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gang_sim import json_wire
from gang_sim.apiserver.errors import BadRequest, UnsupportedMediaType
from gang_sim.apiserver.json_copy import json_copy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch that cannot be applied; ``malformed`` means the document itself is wrong."""

    def __init__(self, message: str, malformed: bool = False):
        super().__init__(message)
        self.malformed = malformed


def decode_patch(content_type: str, raw: bytes, accepted: Sequence[str]) -> Any:
    """The PATCH body as a document, refused as kube-apiserver refuses it: 415 for a type this
    resource does not take, 400 for a body that is no JSON (or, for a merge patch, no object)."""
    if content_type not in accepted:
        raise UnsupportedMediaType(content_type, [*accepted, APPLY_PATCH])
    try:
        document = json_wire.loads(raw or b"null")
    except ValueError as exc:
        raise BadRequest(f"error decoding patch: {exc}") from exc
    if content_type != JSON_PATCH and not isinstance(document, dict):
        raise BadRequest("error decoding patch: patch must be a JSON object")
    return document


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return json_copy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 ---------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'", malformed=True)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchError(f"doc is missing path: {path!r}")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return current


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {path!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f"doc is missing path: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"Unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, allow_end=False)]
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 on a deep copy of ``target``; all-or-nothing."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be an array of operations", malformed=True)
    doc = json_copy(target)
    for op in operations:
        if not isinstance(op, Mapping) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid json patch operation: {op!r}", malformed=True)
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"missing value for {kind} operation", malformed=True)
        if kind == "add":
            doc = _add(doc, path, json_copy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # replace requires the target to exist
            doc = _add(_remove(doc, path), path, json_copy(op["value"])) if _pointer(path) else op["value"]
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"missing from for {kind} operation", malformed=True)
            value = json_copy(_get(doc, op["from"]))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", malformed=True)
    return doc


# --- strategic merge patch --------------------------------------------------------------------

# patchMergeKey of the built-in Go types, keyed by the field path with list indices dropped.
# Lists not named here are atomic (replaced), as in upstream for fields without a merge key.
MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "containers", "env"): "name",
    ("spec", "initContainers", "env"): "name",
    ("spec", "containers", "ports"): "containerPort",
    ("spec", "initContainers", "ports"): "containerPort",
    ("spec", "containers", "volumeMounts"): "mountPath",
    ("spec", "initContainers", "volumeMounts"): "mountPath",
    ("spec", "containers", "volumeDevices"): "devicePath",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "ports"): "port",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
}
# Primitive lists with patchStrategy=merge: union of values.
MERGE_SETS: set[tuple[str, ...]] = {("metadata", "finalizers")}

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        raise PatchError("strategic merge patch must be a JSON object", malformed=True)
    return _smp_map(target if isinstance(target, Mapping) else {}, patch, ())


def _smp_map(target: Mapping[str, Any], patch: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: json_copy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive == "delete":
        return None
    result = dict(target)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE) :]
            removed = set(map(str, value or []))
            result[name] = [v for v in result.get(name) or [] if str(v) not in removed]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub = (*path, key)
        current = result.get(key)
        if isinstance(value, Mapping):
            merged = _smp_map(current if isinstance(current, Mapping) else {}, value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and sub in MERGE_KEYS:
            result[key] = _smp_list(current if isinstance(current, list) else [], value, sub)
        elif isinstance(value, list) and sub in MERGE_SETS:
            merged_set = list(current) if isinstance(current, list) else []
            merged_set += [v for v in value if v not in merged_set]
            result[key] = merged_set
        else:
            result[key] = json_copy(value)
    for key, order in patch.items():
        if key.startswith(_ORDER) and isinstance(order, list):
            name = key[len(_ORDER) :]
            result[name] = _reorder(result.get(name), order, MERGE_KEYS.get((*path, name)))
    return result


def _smp_list(current: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    key = MERGE_KEYS[path]
    result = [json_copy(item) for item in current]
    if any(isinstance(i, Mapping) and i.get("$patch") == "replace" for i in patch):
        return [json_copy(dict(i)) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        index = next(
            (n for n, old in enumerate(result) if isinstance(old, Mapping) and old.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append({k: json_copy(v) for k, v in item.items() if not k.startswith("$")})
        else:
            result[index] = _smp_map(result[index], item, path)
    return result


def _reorder(items: Any, order: list[Any], key: str | None) -> Any:
    """Apply ``$setElementOrder``: listed items first in that order, the rest after."""
    if not isinstance(items, list):
        return items

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, Mapping) else item

    wanted = [ident(o) for o in order]
    ranked = sorted(
        enumerate(items),
        key=lambda pair: (wanted.index(ident(pair[1])) if ident(pair[1]) in wanted else len(wanted), pair[0]),
    )
    return [item for _, item in ranked]
