"""Pod subresources that are not plain objects: ``binding`` and ``log``; plus the log side channel.

- ``POST .../pods/{name}/binding`` (and the legacy ``POST .../namespaces/{ns}/bindings``) is how
  schedulers assign a node: it sets ``spec.nodeName`` once (409 if already bound) and the
  ``PodScheduled`` condition, and answers with a ``Status`` of code 201, as upstream.
- ``GET .../pods/{name}/log`` with ``container``, ``follow``, ``tailLines``, ``sinceSeconds``,
  ``sinceTime``, ``timestamps``, ``limitBytes``: the errors are upstream's (no container
  named, unknown container, container not started yet); an unscheduled pod has an empty log.
- ``POST /sim/v1/namespaces/{ns}/pods/{name}/log?container=c`` is **simulator-only**: the
  simulator's kubelet (an ordinary HTTP client holding the same bearer token) appends log
  lines with it. The body is ``text/plain`` (one line per line) or JSON ``{"lines": [...]}``.
  Real clusters have no such endpoint; nothing outside the simulator's controllers uses it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from airflow_gang.sim.apiserver import objects
from airflow_gang.sim.apiserver.errors import BadRequest, Conflict, Invalid, NotFound, required
from airflow_gang.sim.apiserver.logs import LogLine, select
from airflow_gang.sim.apiserver.printing import parse_time
from airflow_gang.sim.apiserver.state import ServerState

JsonDict = dict[str, Any]
PODS_KEY = "/pods"
sim_router = APIRouter(prefix="/sim/v1")


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
        bound = copy.deepcopy(pod)
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


def _container_state(pod: JsonDict, container: str) -> JsonDict:
    status = pod.get("status") or {}
    for entry in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
        if entry.get("name") == container:
            state: JsonDict = entry.get("state") or {}
            return state
    return {}


def _finished(pod: JsonDict | None, pod_uid: str, container: str) -> bool:
    if pod is None or objects.uid(pod) != pod_uid:
        return True
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or (
        "terminated" in _container_state(pod, container)
    )


async def read_pod_log(request: Request, state: ServerState, namespace: str, name: str) -> Response:
    query = request.query_params
    pod = _pod(state, namespace, name)
    container = _container(pod, query.get("container"))
    if query.get("previous", "").lower() in ("true", "1"):
        raise BadRequest(f'previous terminated container "{container}" in pod "{name}" not found')
    if not (pod.get("spec") or {}).get("nodeName"):
        return Response(b"", media_type="text/plain")  # unscheduled: upstream has no kubelet to ask
    pod_uid = objects.uid(pod)
    container_state = _container_state(pod, container)
    if not state.logs.has_lines(pod_uid, container) and not (
        {"running", "terminated"} & set(container_state)
    ):
        reason = (container_state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise BadRequest(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    since = _since(query.get("sinceSeconds"), query.get("sinceTime"))
    tail = int(query["tailLines"]) if query.get("tailLines") else None
    timestamps = query.get("timestamps", "").lower() in ("true", "1")
    limit = int(query["limitBytes"]) if query.get("limitBytes") else None
    lines = select(state.logs.read(pod_uid, container), since, tail)
    if query.get("follow", "").lower() not in ("true", "1"):
        body = "".join(line.render(timestamps) for line in lines).encode()
        return Response(body[:limit] if limit else body, media_type="text/plain")
    return StreamingResponse(
        _follow(
            state,
            namespace=namespace,
            name=name,
            pod_uid=pod_uid,
            container=container,
            initial=lines,
            timestamps=timestamps,
            limit=limit,
        ),
        media_type="text/plain",
    )


def _since(seconds: str | None, moment: str | None) -> dt.datetime | None:
    if seconds:
        return objects.utc_now() - dt.timedelta(seconds=int(seconds))
    if moment:
        return parse_time(moment)
    return None


async def _follow(
    state: ServerState,
    *,
    namespace: str,
    name: str,
    pod_uid: str,
    container: str,
    initial: list[LogLine],
    timestamps: bool,
    limit: int | None,
) -> AsyncIterator[bytes]:
    """Stream ``initial``, then new lines as they are appended, until the container ends."""
    waiter = state.logs.subscribe(pod_uid, asyncio.get_running_loop())
    budget = limit if limit is not None else -1
    try:
        last = max((line.seq for line in state.logs.read(pod_uid, container)), default=0)
        batch = initial
        while True:
            if batch:
                chunk = "".join(line.render(timestamps) for line in batch).encode()
                if budget >= 0:
                    chunk, budget = chunk[:budget], max(0, budget - len(chunk))
                if chunk:
                    yield chunk
                if budget == 0:
                    return
            finished = _finished(state.store.get(PODS_KEY, namespace, name), pod_uid, container)
            waiter.event.clear()
            batch = state.logs.read(pod_uid, container, last)
            if batch:
                last = batch[-1].seq
            elif finished:
                return
            else:
                await waiter.event.wait()
    finally:
        state.logs.unsubscribe(pod_uid, waiter)


def get_state(request: Request) -> ServerState:
    sim: ServerState = request.app.state.sim
    return sim


@sim_router.post("/namespaces/{namespace}/pods/{name}/log")
async def append_pod_log(
    namespace: str, name: str, request: Request, state: Annotated[ServerState, Depends(get_state)]
) -> Response:
    """Simulator-only: append lines to a container's log (see the module docstring)."""
    pod = _pod(state, namespace, name)
    container = _container(pod, request.query_params.get("container"))
    raw = await request.body()
    if "json" in request.headers.get("content-type", ""):
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise BadRequest(f"invalid JSON: {exc}") from exc
        lines = body.get("lines") if isinstance(body, dict) else body
        if isinstance(lines, str):
            lines = lines.splitlines()
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise BadRequest('body must be {"lines": ["...", ...]}')
    else:
        lines = raw.decode("utf-8", errors="replace").splitlines()
    state.logs.append(objects.uid(pod), container, lines)
    return Response(json.dumps(success(201)), status_code=201, media_type="application/json")
