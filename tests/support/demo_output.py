"""What `scripts/demo.py` prints when the seed scenario with gangs went right: six gangs, one at a
time, all succeeded, a timeline chart, nothing left (the demo's tests, from the tree and from the
built wheels)."""

from __future__ import annotations

import re
from pathlib import Path


def assert_the_demo_ran_six_gangs_one_at_a_time(output: str) -> Path:
    """Assert on the demo's output; the timeline chart's path, for where it was written."""
    rows = [line for line in output.splitlines() if re.match(r"submit-[0-9a-f]{8} ", line)]
    assert len(rows) == 6
    assert all(row.rstrip().endswith("succeeded") for row in rows)
    waits = sorted(float(re.findall(r"(\d+\.\d)s", row)[0]) for row in rows)  # queue-wait column
    assert waits[-1] >= 4 * 3.0  # six 3-second jobs, one at a time: the last waited for four others
    (chart,) = re.findall(r"timeline chart: (\S+)", output)
    assert Path(chart).read_text().startswith("<!doctype html>")
    assert "nothing left running" in output
    assert "DAG run gang_vs_deadlock: success" in output
    assert "simulator stopped (exit code 0)" in output
    return Path(chart)
