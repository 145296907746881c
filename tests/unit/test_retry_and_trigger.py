"""The retry policy's decisions and the trigger's serialisation contract (pure, no cluster)."""

from __future__ import annotations

import datetime as dt
import importlib
import subprocess
import sys

import pytest
from airflow.sdk.definitions.retry_policy import RetryAction

from airflow_gang.exceptions import (
    GangAdmissionTimeout,
    GangApiError,
    GangCRDNotInstalled,
    GangPermissionError,
    GangQueueMismatch,
    GangSpecError,
    PyTorchJobFailed,
)
from airflow_gang.get_provider_info import get_provider_info
from airflow_gang.retry import gang_retry_policy
from airflow_gang.triggers.gang import GangJobTrigger


@pytest.mark.parametrize(
    ("exception", "action"),
    [
        (GangAdmissionTimeout("queued too long"), RetryAction.RETRY),
        (GangSpecError("workers=-1 is invalid"), RetryAction.FAIL),
        (GangPermissionError("cannot create pytorchjobs", status=403), RetryAction.FAIL),
        (GangCRDNotInstalled("PyTorchJob CRD is not installed", status=404), RetryAction.FAIL),
        (GangApiError("Invalid", status=422), RetryAction.FAIL),
        (GangQueueMismatch("in queue default, not research", queue="default"), RetryAction.FAIL),
        (PyTorchJobFailed("worker 0 failed", replica="Worker 0", exit_code=3), RetryAction.FAIL),
        (PyTorchJobFailed("oom killed", replica="Worker 0", exit_code=137), RetryAction.DEFAULT),
        (GangApiError("server error", status=503), RetryAction.DEFAULT),
        (RuntimeError("anything else"), RetryAction.DEFAULT),
    ],
    ids=["timeout", "spec", "rbac", "crd", "422", "wrong-queue", "exit-3", "exit-137", "503", "other"],
)
def test_gang_retry_policy_retries_queue_timeouts_and_fails_fast_on_permanent_errors(
    exception: BaseException, action: RetryAction
) -> None:
    decision = gang_retry_policy(admission_retry_delay=dt.timedelta(seconds=90)).evaluate(exception, 1, 5)
    assert decision.action is action
    if action is RetryAction.RETRY:
        assert decision.retry_delay == dt.timedelta(seconds=90)


def test_admission_retry_delay_accepts_seconds() -> None:
    decision = gang_retry_policy(admission_retry_delay=30).evaluate(GangAdmissionTimeout("x"), 1, 3)
    assert decision.retry_delay == dt.timedelta(seconds=30)


def test_trigger_serialize_mirrors_its_constructor() -> None:
    kwargs = {
        "name": "train-1a2b3c4d",
        "namespace": "ml",
        "uid": "0d3f",
        "wait_for": "both",
        "gang_scheduling": "provider",
        "admission_deadline": "2026-11-29T12:30:00+00:00",
        "execution_deadline": None,
        "submitted_at": "2026-11-29T12:00:00+00:00",
        "admitted_at": None,
        "poll_interval": 5.0,
        "kubernetes_conn_id": "kubernetes_default",
        "hook_kwargs": {"conn_id": "kubernetes_default", "connection_extras": {"namespace": "ml"}},
        "delete_on_kill": True,
        "not_before": "2026-11-29T12:00:10+00:00",
        "api_unavailable_timeout": 900.0,
        "watch": "per_trigger",
        "reattached": True,
        "job_kind": "TrainJob",
        "expected_queue": "research",
        "on_disruption": "wait",
        "max_disruptions": 3,
        "readmission_timeout": 1800.0,
    }
    path, serialized = GangJobTrigger(**kwargs).serialize()  # type: ignore[arg-type]
    assert path == "airflow_gang.triggers.gang.GangJobTrigger"
    assert serialized == kwargs
    assert GangJobTrigger(**serialized).serialize() == (path, kwargs)


def test_provider_info_lists_modules_that_import() -> None:
    info = get_provider_info()
    modules = [
        m
        for key in ("hooks", "operators", "sensors", "triggers")
        for e in info[key]
        for m in e["python-modules"]
    ]
    assert sorted(modules) == [
        "airflow_gang.hooks.gang",
        "airflow_gang.operators.pytorch_job",
        "airflow_gang.operators.train_job",
        "airflow_gang.operators.volcano_job",
        "airflow_gang.sensors.gang",
        "airflow_gang.triggers.gang",
    ]
    for module in modules:
        importlib.import_module(module)


def test_the_trigger_module_imports_no_kubernetes_client() -> None:
    """The triggerer imports a trigger's module inside its event loop: the clients (most of a
    second to import) must be imported later, in a thread (`GangJobTrigger.hook`)."""
    code = (
        "import sys, airflow.triggers.base\n"
        "import airflow_gang.triggers.gang\n"
        "heavy = sorted(m for m in ('kubernetes_asyncio', 'kubernetes', 'aiohttp') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
