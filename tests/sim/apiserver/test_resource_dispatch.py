"""Resource URLs reach their handlers directly (``resource_dispatch.py``), answering as the
router did: discovery stays with the router, unknown verbs are 405, surprises are 500 Status."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from gang_sim.apiserver import routes
from gang_sim.apiserver.resource_dispatch import resource_url
from gang_sim.apiserver.routes import Target
from gang_sim.apiserver.state import ServerState
from tests.sim.apiserver.helpers import call, pod_manifest, status_of


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/namespaces/ns/pods/p", ("", "v1", "namespaces/ns/pods/p")),
        ("/api/v1/nodes", ("", "v1", "nodes")),
        (
            "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs",
            ("kubeflow.org", "v1", "namespaces/ns/pytorchjobs"),
        ),
        ("/api/v1", None),  # discovery
        ("/api/v1/", None),
        ("/apis/kubeflow.org/v1", None),
        ("/apis/kubeflow.org/v1/", None),
        ("/apis/kubeflow.org", None),
        ("/version", None),
        ("/sim/v1/metrics", None),
    ],
)
def test_only_resource_urls_take_the_direct_path(path: str, expected: tuple[str, str, str] | None) -> None:
    assert resource_url(path) == expected


def test_discovery_still_answers_beside_the_resources(api_client: k8s.ApiClient) -> None:
    assert call(api_client, "GET", "/api/v1")["kind"] == "APIResourceList"
    assert call(api_client, "GET", "/apis/kubeflow.org/v1/")["groupVersion"] == "kubeflow.org/v1"


def test_a_verb_no_resource_takes_is_a_405_status(api_client: k8s.ApiClient, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "OPTIONS", f"/api/v1/namespaces/{namespace}/pods")
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (405, "MethodNotAllowed")


def test_head_is_answered_as_get_without_a_body(api_client: k8s.ApiClient, namespace: str) -> None:
    k8s.CoreV1Api(api_client).create_namespaced_pod(namespace, pod_manifest("h"))
    response = api_client.call_api(
        f"/api/v1/namespaces/{namespace}/pods/h",
        "HEAD",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    assert response.status == 200
    assert response.data == b""


def test_an_unexpected_error_in_a_handler_is_a_500_internal_error_status(
    api_client: k8s.ApiClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(request: object, target: Target, state: ServerState) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(routes.RESOURCE_HANDLERS, "GET", broken)
    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods")
    status = status_of(caught.value)
    assert (status["code"], status["reason"]) == (500, "InternalError")
    assert status["message"] == "Internal error occurred: disk on fire"
