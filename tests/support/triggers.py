"""`GangJobTrigger` run in this process against the embedded cluster: its first event, and the
requests its asynchronous client made as the API server counted them."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from kubernetes import client as k8s

from airflow_gang.hooks.client_pool import USER_AGENT
from airflow_gang.triggers.gang import GangJobTrigger
from tests.sim.apiserver.helpers import call

EVENT_TIMEOUT = 60.0


async def first_event(trigger: GangJobTrigger, timeout: float = EVENT_TIMEOUT) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(first(), timeout)


def provider_requests(api: k8s.ApiClient) -> Counter[tuple[str, str]]:
    """Requests the API server counted from the provider's async client, by (verb, resource)."""
    metrics = call(api, "GET", "/sim/v1/metrics")
    counts: Counter[tuple[str, str]] = Counter()
    for entry in metrics["requests"]:
        if entry["userAgent"] == USER_AGENT:
            counts[entry["verb"], entry["resource"]] += entry["count"]
    return counts
