"""``make demo`` end to end: the script behind it, run as a user runs it, in a scratch folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# Not `slow`: `make demo` is the README's first command, so every `make test` runs it.
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
    rows = [line for line in output.splitlines() if re.match(r"submit-[0-9a-f]{8} ", line)]
    assert len(rows) == 6
    assert all(row.rstrip().endswith("succeeded") for row in rows)
    waits = sorted(float(re.findall(r"(\d+\.\d)s", row)[0]) for row in rows)  # queue-wait column
    assert waits[-1] >= 4 * 3.0  # six 3-second jobs, one at a time: the last waited for four others
    (chart,) = re.findall(r"timeline chart: (\S+)", output)
    assert Path(chart).read_text().startswith("<svg")
    assert "nothing left running" in output
    assert "DAG run gang_vs_deadlock: success" in output
    assert "simulator stopped (exit code 0)" in output
