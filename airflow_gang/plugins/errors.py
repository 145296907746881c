"""Failures as the JSON the page shows in its banner: a kind, a message with the fix, a status.

Never a stack trace: unexpected errors are logged in the API server and answered with a
generic message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_gang.exceptions import GangApiError, GangCRDNotInstalled, GangError, GangPermissionError

log = logging.getLogger(__name__)


class PageError(Exception):
    """An answer other than 200 that the page explains (unknown job, namespace not shown...)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message

    def body(self) -> dict[str, dict[str, object]]:
        return {"error": {"kind": self.kind, "message": self.message, "status": self.status}}


def _connection_error(error: BaseException) -> bool:
    """Errors of the Kubernetes connection itself (not of a request on it)."""
    from kubernetes.config.config_exception import ConfigException

    if isinstance(error, ConfigException):
        return True
    from airflow.sdk.exceptions import AirflowException

    return isinstance(error, AirflowException) and not isinstance(error, GangError)


def classify(error: BaseException, conn_id: str) -> PageError:
    """The `PageError` for an exception raised while reading the cluster.

    :param error: what was raised.
    :param conn_id: the connection the page reads with, for messages about it.
    """
    if isinstance(error, PageError):
        return error
    if isinstance(error, GangCRDNotInstalled):
        return PageError(503, "crd_missing", str(error))
    if isinstance(error, GangPermissionError):
        return PageError(403, "forbidden", str(error))
    if isinstance(error, GangApiError):
        if error.status is None:
            return PageError(502, "unreachable", str(error))
        if error.status == 401:
            return PageError(502, "unauthorized", str(error))
        return PageError(502, "api_error", str(error))
    if isinstance(error, GangError):
        return PageError(502, "api_error", str(error))
    if _connection_error(error):
        return PageError(
            503,
            "connection",
            f"the Kubernetes connection {conn_id!r} cannot be used: {error}. Fix the connection, or "
            "point [gang] ui_kubernetes_conn_id at another one",
        )
    log.exception("gang UI: unexpected error", exc_info=error)
    message = f"unexpected {type(error).__name__} while reading the cluster (see the API server log)"
    return PageError(500, "internal", message)


def off_schema(errors: Sequence[Mapping[str, Any]]) -> PageError:
    """The 500 for an answer its declared schema (`schemas`) rejects: a bug of the service.

    The message names the first places that do not match (not their values, which are the
    cluster's data); the log has every error.
    """
    log.error("gang UI: an answer does not match its schema: %s", list(errors))
    where = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in errors[:3])
    message = f"the answer does not match its schema ({where}); see the API server log"
    return PageError(500, "internal", message)
