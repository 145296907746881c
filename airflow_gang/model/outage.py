"""Riding out a Kubernetes API that cannot be reached, without deleting anything.

A wait that loses the API server (a restart, an upgrade, a network blip, a 5xx or 429 storm)
keeps going with capped, jittered backoff, as a Kubernetes controller's informer does: the job
behind the outage may be training fine, and the provider deletes a job only for a reason of its
own (admission timeout, a person's kill, the task's ``execution_timeout``, ``delete_on_finish``),
never because it could not see it.

One `Outage` follows one wait. It turns failures into steps (how long to back off, what to
log, whether ``api_unavailable_timeout`` is exceeded) and logs once per episode plus a reminder
every few minutes, not a line per retry. The hook's own retries ride out blips of a few
seconds; `Outage` covers what outlasts them. The sync and async waits share it, so their
policy cannot drift; `ride_out` and `aride_out` wrap one call in it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.model.validation import positive_seconds
from airflow_gang.reports import telemetry

T = TypeVar("T")
# What an outage looks like from a client: no answer (status None: refused, reset, timed out,
# a cut stream), API Priority and Fairness shedding load (429) or a failing server or proxy (5xx).
OUTAGE_STATUSES = frozenset({429, 500, 502, 503, 504})
DEFAULT_API_UNAVAILABLE_TIMEOUT = 15 * 60.0
REMINDER_SECONDS = 5 * 60.0


class OutageLog(Protocol):
    def warning(self, msg: Any, /, *args: Any) -> Any: ...

    def info(self, msg: Any, /, *args: Any) -> Any: ...

    def debug(self, msg: Any, /, *args: Any) -> Any: ...


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` says the API could not be reached (retry later), not that it refused us."""
    return (
        isinstance(error, GangApiError)
        and not isinstance(error, GangApiUnavailable)
        and (error.status is None or error.status in OUTAGE_STATUSES)
    )


def may_mean_moved(error: BaseException) -> bool:
    """A failure an edited connection would explain: nothing answered where the client connects,
    its TLS handshake failed (another CA), or the server no longer takes its credentials (401).
    The async hook then looks at its connection again before calling it an outage."""
    return isinstance(error, GangApiError) and (error.status is None or error.status == 401)


def unavailable_timeout_seconds(value: Any) -> float | None:
    """``api_unavailable_timeout`` as seconds: a number, a timedelta or None (ride out forever)."""
    return positive_seconds(
        value, "api_unavailable_timeout", none_means="waits through an outage of any length"
    )


class OutageStep(NamedTuple):
    """What to do after one failed look: back off ``delay`` s, log ``warning`` if any, give up?"""

    delay: float
    warning: str | None
    exceeded: bool


@dataclass
class Episode:
    """A run of consecutive failures of one thing: since when, how many, and when to say so.

    `failed` counts a failure and answers whether to log a WARNING now: at the first failure of
    an episode, then as a reminder once ``reminder_every`` seconds passed since the last one.
    `recovered` ends the episode, so the next failure starts (and warns about) a new one. The
    API outages of a wait (`Outage`) and the trigger's failing watches
    (`airflow_gang.triggers.list_watch.WatchTrouble`) both report through one.
    """

    reminder_every: float = REMINDER_SECONDS
    clock: Callable[[], float] = time.monotonic
    since: float | None = field(default=None, init=False)
    since_wall: dt.datetime | None = field(default=None, init=False)
    failures: int = field(default=0, init=False)
    _warned_at: float | None = field(default=None, init=False)

    @property
    def active(self) -> bool:
        return self.since is not None

    def seconds(self) -> float:
        """How long the current episode has lasted (0 when there is none)."""
        return 0.0 if self.since is None else self.clock() - self.since

    def failed(self) -> bool:
        """Count one failure; whether to log a WARNING for it (first of the episode, or reminder)."""
        now = self.clock()
        if self.since is None:
            self.since, self.since_wall, self.failures, self._warned_at = now, _utc_now(), 0, None
        self.failures += 1
        if self._warned_at is None or now - self._warned_at >= self.reminder_every:
            self._warned_at = now
            return True
        return False

    def recovered(self) -> bool:
        """End the episode; whether there was one."""
        if self.since is None:
            return False
        self.since = self.since_wall = None
        self.failures = 0
        self._warned_at = None
        return True


@dataclass
class Outage:
    """The state of one wait's API outage episodes.

    :param what: the object waited for, for messages (``PyTorchJob ml/train-1``).
    :param timeout: give up (``exceeded``) after this many seconds of one episode; None never.
    :param initial_delay: first backoff; doubles per failure up to ``max_delay``, equal-jittered
        so a sweep of mapped tasks does not come back in lockstep.
    :param reminder_every: seconds between WARNING reminders while an episode lasts.
    """

    what: str
    timeout: float | None = DEFAULT_API_UNAVAILABLE_TIMEOUT
    initial_delay: float = 1.0
    max_delay: float = 10.0
    reminder_every: float = REMINDER_SECONDS
    clock: Callable[[], float] = time.monotonic
    last_error: str = field(default="", init=False)
    episode: Episode = field(init=False)

    def __post_init__(self) -> None:
        self.episode = Episode(self.reminder_every, self.clock)

    @property
    def active(self) -> bool:
        return self.episode.active

    @property
    def failures(self) -> int:
        return self.episode.failures

    def seconds(self) -> float:
        """How long the current episode has lasted (0 when the API is reachable)."""
        return self.episode.seconds()

    def failed(self, error: BaseException) -> OutageStep:
        warn = self.episode.failed()
        self.last_error = str(error)
        elapsed = self.episode.seconds()
        exceeded = self.timeout is not None and elapsed >= self.timeout
        failures = self.episode.failures
        base = min(self.max_delay, self.initial_delay * 2.0 ** min(failures - 1, 16))
        delay = base / 2 + random.uniform(0, base / 2)
        if self.timeout is not None:
            delay = max(0.0, min(delay, self.timeout - elapsed))
        warning = None
        if warn:
            limit = "forever" if self.timeout is None else f"up to {self.timeout:.0f}s"
            warning = (
                f"Kubernetes API unavailable while waiting for {self.what} since "
                f"{self.episode.since_wall:%Y-%m-%dT%H:%M:%SZ} ({elapsed:.0f}s, {failures} failed looks; "
                f"last: {error}); nothing is deleted, the wait goes on {limit} (api_unavailable_timeout)"
            )
        return OutageStep(delay, warning, exceeded)

    def recovered(self) -> str | None:
        """End the episode; the line to log if there was one."""
        if not self.episode.active:
            return None
        message = (
            f"Kubernetes API reachable again after {self.seconds():.0f}s ({self.failures} failed looks); "
            f"waiting for {self.what} goes on"
        )
        telemetry.api_outage_ridden(self.seconds())
        self.episode.recovered()
        return message

    def unavailable(self, *, name: str | None = None, namespace: str | None = None) -> GangApiUnavailable:
        """The error a task fails with once ``timeout`` is exceeded."""
        return GangApiUnavailable(
            f"the Kubernetes API was unavailable for {self.seconds():.0f}s while waiting for {self.what}, "
            f"more than api_unavailable_timeout={self.timeout:.0f}s (last error: {self.last_error}). "
            "Nothing was deleted: a retry of this task finds the job by its labels and waits on (with "
            "no retry left the task no longer owns the job, and the orphan reaper deletes it); raise "
            "api_unavailable_timeout (None waits forever) or retries to ride out longer outages",
            unavailable_seconds=self.seconds(),
            last_error=self.last_error,
            name=name,
            namespace=namespace,
        )


def ride_out(
    call: Callable[[], T],
    outage: Outage,
    log: OutageLog,
    *,
    sleep: Callable[[float], None] = time.sleep,
    name: str | None = None,
    namespace: str | None = None,
) -> T:
    """Run ``call`` until it gets through an outage; `GangApiUnavailable` once ``outage`` gives up.

    Errors that are not an outage (403, 404, 422...) propagate at once.
    """
    while True:
        try:
            value = call()
        except GangApiError as error:
            sleep(_backoff_or_raise(error, outage, log, name=name, namespace=namespace))
            continue
        _end_episode(outage, log)
        return value


async def aride_out(
    call: Callable[[], Awaitable[T]],
    outage: Outage,
    log: OutageLog,
    *,
    name: str | None = None,
    namespace: str | None = None,
) -> T:
    """The asynchronous twin of `ride_out`."""
    while True:
        try:
            value = await call()
        except GangApiError as error:
            await asyncio.sleep(_backoff_or_raise(error, outage, log, name=name, namespace=namespace))
            continue
        _end_episode(outage, log)
        return value


def _backoff_or_raise(
    error: GangApiError, outage: Outage, log: OutageLog, *, name: str | None, namespace: str | None
) -> float:
    """The one decision of both loops: re-raise a refusal, give up past the timeout, else back off."""
    if not is_outage(error):
        raise error
    step = outage.failed(error)
    if step.warning:
        log.warning(step.warning)
    if step.exceeded:
        raise outage.unavailable(name=name, namespace=namespace) from error
    return step.delay


def _end_episode(outage: Outage, log: OutageLog) -> None:
    if (message := outage.recovered()) is not None:
        log.info(message)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
