"""Airflow for the DAG tests: a private home, this project's dags/ folder and a SQLite metadata
database, set before anything imports Airflow; the embedded cluster comes from airflow-gang-sim's
pytest plugin (the ``gang_cluster`` fixtures)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DAGS = Path(__file__).resolve().parents[1] / "dags"
HOME = Path(tempfile.mkdtemp(prefix="airflow-dag-tests-"))

os.environ["AIRFLOW_HOME"] = str(HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{HOME / 'airflow.db'}"
# dag.test() runs triggers inline, so the resume race the hold guards against cannot happen.
os.environ["AIRFLOW__GANG__RESUME_HOLD_SECONDS"] = "0"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--deployed", action="store_true", help="also run the tests under a real Airflow (about a minute)"
    )


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    """``airflow db migrate`` once per test session: dag.test() records its run there."""
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, timeout=600)


@pytest.fixture
def kubernetes_default(gang_kubeconfig: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the DAGs' ``kubernetes_default`` connection at the test's embedded cluster."""
    connection = {"conn_type": "kubernetes", "extra": {"kube_config_path": gang_kubeconfig}}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(connection))
    return gang_kubeconfig


@pytest.fixture
def load_dag() -> Callable[[str], Any]:
    """``load_dag("train_model")``: the ``dag`` of dags/train_model.py."""

    def load(name: str) -> Any:
        spec = importlib.util.spec_from_file_location(name, DAGS / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.dag

    return load
