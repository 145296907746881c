"""A ready-made Airflow 3.3 retry policy for gang jobs: retry queue timeouts, fail fast on the rest.

    PyTorchJobOperator(..., retries=5, retry_policy=gang_retry_policy())

- `GangAdmissionTimeout` is retried, after ``admission_retry_delay`` (the queue needs time to
  drain; the job was already deleted, so the retry starts clean);
- `GangJobDisrupted` (``on_disruption="retry"`` or too many disruptions) is retried after
  ``disruption_retry_delay``: the job was deleted and the next try resumes from its checkpoint;
- `GangSpecError`, `GangPermissionError`, `GangCRDNotInstalled`, `GangQueueMismatch` (the
  PodGroup landed in another queue than asked: a retry lands there too) and API rejections of
  the manifest fail at once: retrying cannot fix them;
- `PyTorchJobFailed` with a permanent exit code (1-127, Kubeflow's ExitCode convention) fails at
  once; 128-255 (killed by a signal, e.g. OOM-killed 137) follow the task's normal retries.

Anything else falls back to the task's ``retries``/``retry_delay``. Plain ``retries=`` without a
policy also works: every exception of this provider is an ordinary task failure.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryDecision, RetryRule

from airflow_gang.exceptions import (
    GangAdmissionTimeout,
    GangApiError,
    GangCRDNotInstalled,
    GangJobDisrupted,
    GangPermissionError,
    GangQueueMismatch,
    GangSpecError,
    PyTorchJobFailed,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

PERMANENT_EXIT_CODES = range(1, 128)


class GangRetryPolicy(ExceptionRetryPolicy):
    """`ExceptionRetryPolicy` plus the exit-code rule for `PyTorchJobFailed`."""

    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Context | None = None
    ) -> RetryDecision:
        if isinstance(exception, PyTorchJobFailed) and exception.exit_code in PERMANENT_EXIT_CODES:
            return RetryDecision(
                action=RetryAction.FAIL,
                reason=f"replica {exception.replica} exited with permanent code {exception.exit_code}",
            )
        if isinstance(exception, GangApiError) and exception.status in (400, 403, 404, 422):
            return RetryDecision(
                action=RetryAction.FAIL, reason=f"the cluster rejected the request ({exception.status})"
            )
        return super().evaluate(exception, try_number, max_tries, context)


def gang_retry_policy(
    admission_retry_delay: dt.timedelta | float = dt.timedelta(minutes=5),
    disruption_retry_delay: dt.timedelta | float = dt.timedelta(seconds=30),
) -> GangRetryPolicy:
    """The provider's retry policy (see module docstring).

    :param admission_retry_delay: wait before retrying a job that timed out in the queue.
    :param disruption_retry_delay: wait before retrying a job given up after a disruption.
    """
    delay, disrupted_delay = (
        value if isinstance(value, dt.timedelta) else dt.timedelta(seconds=float(value))
        for value in (admission_retry_delay, disruption_retry_delay)
    )
    return GangRetryPolicy(
        rules=[
            RetryRule(
                exception=GangAdmissionTimeout,
                action=RetryAction.RETRY,
                retry_delay=delay,
                reason="the gang waited too long in its queue; retrying with a fresh job",
            ),
            RetryRule(
                exception=GangJobDisrupted,
                action=RetryAction.RETRY,
                retry_delay=disrupted_delay,
                reason="the running gang was disrupted and given up; retrying with a fresh job",
            ),
            RetryRule(
                exception=[GangSpecError, GangPermissionError, GangCRDNotInstalled, GangQueueMismatch],
                action=RetryAction.FAIL,
                reason="invalid job description or cluster setup; retrying cannot help",
            ),
        ],
    )
