"""Test-wide setup: an isolated AIRFLOW_HOME so tests never touch ~/airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-gang-home-")

SHARED_CRDS = Path(__file__).resolve().parents[2] / "shared" / "crds"


@pytest.fixture(scope="session")
def shared_crds() -> Path:
    """The upstream CRD YAMLs beside the repository (team reference data), or a skip."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(
            f"upstream CRD schemas not found at {SHARED_CRDS} (only present beside the team checkout)"
        )
    return SHARED_CRDS
