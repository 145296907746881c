"""End-to-end fixtures: Airflow's metadata DB, an embedded cluster as the `kubernetes_default`
connection, DAG files written into the DAGs folder and run with ``dag.test()``.

Airflow 3.3's ``dag.test()`` syncs the DAG to the metadata DB, so every DAG lives in a real file
in ``[core] dags_folder`` (set per session by tests/conftest.py). After each test, the cluster
must hold no PyTorchJob, PodGroup or pod: nothing is ever left behind.

Helpers live in tests/support.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.metadata import migrate_db
from tests.support.cluster import NOTHING, leftovers
from tests.waiting import eventually

DAGS = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


@pytest.fixture(scope="session")
def airflow_db() -> None:
    migrate_db()


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """One pool of 4 GPUs (2 nodes x 2) for a test module; fast Volcano sessions."""
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, queues={"research": None}) as running:
        yield running


@pytest.fixture
def kube_connection(cluster: SimCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point Airflow's `kubernetes_default` connection at the embedded cluster."""
    value = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": cluster.kubeconfig_path}})
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", value)
    return cluster.kubeconfig_path


@pytest.fixture
def api(cluster: SimCluster) -> Iterator[k8s.ApiClient]:
    client = cluster.api_client()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every end-to-end test ends with an empty cluster unless it keeps its job on purpose."""
    if "cluster" not in request.fixturenames or request.node.get_closest_marker("keeps_job"):
        yield
        return
    cluster: SimCluster = request.getfixturevalue("cluster")
    yield
    with cluster.api_client() as api:
        empty = NOTHING
        eventually(
            lambda: leftovers(api) == empty, timeout=20, message=f"objects left behind: {leftovers(api)}"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "keeps_job: the test keeps its PyTorchJob on purpose (skip the leftover check)"
    )


@pytest.fixture
def write_dag(airflow_db: None) -> Iterator[Callable[..., Any]]:
    """Write a DAG file into the DAGs folder and return its ``dag`` object.

    The source is a module body that defines ``dag``; ``__DAG_ID__`` is replaced by a unique id
    and ``__NAME__`` by ``repr(values[name])`` for each keyword. The files go after the test:
    each ``dag.test()`` parses and syncs the whole DAGs folder, so files kept from every earlier
    test made each run slower than the one before.
    """
    written: list[Path] = []

    def write(source: str, **values: Any) -> Any:
        dag_id = f"e2e_{uuid.uuid4().hex[:10]}"
        path = DAGS / f"{dag_id}.py"
        text = textwrap.dedent(source).replace("__DAG_ID__", dag_id)
        for key, value in values.items():
            text = text.replace(f"__{key.upper()}__", repr(value))
        path.write_text(text)
        written.append(path)
        return load_dag_file(path, dag_id)

    yield write
    for path in written:
        path.unlink(missing_ok=True)


REPO_DAGS = Path(__file__).resolve().parents[2] / "dags"


def load_dag_file(path: Path, module_name: str) -> Any:
    """Import a DAG file as a module and return its ``dag``."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.fixture
def example_dag(airflow_db: None) -> Iterator[Callable[[str], Any]]:
    """Copy ``dags/<name>.py`` into the DAGs folder and return its ``dag`` object (the copy goes
    after the test, as `write_dag`'s files do)."""
    copied: list[Path] = []

    def load(name: str) -> Any:
        target = DAGS / f"{name}.py"
        shutil.copyfile(REPO_DAGS / f"{name}.py", target)
        copied.append(target)
        return load_dag_file(target, f"example_{name}")

    yield load
    for path in copied:
        path.unlink(missing_ok=True)
