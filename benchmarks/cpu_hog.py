"""Background load for `bench_triggerer.py --background-load`: one process spinning on one core.

`CpuHog` starts ``python cpu_hog.py <parent pid>``, a busy loop in one thread (so at most one
core), and terminates it on `stop` or when its ``with`` block ends, also on errors and Ctrl-C.
The spinning process also stops by itself once its parent is gone (checked every 0.5 s), so a
benchmark killed with SIGKILL does not leave it behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time


def spin(parent: int) -> None:
    """Busy-loop until the process ``parent`` is no longer this process's parent."""
    while os.getppid() == parent:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            pass


class CpuHog:
    """A child process spinning in a busy loop from `start` to `stop`."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        if self.running:
            return
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(5)

    def __enter__(self) -> CpuHog:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C reaches the whole foreground process group
        spin(int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid())
