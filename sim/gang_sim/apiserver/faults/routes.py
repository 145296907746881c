"""Simulator-only ``/sim/v1/faults``: read, replace and clear the active fault spec over HTTP.

- ``POST /sim/v1/faults`` (body: the spec as JSON) replaces the active spec; its ``start``/``at``
  times count from this request. A spec that does not validate gets 422 ``Invalid`` naming
  the field; a body that is not JSON gets 400.
- ``GET /sim/v1/faults``: the active spec (``null`` if none) and the counters.
- ``DELETE /sim/v1/faults``: no more faults.

Every reply is ``{"kind": "FaultInjection", "apiVersion": "sim.airflow-gang.io/v1", "spec":
{...} | null, "faults": {"error_503": 0, ...}}``. Same bearer token as the rest of the API.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

from gang_sim.apiserver.errors import BadRequest, StatusError
from gang_sim.apiserver.faults.injector import FaultInjector
from gang_sim.faults import FaultSpecError, parse_fault_spec

FAULTS_PATH = "/sim/v1/faults"
faults_router = APIRouter()


class InvalidFaultSpec(StatusError):
    code = 422
    reason = "Invalid"


def _injector(request: Request) -> FaultInjector:
    injector: FaultInjector = request.app.state.sim.faults
    return injector


def _reply(injector: FaultInjector) -> Response:
    return Response(json.dumps(injector.to_json()), media_type="application/json")


@faults_router.get(FAULTS_PATH)
async def read_faults(request: Request) -> Response:
    """The active spec and the counters of injected faults."""
    return _reply(_injector(request))


@faults_router.post(FAULTS_PATH)
async def replace_faults(request: Request) -> Response:
    """Replace the active spec; its clock starts now."""
    raw = await request.body()
    try:
        data = json.loads(raw or b"{}")
    except ValueError as error:
        raise BadRequest(f"the fault spec is not valid JSON: {error}") from error
    try:
        spec = parse_fault_spec(data)
    except FaultSpecError as error:
        raise InvalidFaultSpec(str(error)) from error
    injector = _injector(request)
    injector.apply(spec)
    return _reply(injector)


@faults_router.delete(FAULTS_PATH)
async def clear_faults(request: Request) -> Response:
    """Stop injecting faults; an outage or node failure in progress ends."""
    injector = _injector(request)
    await asyncio.to_thread(injector.clear)  # it waits for the clock thread: not on this loop
    return _reply(injector)
