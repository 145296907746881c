"""The triggerer's shared watch cache (`airflow_gang.triggers.watch_cache`), against the embedded cluster.

Triggers are built from their serialized kwargs, as the triggerer builds them, and many run in one
event loop, as in a triggerer. Requests and open watches are counted by the API server itself
(``/sim/v1/metrics``), from the provider's asynchronous client only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.client_pool import USER_AGENT
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import identity_labels
from airflow_gang.triggers import watch_cache
from gang_sim.cluster import SimCluster
from tests.sim.apiserver.helpers import call
from tests.support import submission
from tests.support.submission import Submitted, gang_spec
from tests.support.triggers import provider_requests
from tests.support.watch_cache import (  # noqa: F401  (the fixtures "cluster" and "submit")
    first_event,
    sixteen_gpu_cluster,
    submit_labelled_jobs,
    trigger_for,
)

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"


@pytest.fixture(autouse=True)
def short_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_cache, "LINGER_SECONDS", 0.5)


def metrics(api: k8s.ApiClient) -> dict[str, Any]:
    body: dict[str, Any] = call(api, "GET", "/sim/v1/metrics")
    return body


def open_watches(api: k8s.ApiClient) -> int:
    return sum(entry["count"] for entry in metrics(api)["openWatches"] if entry["userAgent"] == USER_AGENT)


def test_fifty_triggers_share_one_cache_and_the_last_one_leaving_stops_it(
    submit: Callable[..., Submitted], api: k8s.ApiClient
) -> None:
    jobs = [submit(1.0) for _ in range(50)]
    before = provider_requests(api)
    seen: dict[str, Any] = {}

    async def sweep() -> list[dict[str, Any]]:
        triggers = [trigger_for(job) for job in jobs]
        waiting = asyncio.gather(*(first_event(trigger) for trigger in triggers))
        # The triggers have started (each looks its connection up) and the cache watches.
        for _ in range(300):
            caches = watch_cache.caches()
            if caches and caches[0].healthy:
                break
            await asyncio.sleep(0.05)
        seen["caches while waiting"] = len(watch_cache.caches())
        seen["watches while waiting"] = await asyncio.to_thread(open_watches, api)
        events = await waiting
        seen["caches right after"] = len(watch_cache.caches())
        await asyncio.sleep(watch_cache.LINGER_SECONDS + 1.0)
        seen["caches after the linger"] = len(watch_cache.caches())
        return events

    events = asyncio.run(sweep())

    assert [event["status"] for event in events] == ["succeeded"] * 50
    assert [event["uid"] for event in events] == [job.uid for job in jobs]
    assert seen == {
        "caches while waiting": 1,
        "watches while waiting": 3,  # PyTorchJobs, PodGroups, pods: for fifty jobs
        "caches right after": 1,  # lingering for a task that defers again
        "caches after the linger": 0,
    }
    assert open_watches(api) == 0
    used = provider_requests(api) - before
    assert used[("watch", "pytorchjobs.kubeflow.org")] == 1, used
    assert used[("list", "pytorchjobs.kubeflow.org")] == 1, used
    # No trigger read its own objects: every decision came from the cache.
    assert used[("get", "pytorchjobs.kubeflow.org")] == 0, used
    assert used[("get", "podgroups.scheduling.volcano.sh")] == 0, used
    assert used[("list", "pods")] == 1, used


def versions(objects: Any) -> dict[str, str]:
    return {obj["metadata"]["name"]: obj["metadata"]["resourceVersion"] for obj in objects}


def test_the_cache_survives_cut_watches_410_and_an_outage_without_losing_an_event(
    submit: Callable[..., Submitted], cluster: SimCluster, api: k8s.ApiClient
) -> None:
    jobs = [submit(seconds) for seconds in (2, 4, 6, 8, 10, 12)]
    cluster.set_faults(
        {
            "seed": 3,
            "watches": {"cut_after_events": 3, "gone_on_resume_rate": 0.5},
            "outages": [{"start": 3, "duration": 4}],
        }
    )
    checked: dict[str, Any] = {}

    async def run() -> list[dict[str, Any]]:
        events = await asyncio.gather(*(first_event(trigger_for(job)) for job in jobs))
        # While it lingers, the cache holds what a fresh list holds: nothing lost, nothing stale.
        (cache,) = watch_cache.caches()
        fresh, _ = await cache.hook.list_with_version(
            "pytorchjob", NAMESPACE, label_selector=watch_cache.OURS
        )
        cached = cache.followers["pytorchjob"].objects
        checked["same objects"] = {
            name: obj["metadata"]["resourceVersion"] for name, obj in cached.items()
        } == {obj["metadata"]["name"]: obj["metadata"]["resourceVersion"] for obj in fresh}
        checked["counts"] = cache.counts()
        return events

    events = asyncio.run(run())
    faults = metrics(api)["faults"]

    assert [(event["status"], event["uid"]) for event in events] == [("succeeded", job.uid) for job in jobs]
    assert checked["same objects"], checked
    assert faults["watch_cut"] > 0, faults
    assert faults["watch_gone"] > 0, faults
    assert faults["outage"] == 1, faults
    assert checked["counts"]["pytorchjob_lists"] >= 2, checked  # listed again after a 410


def test_two_connections_to_two_clusters_get_two_caches(
    submit: Callable[..., Submitted], api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SimCluster(nodes=1, gpus_per_node=2, schedule_period=0.2) as other:
        value = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": other.kubeconfig_path}})
        monkeypatch.setenv("AIRFLOW_CONN_OTHER_CLUSTER", value)
        here = submit(3.0)
        other_hook = GangJobHook(conn_id="other_cluster")
        labels = identity_labels("watch_cache", "t", "r", -1, 1)
        created = submission.submit(
            "there", gang_spec(3.0, workers=0), hook=other_hook, namespace=NAMESPACE, labels=labels
        )
        there = Submitted("there", created["metadata"]["uid"])
        seen: dict[str, int] = {}

        async def both() -> list[dict[str, Any]]:
            waiting = asyncio.gather(
                first_event(trigger_for(here)), first_event(trigger_for(there, conn_id="other_cluster"))
            )
            await asyncio.sleep(1.0)
            seen["caches"] = len(watch_cache.caches())
            with other.api_client() as other_api:
                seen["watches here"] = await asyncio.to_thread(open_watches, api)
                seen["watches there"] = await asyncio.to_thread(open_watches, other_api)
            return await waiting

        events = asyncio.run(both())
        other_hook.delete_pytorchjob("there", NAMESPACE, propagation="Foreground")

    assert [(event["status"], event["uid"]) for event in events] == [
        ("succeeded", here.uid),
        ("succeeded", there.uid),
    ]
    assert seen == {"caches": 2, "watches here": 3, "watches there": 3}


def test_a_job_without_the_providers_labels_is_watched_alone(
    submit: Callable[..., Submitted], capfd: pytest.CaptureFixture[str]
) -> None:
    """A sensor may wait for a job someone else submitted: the cache does not follow it."""
    job = submit(2.0, labelled=False)

    event = asyncio.run(first_event(trigger_for(job)))

    assert (event["status"], event["uid"]) == ("succeeded", job.uid)
    assert (
        f"PyTorchJob {NAMESPACE}/{job.name} is not the provider's: watching it alone"
        in capfd.readouterr().out
    )
