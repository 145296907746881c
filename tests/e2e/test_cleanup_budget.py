"""A deletion on the way out keeps Airflow's time limits, also against an API server that hangs.

The trigger's ``on_kill`` is cancelled by the triggerer after ``[triggerer] on_kill_timeout``; a
worker's ``on_kill`` is SIGKILLed after ``[core] killed_task_cleanup_time``. The simulator delays
every PyTorchJob delete (an accepted connection that answers late, as a hung API server does):
the deletions must give up at their budget, not after a request timeout times the retries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import cleanup
from airflow_gang.triggers.deletion import on_kill_budget_seconds
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.cluster import SimCluster
from tests.support.submission import gang_spec, submit

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
HUNG_DELETES = {
    "latency": [{"verbs": ["delete"], "resources": ["pytorchjobs.kubeflow.org"], "rate": 1.0, "seconds": 8}]
}


@pytest.fixture
def job(
    cluster: SimCluster, kube_connection: str, request: pytest.FixtureRequest
) -> Iterator[dict[str, Any]]:
    """A running gang job (PodGroup + PyTorchJob); at the end, faults off and both deleted."""
    name = "budget-trigger" if "trigger" in request.node.name else "budget-sync"
    yield submit(name, gang_spec(), namespace=NAMESPACE)
    cluster.clear_faults()
    hook = GangJobHook(conn_id="kubernetes_default")
    cleanup.delete_gang(hook, name, NAMESPACE, None, timeout=30, reason="test cleanup")


def test_the_triggers_on_kill_ends_within_the_triggerers_on_kill_timeout(
    job: dict[str, Any],
    cluster: SimCluster,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW__TRIGGERER__ON_KILL_TIMEOUT", "4")
    assert on_kill_budget_seconds() == 2.0
    metadata = job["metadata"]
    trigger = GangJobTrigger(
        name=metadata["name"],
        namespace=NAMESPACE,
        uid=metadata["uid"],
        hook_kwargs=GangJobHook(conn_id="kubernetes_default").async_hook_kwargs(),
        watch="per_trigger",
    )
    cluster.set_faults(HUNG_DELETES)
    started = time.monotonic()
    asyncio.run(trigger.on_kill())
    took = time.monotonic() - started

    assert cluster.fault_counts()["latency"] >= 1, "the delete was never sent"
    assert took < 3.5, f"on_kill ran {took:.1f}s, past its 2s budget"
    output = capfd.readouterr().out
    assert f"PyTorchJob {NAMESPACE}/{metadata['name']} not confirmed deleted within 2s" in output


def test_the_sync_cleanup_ends_within_its_budget_when_a_request_hangs(
    job: dict[str, Any], cluster: SimCluster
) -> None:
    hook = GangJobHook(conn_id="kubernetes_default")
    metadata = job["metadata"]
    cluster.set_faults(HUNG_DELETES)
    started = time.monotonic()
    gone = cleanup.delete_gang(hook, metadata["name"], NAMESPACE, metadata["uid"], timeout=2, reason="test")
    took = time.monotonic() - started

    assert cluster.fault_counts()["latency"] >= 1, "the delete was never sent"
    assert gone is False
    assert took < 3.5, f"the cleanup ran {took:.1f}s, past its 2s budget"
