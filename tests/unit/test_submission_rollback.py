"""Which failed PyTorchJob creates definitely stored nothing (`submission.job_create_refused`).

The errors are the provider's own translation (`retrying.final_error`, as the hook raises them
after its retries) of the exceptions the ``kubernetes`` client and urllib3 really raise. Only an
answer that refuses the request rules out a stored job; a 5xx, 408, 429 or no answer at all may
follow an attempt whose reply was lost after the job was stored (then its PodGroup must stay).
"""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from airflow_gang.exceptions import GangApiUnavailable
from airflow_gang.hooks.errors import ApiRequest
from airflow_gang.hooks.retrying import final_error
from airflow_gang.jobs.submission import job_create_refused

CREATE = ApiRequest("create", "pytorchjobs.kubeflow.org", "train-1", "default")


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        (400, True),
        (403, True),
        (404, True),
        (409, True),
        (422, True),
        (408, False),
        (429, False),
        (500, False),
        (502, False),
        (503, False),
        (504, False),
    ],
)
def test_only_an_answer_refusing_the_create_rules_out_a_stored_job(status: int, refused: bool) -> None:
    error = final_error(ApiException(status=status, reason="answer"), CREATE, attempt=3)
    assert error.status == status
    assert job_create_refused(error) is refused


@pytest.mark.parametrize(
    "failure",
    [
        urllib3.exceptions.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
        urllib3.exceptions.ReadTimeoutError(None, "/apis/kubeflow.org/v1", "Read timed out"),  # type: ignore[arg-type]
        urllib3.exceptions.ProtocolError("Connection aborted", ConnectionResetError()),
    ],
    ids=["refused-connection", "read-timeout", "reset"],
)
def test_no_answer_leaves_the_outcome_unknown(failure: Exception) -> None:
    error = final_error(failure, CREATE, attempt=3)
    assert error.status is None
    assert not job_create_refused(error)


def test_anything_but_an_api_answer_leaves_the_outcome_unknown() -> None:
    assert not job_create_refused(KeyboardInterrupt())
    assert not job_create_refused(GangApiUnavailable("down", unavailable_seconds=1.0, last_error="x"))
