"""pytest plugin for DAG authors testing gang jobs (registered through the ``pytest11`` entry point).

The embedded-cluster fixtures ``gang_cluster`` and ``gang_kubeconfig`` arrive with the
simulator; until then the plugin only registers its marker so that ``-p airflow_gang.testing``
and ``--strict-markers`` runs already accept it.
"""

from __future__ import annotations

import pytest

GANG_CLUSTER_MARKER = "gang_cluster"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{GANG_CLUSTER_MARKER}(**options): configure the embedded cluster used by the gang_cluster fixture",
    )
