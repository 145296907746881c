"""Retrying Kubernetes API calls: which failures are transient, how long to wait, what to raise.

Transient: HTTP 429 (API Priority and Fairness rejected the request before processing it),
500/502/503/504, and connection-level failures (refused, reset, timed out). Everything else
is raised at once as a provider exception (`errors.translate_api_error`).

Create is retried on the same failures. A 429 or a refused connection never reached storage;
after a 5xx or a lost reply the first attempt may have succeeded, and the retry then gets
409 AlreadyExists. That 409 is raised as `GangApiError(status=409)` like any other 409 on
create, and the caller decides (the operator adopts the object if its identity labels are
ours): the hook cannot tell "ours from a lost reply" from "someone else's" without them.

The loop is written out twice (sync, async) around one decision function, so the policy
cannot drift between the worker and the triggerer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import aiohttp
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException as SyncApiException
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import ApiRequest, translate_api_error, unreachable_error

T = TypeVar("T")


class RetryLog(Protocol):
    """The one logging call the loops make (stdlib and Airflow's structlog loggers both fit)."""

    def warning(self, msg: Any, /, *args: Any) -> Any: ...

    def debug(self, msg: Any, /, *args: Any) -> Any: ...


# Seconds for one request, connect to last byte: generous for a loaded API server, finite so a
# dead connection surfaces as a retryable error instead of a stuck worker or triggerer.
REQUEST_TIMEOUT = 30.0
# The shortest timeout a request gets under a policy's ``deadline`` (a request started just before
# it must still be able to connect).
MIN_REQUEST_TIMEOUT = 0.5
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
API_EXCEPTIONS: tuple[type[Exception], ...] = (SyncApiException, AsyncApiException)
# urllib3 (sync client) and aiohttp (async client) failures below HTTP, plus the builtins
# either may let through. TLS failures are excluded below: retrying a bad certificate is noise.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    urllib3.exceptions.HTTPError,
    aiohttp.ClientError,
    ConnectionError,
    TimeoutError,
)
_NOT_TRANSIENT: tuple[type[Exception], ...] = (
    ssl.SSLError,
    urllib3.exceptions.SSLError,
    aiohttp.ClientSSLError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``initial_delay`` doubling up to ``max_delay``, ``attempts`` tries in all.

    The defaults wait about 0.5 + 1 + 2 + 4 s (jittered) across five attempts: long enough to
    ride out an API server restart, short enough not to hold a worker slot for minutes.
    """

    attempts: int = 5
    initial_delay: float = 0.5
    max_delay: float = 8.0
    # Log each retry at DEBUG instead of WARNING: for callers that report outages themselves
    # (the waits: once per episode, `airflow_gang.model.outage`), not a line per retry.
    quiet: bool = False
    # A `time.monotonic` moment no call under this policy may outlast (bounded cleanups such as
    # ``on_kill``): each request's timeout is cut to the time left, and no retry starts after it.
    # Without it a hung API server holds one call for ``attempts`` x `REQUEST_TIMEOUT`.
    deadline: float | None = None

    def within(self, seconds: float) -> RetryPolicy:
        """This policy, with every call ending within ``seconds`` from now."""
        return dataclasses.replace(self, deadline=time.monotonic() + seconds)

    def request_timeout(self, preferred: float = REQUEST_TIMEOUT) -> float:
        """The timeout of one request: ``preferred``, cut to the time left before ``deadline``."""
        if self.deadline is None:
            return preferred
        return max(MIN_REQUEST_TIMEOUT, min(preferred, self.deadline - time.monotonic()))

    def delay(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))
        retry_after = _retry_after(error)
        if retry_after is not None:
            return min(self.max_delay, max(base, retry_after))
        # Equal jitter: thousands of mapped tasks hitting one overloaded API server must not
        # come back in lockstep.
        return base / 2 + random.uniform(0, base / 2)


# Waits ride out longer outages themselves (`airflow_gang.model.outage`, one WARNING per episode):
# each look gets a few quick retries logged at DEBUG.
WAIT_RETRY_POLICY = RetryPolicy(attempts=3, initial_delay=0.5, max_delay=2.0, quiet=True)


def _retry_after(error: BaseException) -> float | None:
    headers = getattr(error, "headers", None)
    if getattr(error, "status", None) != 429 or not headers:
        return None
    try:
        return float(headers.get("Retry-After"))
    except (TypeError, ValueError):
        return None


def is_transient(error: BaseException) -> bool:
    """Whether retrying the same request may succeed."""
    if isinstance(error, API_EXCEPTIONS):
        return getattr(error, "status", None) in TRANSIENT_STATUSES
    return isinstance(error, CONNECTION_ERRORS) and not isinstance(error, _NOT_TRANSIENT)


def final_error(error: BaseException, request: ApiRequest, attempt: int) -> GangApiError:
    """The provider exception to raise once ``error`` is not going to be retried."""
    if not isinstance(error, API_EXCEPTIONS):
        return unreachable_error(error, request, attempt)
    translated = translate_api_error(error, request)  # type: ignore[arg-type]
    if translated.status == 409 and request.verb == "create" and attempt > 1:
        translated.args = (
            f"{translated.args[0]} (the create was retried after a failed attempt, so the existing "
            "object may be this call's own: adopt it only if its identity labels match)",
        )
    return translated


def next_delay(error: BaseException, request: ApiRequest, attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait before retrying, or raise the provider exception if this is final
    (not transient, out of attempts, or the retry would start after the policy's ``deadline``)."""
    if not is_transient(error) or attempt >= policy.attempts:
        raise final_error(error, request, attempt) from error
    delay = policy.delay(attempt, error)
    if policy.deadline is not None and time.monotonic() + delay >= policy.deadline:
        raise final_error(error, request, attempt) from error
    return delay


def _describe(error: BaseException) -> str:
    status = getattr(error, "status", None)
    return f"HTTP {status} {getattr(error, 'reason', '')}".strip() if status else type(error).__name__


def _log_retry(
    log: RetryLog,
    error: BaseException,
    request: ApiRequest,
    *,
    delay: float,
    attempt: int,
    policy: RetryPolicy,
) -> None:
    emit = log.debug if policy.quiet else log.warning
    emit(
        "kubernetes API %s %s failed (%s); retrying in %.1fs (attempt %d of %d)",
        request.verb,
        request.target(),
        _describe(error),
        delay,
        attempt + 1,
        policy.attempts,
    )


def call_with_retries(call: Callable[[], T], request: ApiRequest, policy: RetryPolicy, log: RetryLog) -> T:
    """Run ``call`` (one API request), retrying transient failures per ``policy``.

    :param call: makes the request; called again on each attempt.
    :param request: what the call does, for errors and logs.
    :param policy: attempts and backoff.
    :param log: where retries are logged (WARNING: each one means the cluster is struggling;
        DEBUG with a ``quiet`` policy).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except (*API_EXCEPTIONS, *CONNECTION_ERRORS) as error:
            delay = next_delay(error, request, attempt, policy)
            _log_retry(log, error, request, delay=delay, attempt=attempt, policy=policy)
        time.sleep(delay)


async def acall_with_retries(
    call: Callable[[], Awaitable[T]], request: ApiRequest, policy: RetryPolicy, log: RetryLog
) -> T:
    """The asynchronous twin of `call_with_retries`; ``call`` returns a fresh awaitable per attempt."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except (*API_EXCEPTIONS, *CONNECTION_ERRORS) as error:
            delay = next_delay(error, request, attempt, policy)
            _log_retry(log, error, request, delay=delay, attempt=attempt, policy=policy)
        await asyncio.sleep(delay)
