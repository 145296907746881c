"""HTTP routes: discovery, and one generic handler per HTTP method for every resource.

``/api/v1/...`` and ``/apis/{group}/{version}/...`` resolve, through the registry, to a
:class:`Target` (resource, namespace, name, subresource) that 404s on unknown kinds
(`parse_target`); the handlers (`RESOURCE_HANDLERS`, served by ``resource_dispatch.py``) then
call the verbs in ``operations.py``. Nothing here knows a
particular kind except the pod subresources that are not plain objects (``binding`` and
``log``, in ``subresources.py``; ``eviction``, in ``eviction.py``); custom resources may also
have a ``scale`` (``scale.py``).

A subresource a kind does not have is a 404: for a custom resource a ``NotFound`` naming the
object (``details.name``, ``group``, ``kind``), as apiextensions-apiserver answers whether or
not the object exists; for a built-in kind the generic "could not find the requested resource".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from gang_sim import json_wire
from gang_sim.apiserver import discovery, printing
from gang_sim.apiserver.errors import MethodNotAllowed, NotFound, ResourceNotFound, StatusError
from gang_sim.apiserver.eviction import evict_pod
from gang_sim.apiserver.params import delete_options, dry_run, flag, list_options, read_json
from gang_sim.apiserver.registry import Registry, ResourceInfo
from gang_sim.apiserver.scale import ScaleEndpoint
from gang_sim.apiserver.state import ServerState
from gang_sim.apiserver.subresources import bind_pod, read_pod_log
from gang_sim.apiserver.watch_stream import watch_response

JsonDict = dict[str, Any]
log = logging.getLogger(__name__)
router = APIRouter()


def json_response(body: Any, status_code: int = 200) -> Response:
    return Response(json_wire.dumps(body), status_code=status_code, media_type="application/json")


# Dependencies are coroutines on purpose: FastAPI runs a plain ``def`` dependency in its thread
# pool, a thread hand-off on every request that cost more than the request itself.
async def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.sim
    return state


StateDep = Annotated[ServerState, Depends(get_state)]


@dataclass(frozen=True)
class Target:
    """What a resource URL names. ``namespace`` None means all namespaces."""

    info: ResourceInfo | None  # None only for the legacy core ``bindings`` collection
    namespace: str | None
    name: str = ""
    subresource: str = ""

    @property
    def resource(self) -> ResourceInfo:
        if self.info is None:
            raise MethodNotAllowed()
        return self.info


def parse_target(registry: Registry, group: str, version: str, rest: str) -> Target:
    parts = [p for p in rest.split("/") if p]
    namespace: str | None = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        candidate = registry.lookup(group, version, parts[2])
        if (candidate is not None and candidate.namespaced) or (not group and parts[2] == "bindings"):
            namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise ResourceNotFound()
    if not group and parts[0] == "bindings" and namespace is not None and len(parts) == 1:
        return Target(None, namespace)
    info = registry.lookup(group, version, parts[0])
    if info is None or (info.namespaced and namespace is None and len(parts) > 1):
        raise ResourceNotFound()
    if not info.namespaced:
        namespace = ""
    name = parts[1] if len(parts) > 1 else ""
    sub = parts[2] if len(parts) > 2 else ""
    if sub and sub not in info.subresources:
        raise NotFound(info.resource, name) if info.custom else ResourceNotFound()
    return Target(info, namespace, name, sub)


def scale_endpoint(state: ServerState, target: Target) -> ScaleEndpoint:
    return ScaleEndpoint(state.api, target.resource, target.namespace or "", target.name)


# --- responses ----------------------------------------------------------------------------------


def wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def object_response(request: Request, target: Target, obj: JsonDict, status_code: int = 200) -> Response:
    if wants_table(request):
        table = printing.to_table(
            target.resource,
            [obj],
            {"resourceVersion": obj["metadata"]["resourceVersion"]},
            request.query_params.get("includeObject", "Metadata"),
        )
        return json_response(table, status_code)
    return json_response(obj, status_code)


def list_response(request: Request, info: ResourceInfo, items: list[JsonDict], meta: JsonDict) -> Response:
    if wants_table(request):
        return json_response(
            printing.to_table(info, items, meta, request.query_params.get("includeObject", "Metadata"))
        )
    if not info.custom:
        # Built-in lists carry kind and apiVersion once, on the list, as kube-apiserver serves them.
        items = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]
    return json_response(
        {"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta, "items": items}
    )


# --- discovery ----------------------------------------------------------------------------------


@router.get("/version")
async def version() -> Response:
    return json_response(discovery.SERVER_VERSION)


@router.get("/api")
@router.get("/api/")
async def core_versions(state: StateDep) -> Response:
    return json_response(discovery.api_versions(state.config.server_address))


@router.get("/apis")
@router.get("/apis/")
async def groups(state: StateDep) -> Response:
    return json_response(discovery.api_group_list(state.registry))


@router.get("/apis/{group}")
async def group_info(group: str, state: StateDep) -> Response:
    body = discovery.api_group(state.registry, group)
    if body is None:
        raise ResourceNotFound()
    return json_response(body)


@router.get("/api/v1")
@router.get("/api/v1/")
@router.get("/apis/{group}/{version}")
@router.get("/apis/{group}/{version}/")
async def resources(state: StateDep, group: str = "", version: str = "v1") -> Response:
    body = discovery.resource_list(state.registry, group, version)
    if body is None:
        raise ResourceNotFound()
    return json_response(body)


@router.get("/openapi/v2")
async def openapi_v2(request: Request, state: StateDep) -> Response:
    # kubectl asks for protobuf; an empty message is a valid (empty) OpenAPI document, which
    # makes kubectl skip client-side schema validation instead of failing.
    if "protobuf" in request.headers.get("accept", ""):
        return Response(b"", media_type="application/octet-stream")
    return json_response(discovery.openapi_v2(state.registry))


@router.get("/healthz")
@router.get("/readyz")
@router.get("/livez")
async def health() -> Response:
    return Response("ok", media_type="text/plain")


# --- resources ----------------------------------------------------------------------------------


async def get(request: Request, target: Target, state: ServerState) -> Response:
    info = target.resource
    if target.subresource == "log":
        return await read_pod_log(request, state, target.namespace or "", target.name)
    if target.subresource == "scale":
        return json_response(scale_endpoint(state, target).get())
    if target.subresource not in ("", "status"):
        raise MethodNotAllowed()
    if target.name:
        return object_response(request, target, state.api.get(info, target.namespace or "", target.name))
    options = list_options(request)
    if flag(request, "watch"):
        return watch_response(request, state, info, target.namespace, options)
    items, meta = state.api.list_objects(info, target.namespace, options)
    return list_response(request, info, items, meta)


async def post(request: Request, target: Target, state: ServerState) -> Response:
    body = await read_json(request)
    if target.info is None or target.subresource == "binding":
        return json_response(bind_pod(state, target.namespace or "", target.name, body), 201)
    if target.subresource == "eviction":
        evicted = evict_pod(state, target.namespace or "", target.name, body, dry_run=dry_run(request))
        return json_response(evicted, 201)
    if target.subresource:
        raise MethodNotAllowed()
    if target.name or target.namespace is None:
        raise MethodNotAllowed()
    created = state.api.create(target.info, target.namespace, body, dry_run=dry_run(request), owned=True)
    return object_response(request, target, created, 201)


async def put(request: Request, target: Target, state: ServerState) -> Response:
    if not target.name or target.subresource not in ("", "status", "scale"):
        raise MethodNotAllowed()
    body = await read_json(request)
    if target.subresource == "scale":
        return json_response(scale_endpoint(state, target).update(body, dry_run=dry_run(request)))
    updated = state.api.update(
        target.resource,
        target.namespace or "",
        target.name,
        body,
        subresource=target.subresource,
        dry_run=dry_run(request),
        owned=True,
    )
    return object_response(request, target, updated)


async def patch(request: Request, target: Target, state: ServerState) -> Response:
    if not target.name or target.subresource not in ("", "status", "scale"):
        raise MethodNotAllowed()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if target.subresource == "scale":
        endpoint = scale_endpoint(state, target)
        return json_response(endpoint.patch(content_type, await request.body(), dry_run=dry_run(request)))
    patched = state.api.patch(
        target.resource,
        target.namespace or "",
        target.name,
        content_type,
        await request.body(),
        subresource=target.subresource,
        dry_run=dry_run(request),
    )
    return object_response(request, target, patched)


async def delete(request: Request, target: Target, state: ServerState) -> Response:
    info = target.resource
    if target.subresource:
        raise MethodNotAllowed()
    options = await delete_options(request)
    if target.name:
        deleted = state.api.delete(
            info, target.namespace or "", target.name, options, dry_run=dry_run(request)
        )
        return json_response(deleted)
    items, meta = state.api.delete_collection(info, target.namespace, list_options(request), options)
    return list_response(request, info, items, meta)


ResourceHandler = Callable[[Request, Target, ServerState], Awaitable[Response]]

# Served by `resource_dispatch.ResourceDispatch`, not by routes of the router (see there why).
RESOURCE_HANDLERS: dict[str, ResourceHandler] = {
    "GET": get,
    "POST": post,
    "PUT": put,
    "PATCH": patch,
    "DELETE": delete,
}


def status_response(error: StatusError) -> Response:
    response = json_response(error.to_status(), error.code)
    # As kube-apiserver's writer: a Status that suggests a delay says so in the header too.
    retry_after = (error.details or {}).get("retryAfterSeconds")
    if retry_after:
        response.headers["Retry-After"] = str(retry_after)
    return response


def internal_error_response(request: Request, error: Exception) -> Response:
    """A 500 ``InternalError`` Status for an exception no handler expected; logged with its trace."""
    log.exception("internal error serving %s %s", request.method, request.url.path)
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {error}",
        "reason": "InternalError",
        "details": {"causes": [{"message": str(error)}]},
        "code": 500,
    }
    return json_response(body, 500)
