"""Test-wide setup: an isolated AIRFLOW_HOME so tests never touch ~/airflow, and the tiers.

Tiers are marked by folder (`TIERS`): ``fast`` (pure and provider-level tests: ``make test-fast``,
for development), ``sim`` (the embedded cluster), ``e2e`` (DAGs under ``dag.test()``),
``realstack`` (a real scheduler, triggerer and api-server), ``bench`` (every benchmark's quick
mode, as a smoke test). ``make test`` runs them all but the ``slow`` tests.
"""

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
TESTS = Path(__file__).resolve().parent
# Paths below tests/ and their tier; the longest matching prefix wins.
TIERS = {
    "unit": "fast",
    "provider": "fast",
    "deploy": "fast",
    "stack/test_settings.py": "fast",
    "sim/controllers/test_training_plan.py": "fast",
    "sim/controllers/test_volcano_session.py": "fast",
    "sim": "sim",
    "stack": "sim",
    "plugins": "e2e",
    "e2e": "e2e",
    "realstack": "realstack",
    "bench": "bench",
}


def tier_of(path: Path) -> str:
    relative = path.resolve().relative_to(TESTS).as_posix()
    matches = [prefix for prefix in TIERS if relative == prefix or relative.startswith(f"{prefix}/")]
    return TIERS[max(matches, key=len)] if matches else "fast"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier_of(item.path))


@pytest.fixture(scope="session")
def shared_crds() -> Path:
    """The upstream CRD YAMLs beside the repository (team reference data), or a skip."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(
            f"upstream CRD schemas not found at {SHARED_CRDS} (only present beside the team checkout)"
        )
    return SHARED_CRDS
