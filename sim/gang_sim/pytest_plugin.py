"""pytest plugin for DAG authors testing gang jobs (registered through the ``pytest11`` entry point).

Fixtures:

- ``gang_cluster``: a running `SimCluster` for the test, torn down afterwards. Configure it with
  the marker ``@pytest.mark.gang_cluster(nodes=2, gpus_per_node=4, queues={"research": None})``
  (any `SimCluster` keyword). Volcano's preempt and reclaim are on with a scheduler
  configuration: ``@pytest.mark.gang_cluster(scheduler_conf={"actions": "enqueue, allocate,
  preempt, reclaim, backfill", "tiers": [...]})`` (or YAML text, or a file path).
- ``gang_kubeconfig``: the path of that cluster's kubeconfig, e.g. for
  ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` or ``kubernetes.config.load_kube_config``.
- ``gang_cluster_factory``: start extra clusters with explicit options inside one test.

The simulator is imported only when a fixture is used, so the plugin costs nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gang_sim.cluster import SimCluster

GANG_CLUSTER_MARKER = "gang_cluster"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{GANG_CLUSTER_MARKER}(**options): SimCluster keyword arguments for the gang_cluster fixture",
    )


@pytest.fixture
def gang_cluster_factory() -> Iterator[Callable[..., SimCluster]]:
    """Start `SimCluster`s with the given keywords; all are stopped at the end of the test."""
    from gang_sim.cluster import SimCluster

    started: list[SimCluster] = []

    def start(**options: Any) -> SimCluster:
        cluster = SimCluster(**options).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


@pytest.fixture
def gang_cluster(
    request: pytest.FixtureRequest, gang_cluster_factory: Callable[..., SimCluster]
) -> SimCluster:
    """A running embedded cluster, configured by the ``gang_cluster`` marker if present."""
    marker = request.node.get_closest_marker(GANG_CLUSTER_MARKER)
    options = dict(marker.kwargs) if marker else {}
    return gang_cluster_factory(**options)


@pytest.fixture
def gang_kubeconfig(gang_cluster: SimCluster) -> str:
    """Path of the ``gang_cluster`` kubeconfig."""
    return gang_cluster.kubeconfig_path
