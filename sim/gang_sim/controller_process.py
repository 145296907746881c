"""The simulated controllers in a child process of their own.

In one process the API server and every controller share one GIL, so a busy simulation runs on
one core whatever the machine has. `ControllerProcess` hosts the same `ControllerManager` in a
child interpreter (``python -m gang_sim.controller_process``): the API server keeps the
parent's core, the controllers get another. They talk over the loopback listener exactly as they
do in-process, so nothing else changes. `ControllerProcesses` runs several such children, one per
group of `ISOLATED_GROUPS` (Volcano alone, then the rest), as `SimCluster` does when asked.

A plain subprocess rather than ``multiprocessing``: spawning re-imports the caller's main module,
which breaks any script that starts a cluster without an ``if __name__ == "__main__"`` guard.
The parent writes the topology as one JSON line on the child's stdin and keeps that pipe open;
the child answers ``ready`` (or the traceback of its failure) on stdout. Closing stdin, which
also happens when the parent dies, or SIGTERM stops the child, and it always stops its
controllers first, which kills process-runtime pods. Its logs go to the parent's stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterable
from types import FrameType
from typing import IO, Any

from gang_sim.controllers.manager import ControllerManager
from gang_sim.process_tuning import tune_garbage_collection
from gang_sim.topology import CONTROLLER_NAMES, Topology, controller_factories

_READY = "ready"


class ControllerProcess:
    """`ControllerManager`'s ``start()``/``stop()``, with the controllers in a child process."""

    def __init__(
        self,
        kubeconfig_path: str,
        topology: Topology,
        only: Iterable[str] = CONTROLLER_NAMES,
        *,
        log_level: int | None = None,
    ) -> None:
        self.kubeconfig_path = kubeconfig_path
        self.topology = topology
        self.only = tuple(only)
        self.log_level = logging.getLogger().getEffectiveLevel() if log_level is None else log_level
        self._process: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout: float = 30.0) -> ControllerProcess:
        self.launch(timeout)
        self.wait_ready(timeout)
        return self

    def launch(self, timeout: float = 30.0) -> None:
        """Start the child and hand it its order; `wait_ready` then waits for its answer."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdin is not None
        order = {
            "kubeconfig": self.kubeconfig_path,
            "topology": dataclasses.asdict(self.topology),
            "only": list(self.only),
            "log_level": self.log_level,
            "timeout": timeout,
        }
        self._process.stdin.write(json.dumps(order) + "\n")
        self._process.stdin.flush()

    def wait_ready(self, timeout: float = 30.0) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        # The child imports the controllers before it can sync: allow for that on top of `timeout`.
        answer = _read_line(self._process.stdout, timeout + 15)
        if answer is None:
            self.stop()
            raise TimeoutError(f"controllers did not sync with the API server within {timeout:.0f}s")
        if answer != _READY:
            self.stop()
            reason = json.loads(answer) if answer else f"it exited with code {self._process.returncode}"
            raise RuntimeError(f"controllers failed to start: {reason}")

    def stop(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the child's signal to stop its controllers and exit
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# Volcano's sessions cost CPU in proportion to the queue, every period, whatever else happens:
# alone in its process it no longer slows the controllers that create and run the pods.
ISOLATED_GROUPS: tuple[tuple[str, ...], ...] = (
    ("volcano",),
    (
        "kube-scheduler",
        "training-operator",
        "trainer",
        "jobset",
        "job-controller",
        "node-lifecycle",
        "taint-eviction",
        "pod-gc",
        "disruption",
        "kubelet",
    ),
)


class ControllerProcesses:
    """The controllers split over several child processes (`ISOLATED_GROUPS`), started and
    stopped together: each real controller is a process of its own, and each gets a core."""

    def __init__(
        self,
        kubeconfig_path: str,
        topology: Topology,
        groups: Iterable[Iterable[str]] = ISOLATED_GROUPS,
    ) -> None:
        self.processes = [ControllerProcess(kubeconfig_path, topology, only) for only in groups]

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]

    def start(self, timeout: float = 30.0) -> ControllerProcesses:
        try:
            for process in self.processes:
                process.launch(timeout)
            for process in self.processes:
                process.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        for process in self.processes:
            process.stop(timeout)

    def __enter__(self) -> ControllerProcesses:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _read_line(stream: IO[str], timeout: float) -> str | None:
    """One line from ``stream`` ('' at EOF), or None if none came within ``timeout``."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0].strip() if lines else None


def _topology(data: dict[str, Any]) -> Topology:
    return Topology(**data)


def main() -> None:
    """The child: read the order, run the controllers until stdin closes, then stop them."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed goes to stderr, not into the protocol
    order = json.loads(sys.stdin.readline())
    logging.basicConfig(level=order["log_level"], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Ctrl-C reaches the whole process group: the parent decides when its controllers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    tune_garbage_collection()
    try:
        factories = controller_factories(_topology(order["topology"]), order["only"])
        manager = ControllerManager(order["kubeconfig"], factories)
        manager.start(order["timeout"])
    except BaseException:  # reported to the parent's start() instead of a silent exit
        protocol.write(json.dumps(traceback.format_exc()) + "\n")
        protocol.flush()
        return
    try:
        protocol.write(_READY + "\n")
        protocol.flush()
        while sys.stdin.readline():
            pass
    except (OSError, SystemExit):
        pass  # SIGTERM: stop all the same
    finally:
        manager.stop()


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    main()
