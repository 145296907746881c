"""Pod subresources that are not plain objects: ``binding`` and ``log``.

- ``POST .../pods/{name}/binding`` (and the legacy ``POST .../namespaces/{ns}/bindings``) is how
  schedulers assign a node: it sets ``spec.nodeName`` once (409 if already bound) and the
  ``PodScheduled`` condition, and answers with a ``Status`` of code 201, as upstream.
- ``GET .../pods/{name}/log`` with ``container``, ``follow``, ``previous``, ``tailLines``,
  ``sinceSeconds``, ``sinceTime``, ``timestamps``, ``limitBytes``: checked here as
  kube-apiserver checks them (the pod, which container, the options), then proxied to the
  kubelet of the pod's node (``kubelet_proxy.py``), which keeps the logs and has the last word
  (container not started yet, no previous instance). An unscheduled pod has an empty log.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from gang_sim.apiserver import objects
from gang_sim.apiserver.errors import (
    BadRequest,
    Cause,
    Conflict,
    Invalid,
    NotFound,
    forbidden,
    invalid,
    required,
)
from gang_sim.apiserver.json_copy import json_copy
from gang_sim.apiserver.kubelet_proxy import KubeletLogRequest, container_logs_url, node_or_404
from gang_sim.apiserver.params import int_param
from gang_sim.apiserver.state import ServerState

JsonDict = dict[str, Any]
PODS_KEY = "/pods"
NODES_KEY = "/nodes"
# What kube-apiserver passes on to the kubelet (booleans only when true).
_FLAGS = ("follow", "previous", "timestamps")
_NUMBERS = ("sinceSeconds", "tailLines", "limitBytes")


def _pod(state: ServerState, namespace: str, name: str) -> JsonDict:
    pod = state.store.get(PODS_KEY, namespace, name)
    if pod is None:
        raise NotFound("pods", name)
    return pod


def success(code: int) -> JsonDict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def bind_pod(state: ServerState, namespace: str, name: str, body: Any) -> JsonDict:
    binding = body if isinstance(body, dict) else {}
    bmeta = binding.get("metadata") or {}
    name = name or bmeta.get("name", "")
    if bmeta.get("name") and bmeta["name"] != name:
        raise BadRequest(
            f"the name of the object ({bmeta['name']}) does not match the name on the URL ({name})"
        )
    node = (binding.get("target") or {}).get("name")
    if not node:
        raise Invalid("Binding", name, [required("target.name")])
    info = state.registry.by_key(PODS_KEY)
    if info is None:  # pragma: no cover - pods are always registered
        raise NotFound("pods", name)
    with state.store.lock:
        pod = _pod(state, namespace, name)
        meta, spec = objects.meta(pod), pod.get("spec") or {}
        if bmeta.get("uid") and bmeta["uid"] != meta.get("uid"):
            raise Conflict(
                "pods/binding",
                name,
                f"Precondition failed: UID in precondition: {bmeta['uid']}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if objects.is_deleting(pod):
            raise Conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise Conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        bound = json_copy(pod)
        bound["spec"]["nodeName"] = node
        if bmeta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(bmeta["annotations"])
        status = bound.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": objects.rfc3339(objects.utc_now()),
            }
        )
        status["conditions"] = conditions
        state.store.commit("MODIFIED", info.key, bound, expected_rv=meta.get("resourceVersion"))
    return success(201)


def _container(pod: JsonDict, requested: str | None) -> str:
    spec = pod.get("spec") or {}
    name = objects.meta(pod)["name"]
    names = [c.get("name") for c in spec.get("containers") or []]
    init = [c.get("name") for c in spec.get("initContainers") or []]
    if requested:
        if requested not in names + init:
            raise BadRequest(f"container {requested} is not valid for pod {name}")
        return requested
    if len(names) == 1:
        return str(names[0])
    message = (
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, names))}]"
    )
    if init:
        message += f" or one of the init containers: [{' '.join(map(str, init))}]"
    raise BadRequest(message)


def _log_params(request: Request, pod: str) -> dict[str, str]:
    """The options, validated as ``ValidatePodLogOptions`` does, in the kubelet's query form."""
    query = request.query_params
    params = {name: "true" for name in _FLAGS if query.get(name, "").lower() in ("true", "1")}
    numbers = {name: int_param(request, name) for name in _NUMBERS}
    causes: list[Cause] = []
    if (tail := numbers["tailLines"]) is not None and tail < 0:
        causes.append(invalid("tailLines", tail, "must be greater than or equal to 0"))
    if (limit := numbers["limitBytes"]) is not None and limit < 1:
        causes.append(invalid("limitBytes", limit, "must be greater than 0"))
    since = numbers["sinceSeconds"]
    if since is not None and query.get("sinceTime"):
        causes.append(forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif since is not None and since < 1:
        causes.append(invalid("sinceSeconds", since, "must be greater than 0"))
    if causes:
        raise Invalid("PodLogOptions", pod, causes)
    params |= {name: str(value) for name, value in numbers.items() if value is not None}
    if query.get("sinceTime") and since is None:
        params["sinceTime"] = query["sinceTime"]
    return params


async def read_pod_log(request: Request, state: ServerState, namespace: str, name: str) -> Response:
    pod = _pod(state, namespace, name)
    container = _container(pod, request.query_params.get("container"))
    params = _log_params(request, name)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return Response(b"", media_type="text/plain")  # unscheduled: there is no kubelet to ask
    node = node_or_404(state.store.get(NODES_KEY, "", node_name), node_name)
    upstream = KubeletLogRequest(container_logs_url(node, namespace, name, container), params, name)
    await upstream.open()
    if "follow" not in params:
        return Response(await upstream.read(), media_type="text/plain")
    return StreamingResponse(upstream.relay(state.log_streams), media_type="text/plain")
