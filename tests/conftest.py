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
from typing import Any

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
    "docs/test_code_blocks.py": "e2e",  # runs the docs' DAGs with dag.test(); tests/docs is fast
    "sim": "sim",
    "stack": "sim",
    "plugins": "e2e",
    "e2e": "e2e",
    # The built wheels in a fresh venv, running the demo on the simulator's wheel. (Not "dist":
    # pytest's default norecursedirs skips a folder of that name, so its tests never ran.)
    "packaging": "e2e",
    "realstack": "realstack",
    "production": "realstack",
    "bench": "bench",
}


def tier_of(path: Path) -> str:
    relative = path.resolve().relative_to(TESTS).as_posix()
    matches = [prefix for prefix in TIERS if relative == prefix or relative.startswith(f"{prefix}/")]
    return TIERS[max(matches, key=len)] if matches else "fast"


# Tests that spend their time waiting on real Airflow processes (a scheduler's loop, a triggerer's
# handover) rather than on this process's CPU. `make test` runs them in a second pytest-xdist
# worker beside all the others (``-n 2``, `pytest_xdist_make_scheduler`): two lanes, each in the
# order it is collected, each worker keeping its package-scoped fixtures.
BESIDE = (
    "realstack",
    "production",
    "bench",
    "stack/test_stack.py",
    "e2e/test_demo.py",
    "packaging",
    "docs/test_code_blocks.py",
    "plugins/test_airflow_api_server.py",
)
# (e2e/test_demo.py and stack/test_cli.py start Airflow processes for under a minute each and
# move between the lanes as they grow: after issue 37's tests, stack/test_cli.py, ~20 s, went back
# to the in-process lane, and plugins/test_airflow_api_server.py, ~20 s, came here.)
# (packaging/, the built wheels installed into a fresh venv and `make demo` run from them, took over
# e2e/test_demo.py's run of the seed scenario, now `slow`; it waits on uv, the Airflow CLI and
# the demo's processes, so it runs here too.)
# (docs/test_code_blocks.py, ~45 s of dag.test() runs of the docs' examples, came with issue 37
# beside the docs' other tests and the testing guide's example project, ~60 s more in the
# in-process lane: it runs here so that the two lanes stay even. Measured after that on a fresh
# clone with `--durations=0`: in-process 1,367 s, this lane 1,336 s without the wheel test, which
# had not run (a folder named dist is in pytest's default norecursedirs), ~60 s; then the real-stack
# TrainJob deadlock and Volcano Job admission-timeout retry became `slow`, and
# plugins/test_airflow_api_server.py, ~22 s waiting on an api-server, came here. The next fresh
# clone's run took 25 min 11 s (in-process 1,377 s, this lane 1,369 s), so seven more tests with
# twins in every run became `slow`, ~90 s in all.)


def lane_of(nodeid: str) -> str:
    """``airflow-processes`` or ``in-process``, from a test's node id (its path under tests/)."""
    relative = nodeid.split("::", 1)[0].removeprefix("tests/")
    beside = any(relative == prefix or relative.startswith(f"{prefix}/") for prefix in BESIDE)
    return "airflow-processes" if beside else "in-process"


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Two lanes (`lane_of`), one per worker: xdist's scope scheduling with the lane as the scope.

    (``--dist loadgroup`` with ``xdist_group`` marks would say the same, but pytest-xdist 3.8 does
    not see those marks under pytest 9, whose node ids it can no longer rewrite.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class TwoLanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane_of(nodeid)

    return TwoLanes(config, log)


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
