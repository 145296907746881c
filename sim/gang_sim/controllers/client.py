"""A thin asynchronous REST client over the official ``kubernetes_asyncio`` ApiClient.

Controllers speak plain JSON dicts for every kind (built-in or custom) through one code path.
The official client loads the kubeconfig and owns the connection: its configuration gives the
host, the bearer token (through its refresh hook, as ``call_api`` asks for it) and the proxy, and
its aiohttp session carries the TLS context and client certificate. Requests go out on that
session directly rather than through ``ApiClient.call_api``, whose generic parameter, auth and
body handling took about a seventh of a controller process's CPU for documents that are plain
JSON already; bodies go out as msgspec-encoded bytes and responses are read raw, so no model
round-trip slows a scheduler binding thousands of pods. Errors become `ApiError` carrying the
server's ``Status``. Every request says who sent it with ``User-Agent:
sim-controller-manager/<version>`` (`CONTROLLERS_USER_AGENT`), so the API
server's metrics tell the controllers' load apart and its fault injection spares them by default.

The official client's aiohttp session is made with ``trust_env=True``, which re-reads the proxy
variables and ``~/.netrc`` in a worker thread on *every* request: a sixth of the simulator's
CPU in a scheduling burst. `from_kubeconfig` resolves the proxy from the environment once, the
way that lookup would, and turns the per-request lookup off.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from gang_sim import json_wire
from gang_sim.controllers.kinds import PODS, Kind
from gang_sim.conventions import CONTROLLERS_USER_AGENT

JsonDict = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    """A non-2xx answer; ``status`` is the HTTP code, ``reason`` the Status reason."""

    def __init__(self, status: int, body: JsonDict | None, method: str, path: str) -> None:
        self.status = status
        self.body = body or {}
        self.reason = str(self.body.get("reason", ""))
        message = self.body.get("message") or f"HTTP {status}"
        super().__init__(f"{method} {path}: {status} {self.reason}: {message}")


def environment_proxy(url: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name for ``url``, unless ``NO_PROXY`` excludes it."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme or "https")


class KubeClient:
    """JSON-in, JSON-out access to one API server."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._api = api_client
        self._api.user_agent = CONTROLLERS_USER_AGENT

    @classmethod
    async def from_kubeconfig(cls, path: str, context: str | None = None) -> KubeClient:
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration
        )
        if configuration.proxy is None:
            configuration.proxy = environment_proxy(configuration.host or "")
        api_client = k8s.ApiClient(configuration)
        api_client.rest_client.pool_manager._trust_env = False  # see the module docstring
        return cls(api_client)

    async def close(self) -> None:
        await self._api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
    ) -> JsonDict:
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            raw = await response.read()
        finally:
            response.release()
        payload = json_wire.loads(raw) if raw else {}
        if not 200 <= response.status <= 299:
            raise ApiError(response.status, payload if isinstance(payload, dict) else None, method, path)
        return payload if isinstance(payload, dict) else {"value": payload}

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> aiohttp.ClientResponse:
        configuration = self._api.configuration
        rest = self._api.rest_client
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": CONTROLLERS_USER_AGENT,
        }
        token = await configuration.get_api_key_with_prefix("BearerToken")  # runs any refresh hook
        if token:
            headers["Authorization"] = token
        url = f"{configuration.host}{path}"
        params = [(key, str(value)) for key, value in (query or {}).items() if value is not None]
        if params:
            url = f"{url}?{urlencode(params)}"
        options: dict[str, Any] = {}
        if rest.proxy:
            options["proxy"] = rest.proxy
        if rest.proxy_headers:
            options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            data=None if body is None else json_wire.dumps(body),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            **options,
        )
        return response

    # --- verbs --------------------------------------------------------------------------------

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> JsonDict:
        return await self.request("GET", kind.path(namespace, name))

    async def list_objects(self, kind: Kind, namespace: str | None = None, **query: Any) -> JsonDict:
        return await self.request("GET", kind.path(namespace), query=query)

    async def create(self, kind: Kind, body: JsonDict, namespace: str | None = None) -> JsonDict:
        return await self.request("POST", kind.path(namespace), body=body)

    async def replace(self, kind: Kind, body: JsonDict, subresource: str | None = None) -> JsonDict:
        metadata = body["metadata"]
        path = kind.path(metadata.get("namespace"), metadata["name"], subresource)
        return await self.request("PUT", path, body=body)

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: JsonDict,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> JsonDict:
        return await self.request(
            "PATCH", kind.path(namespace, name, subresource), body=patch, content_type=MERGE_PATCH
        )

    async def delete(
        self, kind: Kind, name: str, namespace: str | None = None, propagation: str = "Background"
    ) -> JsonDict:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        return await self.request("DELETE", kind.path(namespace, name), body=body)

    async def bind(self, namespace: str, pod: str, node: str) -> None:
        """What a scheduler does: POST a ``Binding`` to the pod's ``binding`` subresource."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self.request("POST", PODS.path(namespace, pod, "binding"), body=binding)

    async def watch(
        self, kind: Kind, resource_version: str, timeout_seconds: int = 300, namespace: str | None = None
    ) -> AsyncIterator[JsonDict]:
        """Yield watch events (``{"type", "object"}``) after ``resource_version``.

        Ends when the server closes the stream; an ``ERROR`` event is yielded as is (410 Gone
        means: list again).
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true",
        }
        response = await self._send(
            "GET",
            kind.path(namespace),
            query=query,
            body=None,
            content_type="application/json",
            timeout=timeout_seconds + 30,
        )
        try:
            if not 200 <= response.status <= 299:
                raw = await response.read()
                raise ApiError(
                    response.status, json_wire.loads(raw) if raw else None, "WATCH", kind.path(namespace)
                )
            while True:
                line = await response.content.readline()
                if not line:
                    return
                if line.strip():
                    yield json_wire.loads(line)
        except asyncio.CancelledError:
            raise
        finally:
            response.release()
