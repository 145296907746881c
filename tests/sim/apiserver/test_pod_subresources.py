"""pods/binding, pods/log and the simulator-only log append endpoint."""

from __future__ import annotations

import re
import threading

import pytest
from kubernetes import client as k8s

from tests.sim.apiserver.helpers import call, pod_manifest, status_of


def append_log(
    api_client: k8s.ApiClient, namespace: str, pod: str, lines: list[str], container: str = ""
) -> None:
    query = [("container", container)] if container else []
    call(api_client, "POST", f"/sim/v1/namespaces/{namespace}/pods/{pod}/log", {"lines": lines}, query=query)


def start_container(core: k8s.CoreV1Api, namespace: str, pod: str, container: str = "main") -> None:
    core.patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": container,
                        "ready": True,
                        "restartCount": 0,
                        "image": "busybox",
                        "imageID": "",
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            }
        },
    )


def read_log(core: k8s.CoreV1Api, pod: str, namespace: str, **params: object) -> str:
    # kubernetes 36's generated client returns str(bytes) for text bodies; read the raw body instead.
    response = core.read_namespaced_pod_log(pod, namespace, _preload_content=False, **params)
    text: str = response.data.decode()
    return text


def test_binding_sets_node_once(api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    status = call(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods/p/binding", binding)
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = core.read_namespaced_pod("p", namespace)
    assert pod.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(k8s.ApiException) as caught:
        call(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/p/binding",
            {**binding, "target": {"kind": "Node", "name": "node-2"}},
        )
    conflict = status_of(caught.value)
    assert (conflict["code"], conflict["reason"]) == (409, "Conflict")
    assert conflict["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-1"'
    )


def test_legacy_bindings_collection(api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("q"))
    call(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/bindings",
        {"metadata": {"name": "q"}, "target": {"kind": "Node", "name": "node-2"}},
    )
    assert core.read_namespaced_pod("q", namespace).spec.node_name == "node-2"


def test_logs_read_back_with_tail_and_timestamps(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("p", nodeName="node-1"))
    start_container(core, namespace, "p")
    append_log(api_client, namespace, "p", ["epoch 1", "epoch 2", "epoch 3"])
    assert read_log(core, "p", namespace) == "epoch 1\nepoch 2\nepoch 3\n"
    assert read_log(core, "p", namespace, tail_lines=2) == "epoch 2\nepoch 3\n"
    assert read_log(core, "p", namespace, since_seconds=60).count("\n") == 3
    stamped = read_log(core, "p", namespace, timestamps=True, tail_lines=1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z epoch 3\n", stamped)
    assert read_log(core, "p", namespace, limit_bytes=5) == "epoch"


def test_log_errors_match_upstream(core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("two", nodeName="node-1")
    body["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    core.create_namespaced_pod(namespace, body)
    with pytest.raises(k8s.ApiException) as unnamed:
        read_log(core, "two", namespace)
    assert status_of(unnamed.value)["message"] == (
        "a container name must be specified for pod two, choose one of: [main sidecar]"
    )
    with pytest.raises(k8s.ApiException) as unknown:
        read_log(core, "two", namespace, container="nope")
    assert status_of(unknown.value)["message"] == "container nope is not valid for pod two"
    with pytest.raises(k8s.ApiException) as waiting:
        read_log(core, "two", namespace, container="main")
    assert status_of(waiting.value)["message"] == (
        'container "main" in pod "two" is waiting to start: ContainerCreating'
    )
    with pytest.raises(k8s.ApiException) as missing:
        read_log(core, "ghost", namespace)
    assert missing.value.status == 404
    core.create_namespaced_pod(namespace, pod_manifest("unscheduled"))
    assert read_log(core, "unscheduled", namespace) == ""


def test_follow_streams_until_the_pod_finishes(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("f", nodeName="node-1"))
    start_container(core, namespace, "f")
    append_log(api_client, namespace, "f", ["first"])
    response = core.read_namespaced_pod_log("f", namespace, follow=True, _preload_content=False)
    received: list[str] = []
    first_seen = threading.Event()

    def reader() -> None:
        for chunk in response.stream(1024, decode_content=True):
            received.append(chunk.decode())
            first_seen.set()

    thread = threading.Thread(target=reader)
    thread.start()
    assert first_seen.wait(5)
    append_log(api_client, namespace, "f", ["second", "third"])
    core.patch_namespaced_pod_status("f", namespace, {"status": {"phase": "Succeeded"}})
    thread.join(10)
    assert not thread.is_alive()
    assert "".join(received) == "first\nsecond\nthird\n"


def test_logs_belong_to_the_pod_instance(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("r", nodeName="node-1"))
    start_container(core, namespace, "r")
    append_log(api_client, namespace, "r", ["old life"])
    core.delete_namespaced_pod("r", namespace, grace_period_seconds=0)
    core.create_namespaced_pod(namespace, pod_manifest("r", nodeName="node-1"))
    start_container(core, namespace, "r")
    assert read_log(core, "r", namespace) == ""


def test_log_append_needs_a_real_pod_and_container(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    with pytest.raises(k8s.ApiException) as missing:
        append_log(api_client, namespace, "ghost", ["x"])
    assert missing.value.status == 404
    core.create_namespaced_pod(namespace, pod_manifest("p", nodeName="node-1"))
    with pytest.raises(k8s.ApiException) as wrong:
        append_log(api_client, namespace, "p", ["x"], container="nope")
    assert wrong.value.status == 400
