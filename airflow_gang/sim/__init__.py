"""Embedded Kubernetes cluster simulator: an API server plus controllers that are API clients.

The simulator never imports the provider (hooks, operators, spec); the provider never imports
the simulator. Tests and the CLI join the two. ``from airflow_gang.sim import SimCluster``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_gang.sim.cluster import SimCluster

__all__ = ["SimCluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one controller does not start importing the API server.
    if name == "SimCluster":
        from airflow_gang.sim.cluster import SimCluster

        return SimCluster
    raise AttributeError(name)
