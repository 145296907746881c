"""The example of docs/guides/testing.md runs as a user runs it: ``pytest`` in
examples/dag_tests, a project of its own (its pytest.ini, its conftest.py setting up Airflow),
with airflow-gang-sim's pytest plugin providing the ``gang_cluster`` fixtures through its
``pytest11`` entry point, and none of this repository's test setup (the ``AIRFLOW_*`` variables
tests/conftest.py sets are dropped, as a user's shell would not have them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dag_tests"


def run_pytest(*args: str, timeout: float) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    env.pop("KUBECONFIG", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output


def test_the_dag_tests_on_the_embedded_cluster_pass() -> None:
    output = run_pytest(timeout=280)
    assert "2 passed, 1 skipped" in output, output[-3000:]


@pytest.mark.slow
def test_the_dag_test_under_a_real_airflow_passes() -> None:
    """About a minute (Airflow's start and one run): `make test-slow`; tests/stack is its twin."""
    output = run_pytest("--deployed", "-k", "deployed", timeout=290)
    assert "1 passed, 2 deselected" in output, output[-3000:]
