"""Test-wide setup: an isolated AIRFLOW_HOME so tests never touch ~/airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports Airflow: a private home, DAG folder and SQLite database per test
# session, so tests never touch ~/airflow or a developer's own Airflow setup.
_HOME = Path(tempfile.mkdtemp(prefix="airflow-gang-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(_HOME / "dags")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "false"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME / 'airflow.db'}"
# dag.test() runs triggers inline, so the race the resume hold avoids (apache/airflow#72716)
# cannot happen there; the real-stack tests (tests/realstack) keep the default hold.
os.environ.setdefault("AIRFLOW__GANG__RESUME_HOLD_SECONDS", "0")
(_HOME / "dags").mkdir(parents=True, exist_ok=True)

SHARED_CRDS = Path(__file__).resolve().parents[2] / "shared" / "crds"


@pytest.fixture(scope="session")
def shared_crds() -> Path:
    """The upstream CRD YAMLs beside the repository (team reference data), or a skip."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(
            f"upstream CRD schemas not found at {SHARED_CRDS} (only present beside the team checkout)"
        )
    return SHARED_CRDS
