"""Discovery, health and authentication, as clients probe them before anything else."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.dynamic import DynamicClient

from gang_sim.apiserver.server import ApiServerHandle
from tests.sim.apiserver.helpers import call, status_of


def raw_get(server: ApiServerHandle, path: str, token: str | None) -> tuple[int, Any]:
    """A plain HTTPS GET trusting the server's CA: what a process without the kubeconfig can do."""
    context = ssl.create_default_context(cadata=(server.ca_pem or b"").decode())
    request = urllib.request.Request(server.url + path)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode()


def test_version_and_core_discovery(api_client: k8s.ApiClient) -> None:
    version = k8s.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "36")
    core = k8s.CoreApi(api_client).get_api_versions()
    assert core.versions == ["v1"]
    resources = {r.name: r for r in k8s.CoreV1Api(api_client).get_api_resources().resources}
    assert {
        "namespaces",
        "nodes",
        "pods",
        "pods/status",
        "pods/binding",
        "pods/log",
        "services",
        "events",
    } <= set(resources)
    assert resources["pods"].namespaced
    assert not resources["nodes"].namespaced
    assert set(resources["pods"].verbs) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert resources["pods"].short_names == ["po"]


def test_group_discovery_lists_every_served_group(api_client: k8s.ApiClient) -> None:
    groups = {g.name: g for g in k8s.ApisApi(api_client).get_api_versions().groups}
    assert set(groups) == {
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "policy",
        "kubeflow.org",
        "scheduling.volcano.sh",
        "batch.volcano.sh",
        "batch",
        "jobset.x-k8s.io",
        "trainer.kubeflow.org",
    }
    assert groups["trainer.kubeflow.org"].preferred_version.group_version == "trainer.kubeflow.org/v1alpha1"
    assert groups["scheduling.volcano.sh"].preferred_version.group_version == "scheduling.volcano.sh/v1beta1"


@pytest.mark.parametrize(
    ("group_version", "expected"),
    [
        ("kubeflow.org/v1", {"pytorchjobs": True, "pytorchjobs/status": True}),
        ("scheduling.volcano.sh/v1beta1", {"podgroups": True, "queues": False, "queues/status": False}),
        ("scheduling.k8s.io/v1", {"priorityclasses": False}),
        ("batch.volcano.sh/v1alpha1", {"jobs": True, "jobs/status": True}),
    ],
    ids=["pytorchjobs", "volcano-scheduling", "priorityclasses", "volcano-batch"],
)
def test_group_version_resources_and_scope(
    api_client: k8s.ApiClient, group_version: str, expected: dict[str, bool]
) -> None:
    body = call(api_client, "GET", f"/apis/{group_version}")
    served = {r["name"]: r["namespaced"] for r in body["resources"]}
    assert {name: served.get(name) for name in expected} == expected
    assert "podgroups/status" not in served  # PodGroup has no status subresource upstream


def test_dynamic_client_finds_kinds_and_lists(api_client: k8s.ApiClient, namespace: str) -> None:
    dynamic = DynamicClient(api_client)
    jobs = dynamic.resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob")
    queues = dynamic.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="Queue")
    assert jobs.namespaced
    assert not queues.namespaced
    assert jobs.subresources["status"].kind == "PyTorchJob"
    assert dynamic.resources.get(api_version="v1", kind="Pod").get(namespace=namespace).items == []


def test_unknown_group_is_a_404_status(api_client: k8s.ApiClient) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "GET", "/apis/nope.example.com/v1/things")
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (404, "NotFound")
    assert status["message"] == "the server could not find the requested resource"


def test_no_token_gets_401_unauthorized_status(apiserver: ApiServerHandle) -> None:
    status, body = raw_get(apiserver, "/api/v1/namespaces", token=None)
    assert status == 401
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_wrong_token_gets_401_even_on_public_paths(apiserver: ApiServerHandle) -> None:
    assert raw_get(apiserver, "/api/v1/namespaces", token="not-the-token")[0] == 401
    assert raw_get(apiserver, "/healthz", token="not-the-token")[0] == 401


def test_health_and_version_are_public_and_token_works(apiserver: ApiServerHandle) -> None:
    assert raw_get(apiserver, "/healthz", token=None) == (200, "ok")
    assert raw_get(apiserver, "/readyz", token=None) == (200, "ok")
    assert raw_get(apiserver, "/version", token=None)[1]["gitVersion"] == "v1.36.2"
    status, body = raw_get(apiserver, "/api/v1/namespaces/default", token=apiserver.token)
    assert (status, body["metadata"]["name"]) == (200, "default")


def test_kubeconfig_carries_the_token_and_ca(apiserver: ApiServerHandle) -> None:
    import yaml

    with open(apiserver.kubeconfig_path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    assert config["users"][0]["user"]["token"] == apiserver.token
    assert config["clusters"][0]["cluster"]["server"] == apiserver.url
    assert apiserver.url.startswith("https://127.0.0.1:")
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
