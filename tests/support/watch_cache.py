"""The triggerer's shared watch cache against the embedded cluster (tests/e2e/test_watch_cache.py,
test_watch_cache_economy.py, test_connection_change.py): a cluster for waves of jobs, the
provider's jobs submitted with identity labels and deleted after, and triggers rebuilt from their
serialized kwargs, as the triggerer builds them.

The fixtures are imported by name into the modules that use them (pytest finds them there), and
they are named ``cluster`` and ``submit`` for the tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import identity_labels
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.cluster import SimCluster
from tests.support import submission
from tests.support.submission import Submitted, gang_spec
from tests.support.triggers import first_event as first_event_within

NAMESPACE = "default"
EVENT_TIMEOUT = 120.0


@pytest.fixture(scope="module", name="cluster")
def sixteen_gpu_cluster() -> Iterator[SimCluster]:
    """16 GPUs: a wave of 16 one-replica jobs at a time."""
    with SimCluster(nodes=2, gpus_per_node=8, schedule_period=0.2) as running:
        yield running


@pytest.fixture(name="submit")
def submit_labelled_jobs(cluster: SimCluster) -> Iterator[Callable[..., Submitted]]:
    """Create the provider's jobs (identity labels, as the operator submits them); delete them after."""
    hook = GangJobHook(conn_id="kubernetes_default")
    run = f"cache_{uuid.uuid4().hex[:6]}"
    created: list[str] = []

    def create(seconds: float = 1.0, *, labelled: bool = True) -> Submitted:
        index = len(created)
        name = f"{run.replace('_', '-')}-{index}"
        labels = identity_labels("watch_cache", "train", run, index, 1) if labelled else None
        created.append(name)  # before the creates: a half-made gang is deleted all the same
        spec = gang_spec(seconds, workers=0)
        job = submission.submit(name, spec, hook=hook, namespace=NAMESPACE, labels=labels)
        return Submitted(name, job["metadata"]["uid"])

    yield create
    cluster.clear_faults()
    for name in created:
        hook.delete_pytorchjob(name, NAMESPACE, propagation="Foreground")
        hook.delete_podgroup(name, NAMESPACE)
    for name in created:
        assert hook.wait_gone("pytorchjob", name, NAMESPACE, timeout=60), f"PyTorchJob {name} not deleted"


def trigger_for(job: Submitted, **kwargs: Any) -> GangJobTrigger:
    built = GangJobTrigger(
        name=job.name,
        namespace=NAMESPACE,
        uid=job.uid,
        gang_scheduling="provider",
        poll_interval=600,  # a trigger that needed polling would miss the timeout
        hook_kwargs=GangJobHook(conn_id=kwargs.pop("conn_id", "kubernetes_default")).async_hook_kwargs(),
        **kwargs,
    )
    _, serialized = built.serialize()
    assert serialized["watch"] == "shared"
    return GangJobTrigger(**serialized)


async def first_event(trigger: GangJobTrigger) -> dict[str, Any]:
    """The trigger's first event, given the time a wave of jobs on one cache takes."""
    return await first_event_within(trigger, EVENT_TIMEOUT)
