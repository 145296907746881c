"""Both drivers of the one deletion plan (`airflow_gang.jobs.deletion`) keep its PodGroup rule.

With gang scheduling disabled a cluster may have no Volcano, so deleting such a job must never
read or delete a PodGroup. The simulator answers every PodGroup request with 500 here: the sync
driver (`operators.cleanup`, worker and reaper) and the async one (`triggers.deletion`, the
triggerer) both delete and confirm a disabled-mode job without noticing, while a gang job under
the same faults cannot be confirmed (which shows the PodGroup step is really there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.gang_async import AsyncGangJobHook
from airflow_gang.jobs import cleanup
from airflow_gang.triggers import deletion
from gang_sim.cluster import SimCluster
from tests.support.cluster import NOTHING, all_running, leftovers
from tests.support.submission import gang_spec, submit
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
PODGROUPS_FAIL = {"errors": [{"resources": ["podgroups.scheduling.volcano.sh"], "rate": 1.0, "status": 500}]}


class Log:
    """What the async driver logs to (the trigger's logger in production)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)

    info = warning


@pytest.fixture
def plain_job(cluster: SimCluster, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A running disabled-mode job: no PodGroup, no Volcano decoration."""
    hook = GangJobHook(conn_id="kubernetes_default")
    name = f"plain-{request.node.callspec.id}"
    job = submit(name, gang_spec(60, workers=0, gang_scheduling="disabled"), hook=hook, namespace=NAMESPACE)
    with cluster.api_client() as api:
        eventually(lambda: all_running(api, name, 1), timeout=20, message=f"{name} not running")
    yield job
    cluster.clear_faults()
    cleanup.delete_gang(hook, name, NAMESPACE, None, timeout=30, reason="test cleanup")


async def delete_from_the_triggerer(job: dict[str, Any], gang_scheduling: str, timeout: float) -> bool:
    hook = AsyncGangJobHook(**GangJobHook(conn_id="kubernetes_default").async_hook_kwargs())
    try:
        metadata = job["metadata"]
        return await deletion.delete_gang(
            hook,
            metadata["name"],
            NAMESPACE,
            metadata["uid"],
            gang_scheduling=gang_scheduling,
            timeout=timeout,
            log=Log(),
        )
    finally:
        await hook.close()


def delete_from_a_worker(job: dict[str, Any], gang_scheduling: str, timeout: float) -> bool:
    metadata = job["metadata"]
    hook = GangJobHook(conn_id="kubernetes_default")
    return cleanup.delete_gang(
        hook,
        metadata["name"],
        NAMESPACE,
        metadata["uid"],
        gang_scheduling=gang_scheduling,
        timeout=timeout,
        reason="test",
    )


def run_driver(driver: str, job: dict[str, Any], gang_scheduling: str, timeout: float) -> bool:
    if driver == "triggerer":
        return asyncio.run(delete_from_the_triggerer(job, gang_scheduling, timeout))
    return delete_from_a_worker(job, gang_scheduling, timeout)


@pytest.mark.parametrize("driver", ["worker", "triggerer"])
def test_a_disabled_mode_job_is_deleted_without_a_podgroup_request(
    plain_job: dict[str, Any], cluster: SimCluster, api: Any, driver: str
) -> None:
    before = cluster.fault_counts().get("error_500", 0)
    cluster.set_faults(PODGROUPS_FAIL)
    assert run_driver(driver, plain_job, "disabled", timeout=20) is True
    assert cluster.fault_counts().get("error_500", 0) == before, "a PodGroup was asked for"
    cluster.clear_faults()
    assert leftovers(api) == NOTHING


@pytest.mark.parametrize("driver", ["worker", "triggerer"])
def test_a_gang_job_is_not_confirmed_while_its_podgroup_cannot_be_read(
    cluster: SimCluster, driver: str
) -> None:
    job = submit(f"gang-{driver}", gang_spec())
    try:
        before = cluster.fault_counts().get("error_500", 0)
        cluster.set_faults(PODGROUPS_FAIL)
        assert run_driver(driver, job, "provider", timeout=3) is False
        assert cluster.fault_counts().get("error_500", 0) > before
    finally:
        cluster.clear_faults()
        metadata = job["metadata"]
        cleanup.delete_gang(
            GangJobHook(conn_id="kubernetes_default"),
            metadata["name"],
            NAMESPACE,
            None,
            timeout=30,
            reason="test",
        )
