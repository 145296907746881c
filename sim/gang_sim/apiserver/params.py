"""Reading request parameters and bodies the way kube-apiserver does (query strings, DeleteOptions)."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from gang_sim import json_wire
from gang_sim.apiserver.errors import BadRequest
from gang_sim.apiserver.options import DeleteOptions, ListOptions, parse_propagation
from gang_sim.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("true", "1")


def int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise BadRequest(f'invalid value for {name}: "{value}"') from exc


def list_options(request: Request) -> ListOptions:
    query = request.query_params
    try:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"))
    except SelectorError as exc:
        raise BadRequest(str(exc)) from exc
    return ListOptions(
        labels,
        fields,
        int_param(request, "limit") or 0,
        query.get("continue", ""),
        query.get("resourceVersion", ""),
        query.get("resourceVersionMatch", ""),
    )


async def read_json(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json_wire.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the object provided is unrecognized: json parse error: {exc}") from exc


async def delete_options(request: Request) -> DeleteOptions:
    body = await read_json(request) or {}
    if not isinstance(body, dict):
        raise BadRequest("DeleteOptions must be an object")
    query = request.query_params
    policy = body.get("propagationPolicy") or query.get("propagationPolicy")
    orphan = body.get("orphanDependents", query.get("orphanDependents"))
    if policy is None and orphan is not None:
        policy = "Orphan" if str(orphan).lower() in ("true", "1") else "Background"
    grace = body.get("gracePeriodSeconds")
    preconditions = body.get("preconditions") or {}
    return DeleteOptions(
        propagation=parse_propagation(policy),
        grace_period=int(grace) if grace is not None else int_param(request, "gracePeriodSeconds"),
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
    )


def dry_run(request: Request) -> bool:
    return request.query_params.get("dryRun") == "All"
