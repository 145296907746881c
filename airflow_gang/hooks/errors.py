"""Turning Kubernetes API failures into the provider's exceptions, as pure functions.

The hooks never let a client library exception escape: a DAG author reads a `GangApiError`
(or its `GangPermissionError` / `GangCRDNotInstalled` subclasses) that names the verb, the
resource, the namespace, what the server said and what to do about it. Both the `kubernetes`
and the `kubernetes_asyncio` `ApiException` carry ``status``, ``reason``, ``body`` and
``headers``, so one function serves both clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_gang.exceptions import GangApiError, GangCRDNotInstalled, GangPermissionError
from airflow_gang.kinds import PYTORCHJOB, TRAINJOB, JobKind

RBAC_HINT = "airflow_gang.hooks.REQUIRED_PERMISSIONS lists every permission the provider needs"
# kube-apiserver's RBAC denial: `<resource> "<name>" is forbidden: User "<who>" cannot <verb> ...`.
_RBAC_DENIAL = re.compile(r'is forbidden: User ".*" cannot ', re.DOTALL)
_WEBHOOK_DENIAL = "admission webhook "


class ApiExceptionLike(Protocol):
    """What both clients' ``ApiException`` offer; the hooks only rely on this."""

    status: int | None
    reason: str | None
    body: Any
    headers: Any


@dataclass(frozen=True)
class ApiRequest:
    """One API call as error messages and RBAC describe it.

    :param verb: the RBAC verb (``create``, ``get``, ``list``, ``watch``, ``patch``, ``delete``).
    :param resource: the RBAC resource, e.g. ``pytorchjobs.kubeflow.org`` or ``pods/log``.
    :param name: the object's name, for calls about one object.
    :param namespace: the namespace; None for cluster-scoped resources.
    """

    verb: str
    resource: str
    name: str | None = None
    namespace: str | None = None

    def target(self) -> str:
        """``pytorchjobs.kubeflow.org "train-1" in namespace "ml"``, for messages."""
        what = f'{self.resource} "{self.name}"' if self.name else self.resource
        return f'{what} in namespace "{self.namespace}"' if self.namespace else f"{what} (cluster-scoped)"


def status_body(error: ApiExceptionLike) -> dict[str, Any]:
    """The server's ``Status`` object from the error body, or {} if there is none."""
    body = error.body
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _server_message(error: ApiExceptionLike, status: Mapping[str, Any]) -> str:
    message = status.get("message")
    if isinstance(message, str) and message:
        return message
    return f"{error.status} {error.reason or ''}".strip()


def _with_causes(message: str, status: Mapping[str, Any]) -> str:
    """Keep every cause of a 422 in the message, unless the server already spelled it out."""
    causes = ((status.get("details") or {}).get("causes")) or []
    missing = []
    for cause in causes:
        if not isinstance(cause, Mapping):
            continue
        text = f"{cause.get('field') or ''}: {cause.get('message') or cause.get('reason') or ''}".strip(": ")
        if text and str(cause.get("message") or "") not in message:
            missing.append(text)
    return f"{message} (causes: {'; '.join(missing)})" if missing else message


def _permission_error(request: ApiRequest, server_message: str) -> GangPermissionError:
    scope = f'in namespace "{request.namespace}"' if request.namespace else "cluster-wide"
    role = "a Role" if request.namespace else "a ClusterRole"
    return GangPermissionError(
        f"permission denied: the Kubernetes connection's service account cannot {request.verb} "
        f"{request.resource} {scope} (server said: {server_message}). Grant verb "
        f'"{request.verb}" on "{request.resource}" in {role} bound to the Airflow service account; '
        f"{RBAC_HINT}",
        status=403,
        verb=request.verb,
        resource=request.resource,
        name=request.name,
        namespace=request.namespace,
    )


def translate_api_error(error: ApiExceptionLike, request: ApiRequest) -> GangApiError:
    """The provider exception for an HTTP error answer (any status; 404 callers handle first).

    A 403 is a permission error only when it is an RBAC denial (or carries no Status to tell);
    a 403 from an admission webhook, a quota or a terminating namespace is about the object or
    the cluster, so it stays a `GangApiError` with the server's own words.

    :param error: the client's ``ApiException`` (sync or async).
    :param request: the call that failed.
    """
    status = status_body(error)
    code = error.status
    message = _server_message(error, status)

    def api_error(text: str) -> GangApiError:
        return GangApiError(
            text,
            status=code,
            verb=request.verb,
            resource=request.resource,
            name=request.name,
            namespace=request.namespace,
        )

    if code == 403:
        if message.startswith(_WEBHOOK_DENIAL):
            return api_error(f"cannot {request.verb} {request.target()}: {message}")
        if _RBAC_DENIAL.search(message) or not status:
            return _permission_error(request, message)
        return api_error(f"cannot {request.verb} {request.target()}: forbidden by the cluster: {message}")
    if code == 401:
        return api_error(
            f"cannot {request.verb} {request.target()}: the Kubernetes API rejected the connection's "
            f"credentials (401 Unauthorized): check the kubernetes connection's kubeconfig or token"
        )
    if code == 422:
        return api_error(
            f"cannot {request.verb} {request.target()}: invalid: {_with_causes(message, status)}"
        )
    if code == 0:
        # The client raised before any HTTP answer, e.g. a TLS verification failure.
        return api_error(f"cannot reach the Kubernetes API to {request.verb} {request.target()}: {message}")
    reason = status.get("reason") or error.reason or ""
    return api_error(f"cannot {request.verb} {request.target()}: HTTP {code} {reason}: {message}")


@dataclass
class _StatusAnswer:
    """A ``Status`` that arrived inside a watch stream, shaped like an ``ApiException``."""

    status: int | None
    reason: str | None
    body: Any
    headers: Any = None


def status_error(status: Mapping[str, Any], request: ApiRequest) -> GangApiError:
    """The provider exception for a ``Status`` object, e.g. a watch's ERROR event (410 Expired).

    :param status: the ``Status`` (``code``, ``reason``, ``message``).
    :param request: the call it answered.
    """
    code = status.get("code")
    answer = _StatusAnswer(
        status=code if isinstance(code, int) else None,
        reason=str(status.get("reason") or ""),
        body=json.dumps(dict(status)),
    )
    return translate_api_error(answer, request)


def unreachable_error(error: BaseException, request: ApiRequest, attempts: int) -> GangApiError:
    """The error after connection failures outlasted the retries (no HTTP status to report)."""
    return GangApiError(
        f"cannot {request.verb} {request.target()}: the Kubernetes API was unreachable after "
        f"{attempts} attempt(s): {type(error).__name__}: {error}",
        status=None,
        verb=request.verb,
        resource=request.resource,
        name=request.name,
        namespace=request.namespace,
    )


@dataclass(frozen=True)
class ApiRequirement:
    """An API group/version the provider needs, which resources of it, and how to get them."""

    group: str
    version: str
    plurals: tuple[str, ...]
    product: str
    fix: str

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"

    @classmethod
    def of(cls, job_kind: JobKind) -> ApiRequirement:
        """What a kind of gang job needs served (`JobKind.api`)."""
        api = job_kind.api
        return cls(job_kind.group, job_kind.version, api.plurals, api.title, api.install)


PYTORCHJOB_API = ApiRequirement.of(PYTORCHJOB)
TRAINJOB_API = ApiRequirement.of(TRAINJOB)
VOLCANO_API = ApiRequirement(
    "scheduling.volcano.sh",
    "v1beta1",
    ("podgroups", "queues"),
    "Volcano",
    'install Volcano (https://volcano.sh), or run the job with gang_scheduling="disabled"',
)


def evaluate_discovery(
    requirement: ApiRequirement, resource_list: Mapping[str, Any] | None
) -> GangCRDNotInstalled | None:
    """The error to raise if discovery shows the requirement unmet, else None.

    :param requirement: what must be served.
    :param resource_list: the ``APIResourceList`` of the group/version, or None when the
        server answered 404 (the group/version is not served at all).
    """
    served = {
        str(entry.get("name"))
        for entry in (resource_list or {}).get("resources") or []
        if isinstance(entry, Mapping)
    }
    missing = [plural for plural in requirement.plurals if plural not in served]
    if not missing:
        return None
    return GangCRDNotInstalled(
        f"{requirement.product} is not installed on this cluster ({requirement.group_version} "
        f"{', '.join(missing)} not served): {requirement.fix}",
        status=404,
        verb="get",
        resource=f"{missing[0]}.{requirement.group}",
    )
