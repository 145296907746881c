"""Watch streams through kubernetes_asyncio (and the sync client for 410 handling)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as sync_watch
from kubernetes_asyncio import watch

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.apiserver.store import Store
from gang_sim.apiserver.watching import Event
from tests.sim.apiserver.helpers import pod_manifest, pytorchjob_manifest

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


async def collect(stream: watch.Watch, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async for event in stream:
            events.append(event)
            if len(events) == count:
                return

    await asyncio.wait_for(run(), timeout)
    return events


async def test_watch_from_list_version_sees_added_modified_deleted(
    async_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(async_client)
    listed = await core.list_namespaced_pod(namespace)
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_pod,
        namespace,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    )
    pending = asyncio.ensure_future(collect(stream, 3))
    await core.create_namespaced_pod(namespace, pod_manifest("w"))
    await core.patch_namespaced_pod("w", namespace, {"metadata": {"labels": {"step": "2"}}})
    await core.delete_namespaced_pod("w", namespace)
    events = await pending
    w.stop()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert events[1]["object"].metadata.labels == {"step": "2"}


async def test_watch_without_version_replays_current_objects(
    async_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(async_client)
    for name in ("a", "b"):
        await core.create_namespaced_pod(namespace, pod_manifest(name))
    w = watch.Watch()
    events = await collect(w.stream(core.list_namespaced_pod, namespace, timeout_seconds=5), 2)
    w.stop()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


async def test_custom_object_watch_with_label_selector_transitions(
    async_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(async_client)
    listed = await custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    w = watch.Watch()
    stream = w.stream(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        label_selector="team=ml",
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=10,
    )
    pending = asyncio.ensure_future(collect(stream, 3))
    await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, pytorchjob_manifest("j"))
    # kubernetes_asyncio sends dict bodies for custom objects as JSON patch unless told otherwise
    # (a real kube-apiserver answers 400 too), so name the merge patch explicitly.
    for labels in ({"team": "ml"}, {"extra": "1"}, {"team": None}):
        await custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "j",
            {"metadata": {"labels": labels}},
            _content_type="application/merge-patch+json",
        )
    events = await pending
    w.stop()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[2]["object"]["metadata"]["labels"] == {"team": "ml", "extra": "1"}


async def test_watch_is_scoped_to_its_namespace(
    async_client: aclient.ApiClient, namespace: str, core: k8s.CoreV1Api
) -> None:
    other = f"{namespace}-other"
    core.create_namespace({"metadata": {"name": other}})
    try:
        api = aclient.CoreV1Api(async_client)
        rv = (await api.list_namespaced_pod(namespace)).metadata.resource_version
        w = watch.Watch()
        pending = asyncio.ensure_future(
            collect(w.stream(api.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=10), 1)
        )
        await api.create_namespaced_pod(other, pod_manifest("elsewhere"))
        await api.create_namespaced_pod(namespace, pod_manifest("here"))
        events = await pending
        w.stop()
        assert [e["object"].metadata.name for e in events] == ["here"]
    finally:
        core.delete_namespace(other)


async def test_timeout_seconds_ends_the_stream(async_client: aclient.ApiClient, namespace: str) -> None:
    api = aclient.CoreV1Api(async_client)
    started = time.monotonic()
    events = [e async for e in watch.Watch().stream(api.list_namespaced_pod, namespace, timeout_seconds=1)]
    elapsed = time.monotonic() - started
    assert events == []
    assert 0.9 <= elapsed < 5


async def test_bookmarks_carry_the_latest_version(
    async_client: aclient.ApiClient, namespace: str, core: k8s.CoreV1Api
) -> None:
    api = aclient.CoreV1Api(async_client)
    rv = (await api.list_namespaced_pod(namespace)).metadata.resource_version
    # Writes elsewhere move the cluster's resourceVersion; the bookmark must follow them.
    core.create_namespaced_pod(namespace, pod_manifest("noise"))
    latest = int(core.list_namespaced_pod(namespace).metadata.resource_version)
    w = watch.Watch()
    events = await collect(
        w.stream(
            api.list_namespaced_pod,
            namespace,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ),
        2,
    )
    w.stop()
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    bookmark = events[1]["raw_object"]
    assert bookmark["kind"] == "Pod"
    assert int(bookmark["metadata"]["resourceVersion"]) >= latest
    assert int(w.resource_version) >= latest


async def test_no_bookmarks_unless_asked(async_client: aclient.ApiClient, namespace: str) -> None:
    api = aclient.CoreV1Api(async_client)
    events = [e async for e in watch.Watch().stream(api.list_namespaced_pod, namespace, timeout_seconds=1)]
    assert events == []


def test_watch_from_compacted_version_is_410_expired(small_window: ApiServerHandle) -> None:
    api = k8s_config.new_client_from_config(config_file=small_window.kubeconfig_path)
    core = k8s.CoreV1Api(api)
    old = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod_manifest("churn"))
    for i in range(25):
        core.patch_namespaced_pod("churn", "default", {"metadata": {"labels": {"n": str(i)}}})
    # The raw stream: one ERROR event carrying a 410 Expired Status, then the end.
    response = core.list_namespaced_pod(
        "default", watch=True, resource_version=old, timeout_seconds=5, _preload_content=False
    )
    lines = [line for line in response.read().decode().splitlines() if line]
    assert len(lines) == 1
    import json

    event = json.loads(lines[0])
    assert event["type"] == "ERROR"
    assert {k: event["object"][k] for k in ("kind", "status", "reason", "code")} == {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
    assert event["object"]["message"].startswith(f"too old resource version: {old} (")
    # The official client's watch surfaces it as an ApiException so callers re-list.
    with pytest.raises(k8s.ApiException) as caught:
        list(
            sync_watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version=old, timeout_seconds=5
            )
        )
    assert caught.value.status == 410
    core.delete_namespaced_pod("churn", "default")
    api.close()


async def test_hundreds_of_concurrent_watches_each_see_the_event(
    apiserver: ApiServerHandle, namespace: str
) -> None:
    count = 300
    configuration = aclient.Configuration()
    await aconfig.load_kube_config(config_file=apiserver.kubeconfig_path, client_configuration=configuration)
    configuration.connection_pool_maxsize = count + 10  # one connection per open watch
    async with aclient.ApiClient(configuration) as client:
        api = aclient.CoreV1Api(client)
        baseline = apiserver.state.store.watcher_count()
        rv = (await api.list_namespaced_pod(namespace)).metadata.resource_version
        watchers = [watch.Watch() for _ in range(count)]
        tasks = [
            asyncio.ensure_future(
                collect(
                    w.stream(api.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=30),
                    1,
                    timeout=30,
                )
            )
            for w in watchers
        ]
        deadline = time.monotonic() + 20
        while apiserver.state.store.watcher_count() < baseline + count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # yield to the watch tasks until every stream is registered
        assert apiserver.state.store.watcher_count() >= baseline + count
        started = time.monotonic()
        await api.create_namespaced_pod(namespace, pod_manifest("fanout"))
        results = await asyncio.gather(*tasks)
        fan_out_seconds = time.monotonic() - started
        for w in watchers:
            w.stop()
    assert all(r[0]["object"].metadata.name == "fanout" for r in results)
    assert fan_out_seconds < 10


async def test_writes_from_another_thread_reach_http_watchers(
    apiserver: ApiServerHandle, async_client: aclient.ApiClient, namespace: str
) -> None:
    api = aclient.CoreV1Api(async_client)
    baseline = apiserver.state.store.watcher_count()
    w = watch.Watch()
    pending = asyncio.ensure_future(
        collect(w.stream(api.list_namespaced_pod, namespace, timeout_seconds=10), 1)
    )
    deadline = time.monotonic() + 5
    while apiserver.state.store.watcher_count() <= baseline and time.monotonic() < deadline:
        await asyncio.sleep(0.02)  # the event must reach a live watcher, not a replay
    pods = apiserver.state.registry.lookup("", "v1", "pods")
    assert pods is not None
    # The store is shared with in-process callers: a write on a worker thread must fan out too.
    await asyncio.to_thread(apiserver.state.api.create, pods, namespace, pod_manifest("threaded"))
    events = await pending
    w.stop()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "threaded")]


def test_a_lagging_watcher_is_closed_not_waited_for() -> None:
    store = Store(window=100, watch_queue_size=5)

    async def scenario() -> tuple[bool, int, Any]:
        watcher, _ = store.watch("/pods", None, None, asyncio.get_running_loop())
        for i in range(10):  # nobody reads: the writer must not block
            store.commit("ADDED", "/pods", {"metadata": {"name": f"p{i}", "namespace": "d", "uid": str(i)}})
        drained = []
        while not watcher.queue.empty():
            drained.append(watcher.queue.get_nowait())
        return watcher.lagged, len(drained), drained[-1]

    lagged, queued, last = asyncio.run(scenario())
    assert lagged
    assert queued == 1
    assert last is None
    assert store.resource_version == 10


def test_store_snapshot_rolls_back_through_the_log() -> None:
    store = Store(window=10)
    store.commit("ADDED", "/pods", {"metadata": {"name": "a", "namespace": "d", "uid": "1"}})
    at_one = store.resource_version
    current = store.get("/pods", "d", "a")
    assert current is not None
    store.commit("MODIFIED", "/pods", {**current, "spec": {"x": 1}})
    store.commit("ADDED", "/pods", {"metadata": {"name": "b", "namespace": "d", "uid": "2"}})
    snapshot = store.snapshot("/pods", "d", at_one)
    assert [(o["metadata"]["name"], o.get("spec")) for o in snapshot] == [("a", None)]
    assert isinstance(Event(1, "ADDED", "/pods", snapshot[0], None).line(), bytes)
