"""The triggerer's economies of issue 33, against the embedded cluster, over real HTTP.

- what the shared watch cache keeps of each object (`cache_projection`) decides a gang's status
  exactly as the whole objects read with GETs do;
- the cache reads its lists in pages (`gang_async.LIST_PAGE_SIZE`), each page one request;
- triggers starting together share one connection look-up (`connection_lookup`);
- triggers wait for a shared cache whose first list is slow but getting on, instead of each
  looking with its own requests (which, at 10,000 jobs, slowed that list further).

Requests are counted by the API server itself (``/sim/v1/metrics``), from the provider's
asynchronous client only.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks import gang_async
from airflow_gang.hooks.gang_async import AsyncGangJobHook
from airflow_gang.job_kinds import PYTORCHJOB
from airflow_gang.model.gang_state import GangPhase, GangSnapshot
from airflow_gang.reports.timeline import gang_admitted_at
from airflow_gang.triggers import gang, looks, watch_cache
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.cluster import SimCluster
from tests.support.cluster import write_kubeconfig
from tests.support.submission import Submitted
from tests.support.triggers import provider_requests
from tests.support.watch_cache import (  # noqa: F401  (the fixtures "cluster" and "submit")
    first_event,
    sixteen_gpu_cluster,
    submit_labelled_jobs,
    trigger_for,
)
from tests.tcp_relay import TcpRelay
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
JOB_RESOURCE = "pytorchjobs.kubeflow.org"
PODGROUP_RESOURCE = "podgroups.scheduling.volcano.sh"
JsonDict = dict[str, Any]
LOOKS = 100  # attempts at one consistent look (0.1 s apart) while the job runs undisturbed


def versions(job: JsonDict | None, podgroup: JsonDict | None, pods: list[JsonDict]) -> dict[str, str | None]:
    """The resourceVersion of each object of one look (None: not there)."""

    def version(obj: JsonDict | None) -> str | None:
        return None if obj is None else str(obj["metadata"]["resourceVersion"])

    looked = {"job": version(job), "podgroup": version(podgroup)}
    return looked | {f"pod {pod['metadata']['name']}": version(pod) for pod in pods}


async def same_look(
    hook: AsyncGangJobHook, cache: watch_cache.WatchCache, job: Submitted
) -> tuple[GangSnapshot, GangSnapshot] | None:
    """The running job read with GETs and as the cache holds it, once both hold the same versions
    of every object (the cache follows the server by events: it may be a moment behind)."""
    for _ in range(LOOKS):
        observed = await looks.observe(
            hook, PYTORCHJOB, job.name, NAMESPACE, uid=job.uid, gang_scheduling="provider"
        )
        cached_job, cached_podgroup, cached_pods = cache.snapshot(job.name)
        status = observed.status
        # Settled: the job runs and Volcano has called its PodGroup Running (a moment after).
        running = (
            status.phase is GangPhase.RUNNING and status.running >= 1 and status.podgroup_phase == "Running"
        )
        same = versions(cached_job, cached_podgroup, cached_pods) == versions(
            observed.job, observed.podgroup, observed.pods
        )
        if running and same:
            return observed, GangSnapshot.of(cached_job, cached_podgroup, cached_pods, "provider")
        await asyncio.sleep(0.1)
    return None


def test_the_cache_decides_a_gangs_status_as_the_whole_objects_read_with_gets_do(
    submit: Callable[..., Submitted],
) -> None:
    job = submit(20.0)
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        admitted = await first_event(trigger_for(job, wait_for="admission"))
        seen["event"] = admitted["status"]
        (lingering,) = watch_cache.caches()  # the trigger's cache, kept for a task that defers again
        hook = AsyncGangJobHook(conn_id="kubernetes_default")
        try:
            cache = await watch_cache.acquire(await hook.definition(), NAMESPACE, hook)
            seen["the trigger's cache"] = cache is lingering
            try:
                assert await cache.ready(30)
                seen["looks"] = await same_look(hook, cache, job)
            finally:
                watch_cache.release(cache, linger=0)
            for _ in range(200):  # the last user left with no linger: the cache stops
                if not watch_cache.caches():
                    break
                await asyncio.sleep(0.05)
            seen["caches after"] = len(watch_cache.caches())
        finally:
            await hook.close()

    asyncio.run(scenario())

    assert seen["event"] == "admitted"
    assert seen["the trigger's cache"]
    assert seen["caches after"] == 0
    assert seen["looks"] is not None, "no look at the running job where the cache and the GETs agreed"
    observed, cached = seen["looks"]
    assert cached.status == observed.status
    status = cached.status
    assert (status.phase, status.bound, status.running, status.replicas) == (GangPhase.RUNNING, 1, 1, 1)
    assert (status.queue, status.podgroup_phase) == (observed.podgroup["spec"]["queue"], "Running")
    admitted_at = gang_admitted_at(cached.job, cached.podgroup, cached.pods, status.min_member)
    assert admitted_at is not None
    assert admitted_at == gang_admitted_at(observed.job, observed.podgroup, observed.pods, status.min_member)
    # What the cache kept: a pod's node alone, a job without its pod templates; the rest whole.
    (pod,), (whole_pod,) = cached.pods, observed.pods
    assert pod["spec"] == {"nodeName": whole_pod["spec"]["nodeName"]}
    assert whole_pod["spec"]["containers"]
    assert pod["status"] == whole_pod["status"]
    replicas = cached.job["spec"]["pytorchReplicaSpecs"]
    assert all("template" not in replica for replica in replicas.values())
    assert all("template" in replica for replica in observed.job["spec"]["pytorchReplicaSpecs"].values())
    assert {name: replica["replicas"] for name, replica in replicas.items()} == {"Master": 1}
    assert cached.job["spec"]["runPolicy"] == observed.job["spec"]["runPolicy"]
    assert cached.podgroup == observed.podgroup


def pods_of(api: k8s.ApiClient, jobs: list[Submitted]) -> int:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(NAMESPACE, label_selector=watch_cache.OURS).items
    names = {job.name for job in jobs}
    return sum(1 for pod in pods if pod.metadata.labels.get(PYTORCHJOB.pod_job_label) in names)


def test_the_cache_lists_in_pages_each_one_request(
    submit: Callable[..., Submitted],
    api: k8s.ApiClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gang_async, "LIST_PAGE_SIZE", 2)
    jobs = [submit(10.0) for _ in range(7)]
    # Every job's pod exists before the cache lists, so each kind lists seven objects.
    eventually(lambda: pods_of(api, jobs) == 7, timeout=30, message="the seven jobs' pods were not created")
    before = provider_requests(api)

    async def sweep() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(first_event(trigger_for(job)) for job in jobs)))

    events = asyncio.run(sweep())

    assert [(event["status"], event["uid"]) for event in events] == [("succeeded", job.uid) for job in jobs]
    used = provider_requests(api) - before
    pages = math.ceil(7 / 2)
    # One list of seven objects per kind, read as four pages of at most two: four list requests.
    assert used[("list", JOB_RESOURCE)] == pages, used
    assert used[("list", PODGROUP_RESOURCE)] == pages, used
    assert used[("list", "pods")] == pages, used
    assert used[("watch", JOB_RESOURCE)] == 1, used
    assert used[("get", JOB_RESOURCE)] == 0, used


def test_fifty_triggers_starting_together_share_their_connection_look_up(
    submit: Callable[..., Submitted],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = [submit(1.0) for _ in range(50)]
    hooks_built: list[str] = []
    build_hook = GangJobTrigger.hook

    async def counted_hook(self: GangJobTrigger) -> AsyncGangJobHook:
        hooks_built.append(self.name)
        return await build_hook(self)

    monkeypatch.setattr(GangJobTrigger, "hook", counted_hook)

    async def sweep() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(first_event(trigger_for(job)) for job in jobs)))

    events = asyncio.run(sweep())

    assert [(event["status"], event["uid"]) for event in events] == [("succeeded", job.uid) for job in jobs]
    # A hook is built only by a connection look-up (`connection_lookup.resolve`). The fifty
    # triggers start in one gather: each reaches `resolve` in its first step, before the look-up
    # the first one started has run at all, so they all share it and one hook is built. A few
    # more would still be the economy (a trigger arriving after a look-up ended looks again, by
    # design); one per trigger (50) would be the old cost.
    assert 1 <= len(hooks_built) <= 5, hooks_built


SLOW_POD_PAGES = {"latency": [{"verbs": ["list"], "resources": ["pods"], "rate": 1.0, "seconds": 1.5}]}


def test_triggers_wait_for_a_first_list_that_is_slow_but_getting_on_without_requests_of_their_own(
    submit: Callable[..., Submitted],
    api: k8s.ApiClient,
    cluster: SimCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every page of pods takes 1.5 s, one pod per page: the cache's first list takes longer than
    a trigger waits for a cache that makes no progress (2 s here), but a page comes every 1.5 s."""
    monkeypatch.setattr(gang_async, "LIST_PAGE_SIZE", 1)
    monkeypatch.setattr(gang, "CACHE_SYNC_SECONDS", 2.0)
    jobs = [submit(3.0) for _ in range(4)]
    eventually(lambda: pods_of(api, jobs) == 4, timeout=30, message="the four jobs' pods were not created")
    cluster.set_faults(SLOW_POD_PAGES)
    before = provider_requests(api)

    async def sweep() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(first_event(trigger_for(job)) for job in jobs)))

    try:
        events = asyncio.run(sweep())
    finally:
        cluster.clear_faults()

    assert [(event["status"], event["uid"]) for event in events] == [("succeeded", job.uid) for job in jobs]
    used = provider_requests(api) - before
    assert used[("list", "pods")] >= 4, used  # the slow list did happen: one page per pod
    # No trigger looked on its own while the list got on: no GET of a job or PodGroup, no list
    # of one job's pods (each of those is one more request the slow server must answer).
    assert used[("get", JOB_RESOURCE)] == 0, used
    assert used[("get", PODGROUP_RESOURCE)] == 0, used


RELAYED_CONN_ID = "kubernetes_relayed"
KINDS = ("pytorchjob", "podgroup", "pod")


async def until(probe: Callable[[], bool], timeout: float) -> None:
    """Poll ``probe`` on the running loop (a blocking wait would stall the triggers under test)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.fixture
def relayed(
    cluster: SimCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[TcpRelay]:
    """The connection ``kubernetes_relayed``: the embedded cluster through a TCP relay."""
    parts = urlsplit(cluster.url)
    assert parts.hostname
    assert parts.port
    relay = TcpRelay((parts.hostname, parts.port))
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, cluster, relay.url)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{RELAYED_CONN_ID.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}),
    )
    yield relay
    relay.close()


def test_watch_streams_cut_by_the_network_are_resumed_without_any_trigger_polling(
    submit: Callable[..., Submitted],
    api: k8s.ApiClient,
    relayed: TcpRelay,
) -> None:
    """A connection lost under streams that worked (a network blip, a proxy's idle cut, a read
    timeout while a busy triggerer reads a backlog) is resumed from the last version at once, as
    an informer resumes: the store stays good, so no trigger falls back to GETs (at 5,000 triggers
    per triggerer that fallback was a storm of them, issue 33)."""
    jobs = [submit(8.0) for _ in range(3)]
    before = provider_requests(api)
    seen: dict[str, Any] = {}

    async def run() -> list[dict[str, Any]]:
        waiting = asyncio.gather(*(first_event(trigger_for(job, conn_id=RELAYED_CONN_ID)) for job in jobs))
        await until(lambda: bool(watch_cache.caches()) and watch_cache.caches()[0].healthy, 60)
        await asyncio.sleep(2.0)  # the streams have worked for a while
        relayed.drop_connections()
        await until(lambda: min(watch_cache.caches()[0].counts()[f"{k}_watches"] for k in KINDS) >= 2, 30)
        seen["counts"] = watch_cache.caches()[0].counts()
        return list(await waiting)

    events = asyncio.run(run())
    used = provider_requests(api) - before

    assert [(event["status"], event["uid"]) for event in events] == [("succeeded", job.uid) for job in jobs]
    for kind in KINDS:
        assert seen["counts"][f"{kind}_watches"] >= 2, seen  # reopened after the cut
        assert seen["counts"][f"{kind}_lists"] == 1, seen  # resumed, not listed again
    assert used[("get", "pytorchjobs.kubeflow.org")] == 0, used
    assert used[("get", "podgroups.scheduling.volcano.sh")] == 0, used
