"""Small helpers over object dicts shared by the verbs and the garbage collector."""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Callable
from typing import Any

JsonDict = dict[str, Any]
Clock = Callable[[], dt.datetime]

# generateName suffixes use upstream's alphabet (no vowels, so no accidental words).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_PREFIX = 58
# Not a secret, so not `secrets`: upstream draws them from math/rand too, and the system's
# random source cost more per created pod than the rest of naming it.
_suffixes = random.Random()


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    """Seconds precision, ``Z`` suffix: how metav1.Time serialises."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def generate_name(prefix: str) -> str:
    suffix = "".join(_suffixes.choices(_SUFFIX_ALPHABET, k=5))
    return prefix[:_MAX_GENERATED_PREFIX] + suffix


def meta(obj: JsonDict) -> JsonDict:
    metadata: JsonDict = obj.get("metadata") or {}
    return metadata


def uid(obj: JsonDict) -> str:
    return str(meta(obj).get("uid", ""))


def finalizers(obj: JsonDict) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def owner_refs(obj: JsonDict) -> list[JsonDict]:
    return list(meta(obj).get("ownerReferences") or [])


def is_deleting(obj: JsonDict) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def edited(obj: JsonDict, **metadata: Any) -> JsonDict:
    """A deep copy with metadata fields replaced (``None`` removes a field)."""
    result = copy.deepcopy(obj)
    target = result.setdefault("metadata", {})
    for name, value in metadata.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return result


def without_version(obj: JsonDict) -> JsonDict:
    """Shallow view without resourceVersion, to detect no-op writes."""
    trimmed = dict(obj)
    trimmed["metadata"] = {k: v for k, v in meta(obj).items() if k != "resourceVersion"}
    return trimmed
