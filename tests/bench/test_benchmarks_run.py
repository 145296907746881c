"""Every benchmark's quick mode runs to its table: a smoke test, so none can rot unseen.

The figures are not judged here (these machines are shared and noisy; benchmarks/ and the
README quote measured runs); a crash, a hang or a missing table fails, and so does a benchmark
that exits non-zero for a missed target (the chaos benchmark does).

Three quick modes start a real Airflow and take minutes each (measured on 2 cores: chaos 168 s,
triggerer 143 s, deferral race 77 s); with them ``make test`` would run past CI's 30 minutes, so
they are ``slow`` (``make test-slow``). The others run in every ``make test``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# Minutes each, on a real Airflow stack: `make test-slow`.
SLOW = {"bench_chaos.py", "bench_deferral_race.py", "bench_triggerer.py"}
# A line each benchmark prints only with its finished table.
TABLE_MARKS = {
    "bench_admission.py": "ratio ours/polling",
    "bench_apiserver.py": "deliver 100 events to each of 20 watches",
    "bench_chaos.py": "left behind",
    "bench_deferral_race.py": "one deferral, hold",
    "bench_history_page.py": "page load (jobs + queues + timeline)",
    "bench_scheduler.py": "jobs completed",
    "bench_triggerer.py": "shared",
}


def test_every_benchmark_has_a_smoke_check() -> None:
    assert sorted(path.name for path in BENCHMARKS.glob("bench_*.py")) == sorted(TABLE_MARKS)


@pytest.mark.parametrize(
    "script",
    [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in sorted(TABLE_MARKS)],
)
@pytest.mark.timeout(900)
def test_quick_mode_prints_its_table(script: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=880,
        cwd=tmp_path,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert TABLE_MARKS[script] in done.stdout, done.stdout[-4000:]
