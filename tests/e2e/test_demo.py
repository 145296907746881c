"""``make demo`` end to end: the script behind it, run as a user runs it, in a scratch folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.demo_output import assert_the_demo_ran_six_gangs_one_at_a_time

REPO = Path(__file__).resolve().parents[2]


# `make demo` is the README's first command: every `make test` runs it, from the built wheels in
# a fresh venv (tests/packaging/test_wheel_install.py, with these same assertions); this run from the
# repository's venv is its twin for `make test-slow`.
@pytest.mark.slow
def test_demo_runs_six_gang_jobs_one_after_another_and_leaves_nothing_running(tmp_path: Path) -> None:
    env = {**os.environ, "GANG_DEMO_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert_the_demo_ran_six_gangs_one_at_a_time(output)


# Every run takes the TrainJob seed DAG under dag.test() (tests/e2e/test_example_dags.py) and on
# the real stack (tests/realstack/test_trainjobs.py); its `make demo` path runs with `make test-slow`.
@pytest.mark.slow
def test_demo_with_trainjobs_runs_six_trainer_gangs_one_after_another(tmp_path: Path) -> None:
    env = {**os.environ, "GANG_DEMO_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py"), "--kind", "trainjob"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "airflow dags test gang_vs_deadlock_trainjob" in output
    assert '"gang_scheduling": "trainer"' in output
    rows = [line for line in output.splitlines() if re.match(r"submit-[0-9a-f]{8} ", line)]
    assert len(rows) == 6
    assert all(row.rstrip().endswith("succeeded") for row in rows)
    waits = sorted(float(re.findall(r"(\d+\.\d)s", row)[0]) for row in rows)
    assert waits[-1] >= 4 * 3.0
    assert "nothing left running" in output
    assert "DAG run gang_vs_deadlock_trainjob: success" in output


def test_demo_refuses_a_gang_mode_its_kind_does_not_have(tmp_path: Path) -> None:
    env = {**os.environ, "GANG_DEMO_DIR": str(tmp_path)}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "demo.py"),
            "--kind",
            "trainjob",
            "--gang-scheduling",
            "provider",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--kind trainjob takes --gang-scheduling trainer or disabled" in result.stderr


# The vcjob seed DAG runs under dag.test() (tests/e2e/test_example_dags.py) and its mapped
# operator on the real stack (tests/realstack/test_vcjobs.py); its `make demo` path runs with
# `make test-slow`.
@pytest.mark.slow
def test_demo_with_volcano_jobs_runs_six_gangs_one_after_another(tmp_path: Path) -> None:
    env = {**os.environ, "GANG_DEMO_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py"), "--kind", "vcjob"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "airflow dags test gang_vs_deadlock_vcjob" in output
    assert '"gang_scheduling": "volcano"' in output
    rows = [line for line in output.splitlines() if re.match(r"seed-[0-9a-z]+-[0-5] ", line)]
    assert len(rows) == 6
    assert all(row.rstrip().endswith("succeeded") for row in rows)
    assert "nothing left running" in output
