"""pods/binding, and pods/log as kube-apiserver serves it: checked here, proxied to the node's kubelet.

The log tests run one simulated kubelet (its own HTTPS server, advertised on its Node) beside
the session's API server, so every read crosses the same proxy a real cluster has.
"""

from __future__ import annotations

import functools
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.apiserver.errors import StatusError
from gang_sim.apiserver.kubelet_proxy import kubelet_endpoint, response_error
from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.controllers.kubelet.kubelet import Kubelet
from gang_sim.controllers.manager import ControllerManager
from tests.sim.apiserver.helpers import call, pod_manifest, status_of
from tests.waiting import eventually

LOG = "sim.airflow-gang.io/log"
DURATION = "sim.airflow-gang.io/duration"


@pytest.fixture(scope="module")
def node(apiserver: ApiServerHandle, api_client: k8s.ApiClient) -> Iterator[str]:
    """One simulated node with its kubelet; deleted afterwards (the API server outlives the module)."""
    name = f"logs-{uuid.uuid4().hex[:8]}"
    factory = functools.partial(Kubelet, node_name=name, capacity={}, period=0.05)
    core = k8s.CoreV1Api(api_client)
    with ControllerManager(apiserver.kubeconfig_path, [factory]):
        eventually(functools.partial(core.read_node, name))
        yield name
    core.delete_node(name)


def read_log(core: k8s.CoreV1Api, pod: str, namespace: str, **params: object) -> str:
    # kubernetes 36's generated client returns str(bytes) for text bodies; read the raw body instead.
    response = core.read_namespaced_pod_log(pod, namespace, _preload_content=False, **params)
    text: str = response.data.decode()
    return text


def scripted_pod(name: str, node: str, **annotations: str) -> dict[str, Any]:
    body = pod_manifest(name, nodeName=node, restartPolicy="Never")
    body["metadata"]["annotations"] = annotations
    return body


def phase(core: k8s.CoreV1Api, namespace: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, namespace).status.phase)


def refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


def test_logs_come_from_the_kubelet_with_tail_since_timestamps_and_limit(
    node: str, core: k8s.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(
        namespace, scripted_pod("p", node, **{LOG: "epoch 1\nepoch 2\nepoch 3", DURATION: "0"})
    )
    eventually(lambda: phase(core, namespace, "p") == "Succeeded")

    assert read_log(core, "p", namespace) == "epoch 1\nepoch 2\nepoch 3\n"
    assert read_log(core, "p", namespace, container="main") == "epoch 1\nepoch 2\nepoch 3\n"
    assert read_log(core, "p", namespace, tail_lines=2) == "epoch 2\nepoch 3\n"
    assert read_log(core, "p", namespace, tail_lines=0) == ""
    assert read_log(core, "p", namespace, since_seconds=60).count("\n") == 3
    stamped = read_log(core, "p", namespace, timestamps=True, tail_lines=1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z epoch 3\n", stamped)
    assert read_log(core, "p", namespace, limit_bytes=5) == "epoch"


def test_log_errors_match_upstream(node: str, core: k8s.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("two", nodeName=node)
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
    with pytest.raises(k8s.ApiException) as negative:
        read_log(core, "two", namespace, container="main", tail_lines=-1)
    assert (negative.value.status, status_of(negative.value)["message"]) == (
        422,
        'PodLogOptions "two" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
    )
    with pytest.raises(k8s.ApiException) as missing:
        read_log(core, "ghost", namespace)
    assert missing.value.status == 404
    core.create_namespaced_pod(namespace, pod_manifest("unscheduled"))
    assert read_log(core, "unscheduled", namespace) == ""


def test_the_kubelet_says_when_a_container_has_no_log(node: str, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, scripted_pod("typo", node, **{DURATION: "1s"}))
    eventually(lambda: core.read_namespaced_pod("typo", namespace).status.container_statuses)
    with pytest.raises(k8s.ApiException) as waiting:
        read_log(core, "typo", namespace)
    assert (waiting.value.status, status_of(waiting.value)["message"]) == (
        400,
        'container "main" in pod "typo" is waiting to start: CreateContainerConfigError',
    )
    core.create_namespaced_pod(namespace, scripted_pod("once", node, **{DURATION: "0"}))
    eventually(lambda: phase(core, namespace, "once") == "Succeeded")
    with pytest.raises(k8s.ApiException) as previous:
        read_log(core, "once", namespace, previous=True)
    assert status_of(previous.value)["message"] == (
        'previous terminated container "main" in pod "once" not found'
    )


def test_a_node_out_of_reach_is_a_500_naming_the_kubelet_url(core: k8s.CoreV1Api, namespace: str) -> None:
    port = refused_port()
    name = f"gone-{uuid.uuid4().hex[:8]}"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {}})
    try:
        core.patch_node_status(
            name,
            {
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                }
            },
        )
        core.create_namespaced_pod(namespace, pod_manifest("p", nodeName=name))
        with pytest.raises(k8s.ApiException) as refused:
            read_log(core, "p", namespace)
        status = status_of(refused.value)
        assert (refused.value.status, status.get("reason")) == (500, None)
        assert status["message"].startswith(
            f'Get "https://127.0.0.1:{port}/containerLogs/{namespace}/p/main": '
        )
    finally:
        core.delete_node(name)
    core.create_namespaced_pod(namespace, pod_manifest("q", nodeName="no-such-node"))
    with pytest.raises(k8s.ApiException) as no_node:
        read_log(core, "q", namespace)
    assert (no_node.value.status, status_of(no_node.value)["message"]) == (
        404,
        'nodes "no-such-node" not found',
    )


def test_follow_streams_until_the_container_ends(node: str, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(
        namespace, scripted_pod("f", node, **{LOG: "first\nsecond\nthird", DURATION: "0.9"})
    )
    eventually(lambda: read_log(core, "f", namespace).startswith("first"))
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
    assert phase(core, namespace, "f") == "Running"  # streamed as written, not at the end
    thread.join(10)
    assert not thread.is_alive()
    assert "".join(received) == "first\nsecond\nthird\n"
    # The stream ends with the container; the kubelet reports the phase after (as a real one does).
    eventually(lambda: phase(core, namespace, "f") == "Succeeded")


def test_logs_belong_to_the_pod_instance(node: str, core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, scripted_pod("r", node, **{LOG: "old life", DURATION: "0"}))
    eventually(lambda: phase(core, namespace, "r") == "Succeeded")
    core.delete_namespaced_pod("r", namespace, grace_period_seconds=0)
    eventually(lambda: not core.list_namespaced_pod(namespace, field_selector="metadata.name=r").items)
    core.create_namespaced_pod(namespace, scripted_pod("r", node, **{LOG: "new life", DURATION: "0"}))
    eventually(lambda: phase(core, namespace, "r") == "Succeeded")
    assert read_log(core, "r", namespace) == "new life\n"


def test_the_proxy_picks_the_address_kube_apiserver_prefers() -> None:
    addresses = [
        {"type": "ExternalIP", "address": "203.0.113.9"},
        {"type": "InternalIP", "address": "127.0.0.1"},
    ]
    node = {"status": {"addresses": addresses, "daemonEndpoints": {"kubeletEndpoint": {"Port": 4321}}}}
    assert kubelet_endpoint(node) == ("127.0.0.1", 4321)
    named = {"status": {"addresses": [{"type": "Hostname", "address": "n1"}, *addresses]}}
    assert kubelet_endpoint(named) == ("n1", 10250)  # a Hostname wins: why sim nodes advertise none
    with pytest.raises(StatusError, match=r"no preferred addresses found; known addresses: \[\]"):
        kubelet_endpoint({"status": {}})


def test_kubelet_answers_become_statuses_as_kube_apiserver_makes_them() -> None:
    assert response_error(400, "container is waiting", "p").to_status()["reason"] == "BadRequest"
    not_found = response_error(404, 'pod "p" does not exist\n', "p").to_status()
    assert not_found == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource ( pods/log p)",
        "reason": "NotFound",
        "details": {
            "name": "p",
            "kind": "pods/log",
            "causes": [{"reason": "UnexpectedServerResponse", "message": 'pod "p" does not exist\n'}],
        },
        "code": 404,
    }
    assert response_error(500, "boom", "p").to_status()["message"] == "Internal error occurred: boom"
