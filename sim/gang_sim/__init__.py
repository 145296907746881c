"""Embedded Kubernetes cluster simulator: an API server plus controllers that are API clients.

Its own distribution (``airflow-gang-sim``, in ``sim/`` of the airflow-gang repository): the
provider never imports it, and it never imports the provider; tests, the ``airflow-gang sim``
command (registered through the ``airflow_gang.cli`` entry point) and the pytest plugin
(`gang_sim.pytest_plugin`) join the two. ``from gang_sim import SimCluster``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gang_sim.version import __version__

if TYPE_CHECKING:
    from gang_sim.cluster import SimCluster

__all__ = ["SimCluster", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one controller does not start importing the API server.
    if name == "SimCluster":
        from gang_sim.cluster import SimCluster

        return SimCluster
    raise AttributeError(name)
