"""Options of list, watch and delete requests, and continue tokens (no HTTP here).

A continue token records the resourceVersion of the first page and the last key served,
base64-encoded like kube-apiserver's, so later pages come from the same snapshot.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from gang_sim.apiserver.errors import BadRequest, Invalid, not_supported
from gang_sim.apiserver.gc import Propagation
from gang_sim.apiserver.registry import ResourceInfo
from gang_sim.apiserver.selectors import FieldSelector, LabelSelector

CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


@dataclass
class ListOptions:
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


@dataclass
class DeleteOptions:
    propagation: Propagation | None = None
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None


def encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise BadRequest(f"continue key is not valid: {exc}") from exc


def check_fields(info: ResourceInfo, options: ListOptions) -> None:
    """Only the fields a kind declares are selectable, as upstream (400 otherwise)."""
    for term in options.fields.requirements:
        if not info.supports_field(term.field):
            raise BadRequest(f"field label not supported: {term.field}")


def parse_version(value: str, what: str = "resourceVersion") -> int:
    try:
        number = int(value)
    except ValueError as exc:
        raise BadRequest(
            f'{what}: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": invalid syntax'
        ) from exc
    if number < 0:
        raise BadRequest(f'{what}: Invalid value: "{value}": must be non-negative')
    return number


def parse_propagation(value: str | None) -> Propagation | None:
    if value in (None, ""):
        return None
    if value not in ("Background", "Foreground", "Orphan"):
        raise Invalid(
            "DeleteOptions.meta.k8s.io",
            "",
            [not_supported("propagationPolicy", value, ["Foreground", "Background", "Orphan"])],
        )
    return value  # type: ignore[return-value]
