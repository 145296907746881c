"""Hooks: the only place the provider talks to the Kubernetes API (sync and async)."""

from __future__ import annotations

from airflow_gang.hooks.gang import REQUIRED_PERMISSIONS, AsyncGangJobHook, GangJobHook

__all__ = ["REQUIRED_PERMISSIONS", "AsyncGangJobHook", "GangJobHook"]
