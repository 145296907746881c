"""``GET /sim/v1/metrics``: requests counted by (user agent, verb, resource), watches once each."""

from __future__ import annotations

import json
import ssl
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from gang_sim.apiserver.metrics import RequestKey, RequestMetrics, request_key
from gang_sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import pod_manifest, pytorchjob_manifest
from tests.waiting import eventually


def https(
    server: ApiServerHandle, path: str, *, token: str | None, user_agent: str = "test-metrics/raw"
) -> tuple[int, Any]:
    """Plain HTTPS trusting the kubeconfig's CA, with the given token (None: anonymous)."""
    context = ssl.create_default_context(cadata=(server.ca_pem or b"").decode())
    request = urllib.request.Request(server.url + path, headers={"User-Agent": user_agent})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def counts_for(server: ApiServerHandle, user_agent: str) -> dict[tuple[str, str], int]:
    status, body = https(server, "/sim/v1/metrics", token=server.token)
    assert status == 200
    assert body["kind"] == "RequestMetrics"
    assert body["total"] == sum(entry["count"] for entry in body["requests"])
    return {
        (entry["verb"], entry["resource"]): entry["count"]
        for entry in body["requests"]
        if entry["userAgent"] == user_agent
    }


@pytest.fixture
def tagged_client(apiserver: ApiServerHandle) -> Iterator[tuple[k8s.ApiClient, str]]:
    """An official client with a User-Agent of its own, so other tests' traffic cannot interfere."""
    client = k8s_config.new_client_from_config(config_file=apiserver.kubeconfig_path)
    agent = f"test-metrics/{uuid.uuid4().hex[:8]}"
    client.user_agent = agent
    yield client, agent
    client.close()


def test_counts_each_verb_per_user_agent(
    apiserver: ApiServerHandle, tagged_client: tuple[k8s.ApiClient, str], namespace: str
) -> None:
    client, agent = tagged_client
    core, custom = k8s.CoreV1Api(client), k8s.CustomObjectsApi(client)
    core.create_namespaced_pod(namespace, pod_manifest("p1", labels={"app": "m"}))
    core.read_namespaced_pod("p1", namespace)
    core.read_namespaced_pod("p1", namespace)
    listed = core.list_namespaced_pod(namespace, label_selector="app=m")
    core.patch_namespaced_pod("p1", namespace, {"metadata": {"labels": {"seen": "yes"}}})
    events = list(
        k8s_watch.Watch().stream(
            core.list_namespaced_pod,
            namespace,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert [event["type"] for event in events] == ["MODIFIED"]  # one stream, one event
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", pytorchjob_manifest("j1")
    )
    custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", "j1")
    custom.delete_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", "j1")
    core.delete_collection_namespaced_pod(namespace)
    core.read_namespace(namespace)

    assert counts_for(apiserver, agent) == {
        ("create", "pods"): 1,
        ("get", "pods"): 2,
        ("list", "pods"): 1,
        ("patch", "pods"): 1,
        ("watch", "pods"): 1,
        ("create", "pytorchjobs.kubeflow.org"): 1,
        ("get", "pytorchjobs.kubeflow.org"): 1,
        ("delete", "pytorchjobs.kubeflow.org"): 1,
        ("deletecollection", "pods"): 1,
        ("get", "namespaces"): 1,
    }


def test_counts_only_authenticated_requests(apiserver: ApiServerHandle) -> None:
    agent = f"test-metrics/{uuid.uuid4().hex[:8]}"
    assert https(apiserver, "/api/v1/namespaces", token=None, user_agent=agent)[0] == 401
    assert https(apiserver, "/api/v1/namespaces", token="wrong", user_agent=agent)[0] == 401
    assert https(apiserver, "/sim/v1/metrics", token=None, user_agent=agent)[0] == 401
    assert counts_for(apiserver, agent) == {}
    assert https(apiserver, "/api/v1/namespaces", token=apiserver.token, user_agent=agent)[0] == 200
    assert https(apiserver, "/version", token=apiserver.token, user_agent=agent)[0] == 200
    assert counts_for(apiserver, agent) == {("list", "namespaces"): 1, ("get", ""): 1}


@pytest.mark.parametrize(
    ("method", "path", "query", "verb", "resource"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", "", "list", "pods"),
        ("GET", "/api/v1/namespaces/ns/pods", "watch=true&resourceVersion=5", "watch", "pods"),
        ("GET", "/api/v1/namespaces/ns/pods", "watch=1", "watch", "pods"),
        ("GET", "/api/v1/namespaces/ns/pods", "watch=false", "list", "pods"),
        ("GET", "/api/v1/pods", "watch=true", "watch", "pods"),
        ("GET", "/api/v1/namespaces/ns/pods/p", "", "get", "pods"),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", "follow=true", "get", "pods/log"),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", "", "create", "pods/binding"),
        ("PUT", "/api/v1/namespaces/ns/pods/p/status", "", "update", "pods/status"),
        ("GET", "/api/v1/namespaces", "", "list", "namespaces"),
        ("GET", "/api/v1/namespaces/ns", "", "get", "namespaces"),
        ("PUT", "/api/v1/namespaces/ns/status", "", "update", "namespaces/status"),
        ("DELETE", "/api/v1/nodes/n1", "", "delete", "nodes"),
        (
            "PATCH",
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g",
            "",
            "patch",
            "podgroups.scheduling.volcano.sh",
        ),
        (
            "DELETE",
            "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs",
            "",
            "deletecollection",
            "pytorchjobs.kubeflow.org",
        ),
        ("GET", "/apis/kubeflow.org/v1", "", "get", ""),
        ("GET", "/healthz", "", "get", ""),
        ("POST", "/sim/v1/namespaces/ns/pods/p/log", "container=c", "post", ""),
    ],
)
def test_request_key_follows_kube_apiserver_verbs(
    method: str, path: str, query: str, verb: str, resource: str
) -> None:
    assert request_key(method, path, query, "ua") == RequestKey("ua", verb, resource)


def test_record_is_thread_safe() -> None:
    metrics = RequestMetrics()
    key = RequestKey("ua", "get", "pods")

    def hammer() -> None:
        for _ in range(5_000):
            metrics.record(key)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert metrics.snapshot() == {key: 40_000}
    assert metrics.to_json()["total"] == 40_000


def open_watches_for(server: ApiServerHandle, user_agent: str) -> dict[str, int]:
    status, body = https(server, "/sim/v1/metrics", token=server.token)
    assert status == 200
    return {
        entry["resource"]: entry["count"] for entry in body["openWatches"] if entry["userAgent"] == user_agent
    }


def test_open_watches_are_a_gauge_from_opening_until_the_stream_ends(
    apiserver: ApiServerHandle, tagged_client: tuple[k8s.ApiClient, str]
) -> None:
    client, agent = tagged_client
    core = k8s.CoreV1Api(client)
    version = core.list_namespaced_pod("default").metadata.resource_version
    streams = [
        core.list_namespaced_pod(
            "default", watch=True, resource_version=version, timeout_seconds=30, _preload_content=False
        )
        for _ in range(2)
    ]
    eventually(lambda: open_watches_for(apiserver, agent) == {"pods": 2}, timeout=5)
    for stream in streams:
        stream.close()
        stream.release_conn()
    eventually(lambda: open_watches_for(apiserver, agent) == {}, timeout=10)
