"""API errors as kube-apiserver renders them: one exception family, one ``Status`` rendering.

Every failure the server reports is a :class:`StatusError`; the HTTP layer turns it into a
``Status`` object (and a watch stream into an ``ERROR`` event carrying the same object) in one
place, so codes, reasons and wording stay consistent. Messages follow
``k8s.io/apimachinery/pkg/api/errors`` and ``.../util/validation/field`` word for word where
clients or people parse them (``pytorchjobs.kubeflow.org "x" not found``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]


def _render_value(value: Any) -> str:
    """Render a bad value the way Go's ``field.Error`` does: strings quoted, others plain."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class Cause:
    """One field error: becomes an entry of ``details.causes`` in an ``Invalid`` Status."""

    reason: str
    field: str
    message: str

    def render(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def as_dict(self) -> JsonDict:
        return {"reason": self.reason, "message": self.message, "field": self.field}


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", path, "Required value" + (f": {detail}" if detail else ""))


def invalid(path: str, value: Any, detail: str = "") -> Cause:
    text = f"Invalid value: {_render_value(value)}" + (f": {detail}" if detail else "")
    return Cause("FieldValueInvalid", path, text)


def type_invalid(path: str, actual_type: str, detail: str) -> Cause:
    return Cause("FieldValueTypeInvalid", path, f"Invalid value: {_render_value(actual_type)}: {detail}")


def not_supported(path: str, value: Any, supported: list[Any]) -> Cause:
    choices = ", ".join(_render_value(s) for s in supported)
    return Cause(
        "FieldValueNotSupported",
        path,
        f"Unsupported value: {_render_value(value)}: supported values: {choices}",
    )


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", path, f"Forbidden: {detail}")


def duplicate(path: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", path, f"Duplicate value: {_render_value(value)}")


def too_long(path: str, limit: int) -> Cause:
    return Cause("FieldValueTooLong", path, f"Too long: may not be more than {limit} bytes")


def too_many(path: str, count: int, limit: int) -> Cause:
    return Cause("FieldValueTooMany", path, f"Too many: {count}: must have at most {limit} items")


def aggregate(causes: list[Cause]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: one error bare, several in brackets."""
    rendered = [c.render() for c in causes]
    return rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"


class StatusError(Exception):
    """An error the API reports to clients as a ``Status`` object."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, details: JsonDict | None = None, metadata: JsonDict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details
        self.metadata = metadata or {}

    def to_status(self) -> JsonDict:
        status: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details is not None:
            status["details"] = self.details
        status["code"] = self.code
        return status


def _details(resource: str, name: str) -> JsonDict:
    """``details`` naming the object: ``kind`` is the plural resource, ``group`` only if not core."""
    plural, _, group = resource.partition(".")
    details: JsonDict = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


class NotFound(StatusError):
    code = 404
    reason = "NotFound"

    def __init__(self, resource: str, name: str):
        super().__init__(f'{resource} "{name}" not found', _details(resource, name))


class ResourceNotFound(StatusError):
    """A path that names no served resource (unknown group, version or plural)."""

    code = 404
    reason = "NotFound"

    def __init__(self) -> None:
        super().__init__("the server could not find the requested resource", {})


class AlreadyExists(StatusError):
    code = 409
    reason = "AlreadyExists"

    def __init__(self, resource: str, name: str):
        super().__init__(f'{resource} "{name}" already exists', _details(resource, name))


class Conflict(StatusError):
    code = 409
    reason = "Conflict"

    def __init__(self, resource: str, name: str, detail: str | None = None):
        detail = detail or (
            "the object has been modified; please apply your changes to the latest version and try again"
        )
        super().__init__(
            f'Operation cannot be fulfilled on {resource} "{name}": {detail}', _details(resource, name)
        )


class Invalid(StatusError):
    """422 with ``details.causes``; ``qualified_kind`` is ``Kind`` or ``Kind.group``."""

    code = 422
    reason = "Invalid"

    def __init__(self, qualified_kind: str, name: str, causes: list[Cause]):
        kind, _, group = qualified_kind.partition(".")
        details: JsonDict = {"name": name}
        if group:
            details["group"] = group
        details["kind"] = kind
        details["causes"] = [c.as_dict() for c in causes]
        super().__init__(f'{qualified_kind} "{name}" is invalid: {aggregate(causes)}', details)
        self.causes = causes


class BadRequest(StatusError):
    code = 400
    reason = "BadRequest"

    def __init__(self, message: str):
        super().__init__(message)


class WebhookDenied(StatusError):
    """A validating admission webhook said no; kube-apiserver prefixes the webhook's own Status.

    ``code``/``reason`` are whatever the webhook returned (kube-apiserver raises codes below
    400 to 400 and keeps an empty reason empty, as ``webhookerrors.ToStatusErr`` does).
    """

    def __init__(self, webhook: str, message: str, code: int = 400, reason: str = ""):
        super().__init__(f'admission webhook "{webhook}" denied the request: {message}')
        self.code = max(code, 400)
        self.reason = reason


class Forbidden(StatusError):
    code = 403
    reason = "Forbidden"

    def __init__(self, resource: str, name: str, detail: str):
        who = f'{resource} "{name}"' if name else resource
        super().__init__(f"{who} is forbidden: {detail}", _details(resource, name))


class Unauthorized(StatusError):
    code = 401
    reason = "Unauthorized"

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class Expired(StatusError):
    """410 Gone with reason ``Expired``: the resourceVersion or continue token is compacted."""

    code = 410
    reason = "Expired"


class MethodNotAllowed(StatusError):
    code = 405
    reason = "MethodNotAllowed"

    def __init__(self) -> None:
        super().__init__("the server does not allow this method on the requested resource", {})


class UnsupportedMediaType(StatusError):
    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, content_type: str, accepted: list[str]):
        super().__init__(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}",
        )
        self.content_type = content_type


class UnprocessablePatch(StatusError):
    code = 422
    reason = "Invalid"


class InternalError(StatusError):
    code = 500
    reason = "InternalError"

    def __init__(self, message: str):
        super().__init__(f"Internal error occurred: {message}", {"causes": [{"message": message}]})


class ServiceUnavailable(StatusError):
    code = 503
    reason = "ServiceUnavailable"


class TooManyRequests(StatusError):
    """429 as API Priority and Fairness answers it; ``Retry-After`` goes in a header too."""

    code = 429
    reason = "TooManyRequests"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, {"retryAfterSeconds": retry_after})
        self.retry_after = retry_after
