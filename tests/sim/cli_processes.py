"""``airflow-gang`` commands run as separate processes, the way a user runs them, and stopped after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

CLI = str(Path(sys.executable).parent / "airflow-gang")


class CliProcesses:
    """Starts ``airflow-gang`` processes; leaving the ``with`` block kills those still running."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as output:
            process = subprocess.Popen(
                [CLI, *args], stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy()
            )
        self.started.append(process)
        return process

    @staticmethod
    def stop(process: subprocess.Popen[bytes]) -> int:
        """SIGTERM, as a user's Ctrl-C or a service manager; returns the exit code."""
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=30)

    def __enter__(self) -> CliProcesses:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for process in reversed(self.started):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
