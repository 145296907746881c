"""``airflow-gang airflow`` (what ``make airflow`` runs) as a user starts it, then Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import psutil
import pytest

from tests.stack.conftest import still_running

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 240.0


class Output:
    """The command's stdout, line by line, read in a thread so waits stay bounded."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed within {timeout:.0f}s:\n{self.text}")

    @property
    def text(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def command(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "airflow-gang"),
            "airflow",
            "--port",
            "0",
            "--home",
            str(tmp_path / ".airflow-local"),
            "--dags",
            str(REPO / "dags"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # a Ctrl-C in the test's terminal must not reach it
    )
    try:
        assert process.stdout is not None
        yield process, Output(process.stdout)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def test_airflow_command_serves_the_ui_and_stops_on_ctrl_c(
    command: tuple[subprocess.Popen[str], Output],
) -> None:
    process, output = command
    up = output.wait_for("Airflow is up", STARTUP_TIMEOUT)
    output.wait_for("Ctrl-C stops everything.", 10)
    match = re.search(r"http://127\.0\.0\.1:\d+", up)
    assert match, up
    url = match.group(0)
    assert "login:     admin / admin" in output.text
    dags_line = next(line for line in output.lines if "DAGs:" in line)
    for dag_id in ("gang_vs_deadlock", "param_sweep", "retrain_daily"):
        assert dag_id in dags_line

    health = httpx.get(f"{url}/api/v2/monitor/health", timeout=30)
    assert health.status_code == 200
    assert {part["status"] for part in health.json().values()} == {"healthy"}
    token = httpx.post(f"{url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
    assert token.status_code == 201, token.text

    started = psutil.Process(process.pid).children(recursive=True)
    assert len(started) >= 4
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 0, output.text
    output.wait_for("nothing left running", 10)
    assert still_running(started) == []
