"""Hooks and triggers whose requests carry a User-Agent of their own, so the embedded cluster's API
server counts each benchmark waiter's requests apart (``/sim/v1/metrics``, `sim_process.sim_metrics`).
"""

from __future__ import annotations

from typing import Any

import kubernetes_asyncio.client as aclient
from kubernetes import client as k8s

from airflow_gang.hooks.gang import AsyncGangJobHook, GangJobHook
from airflow_gang.triggers.gang import GangJobTrigger


def tag(hook: AsyncGangJobHook, user_agent: str) -> AsyncGangJobHook:
    """Make the pooled ``ApiClient`` of ``hook`` send ``user_agent`` (the hook has no option for it)."""
    pool = hook._clients
    pooled_client = pool.client

    async def client() -> aclient.ApiClient:
        api = await pooled_client()
        api.user_agent = user_agent
        return api

    pool.client = client  # type: ignore[method-assign]
    return hook


class TaggedGangJobTrigger(GangJobTrigger):
    """`GangJobTrigger` unchanged, except that its hook's clients carry a User-Agent of their own."""

    def __init__(self, *args: Any, user_agent: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user_agent = user_agent

    async def hook(self) -> AsyncGangJobHook:
        return tag(await super().hook(), self.user_agent)


class TaggedHook(GangJobHook):
    """`GangJobHook` whose requests carry a User-Agent of their own."""

    def __init__(self, *args: Any, user_agent: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user_agent = user_agent

    def get_conn(self) -> k8s.ApiClient:
        api = super().get_conn()
        api.user_agent = self.user_agent
        return api
