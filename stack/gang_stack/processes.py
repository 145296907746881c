"""Starting the stack's components and stopping them with everything they started.

Each component runs in its own session (``start_new_session=True``), so its session id is its
pid. Airflow moves task processes into process groups of their own (``setpgid``), so signalling
a component's process group does not reach them, but they stay in the component's session, also
after their parent dies and they are re-parented. Stopping therefore signals every process whose
session is one of the stack's, plus the descendants of those (a task may start a program in a
new session, e.g. BashOperator): the process table comes from psutil, each process's group and
session from ``os.getpgid`` and ``os.getsid``.

`kill_component` ends one component the way its machine or container would (a process fault in
a test), and `start_component` can start it again, its log continued.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

# Seconds a task process has for its on_kill after SIGTERM before its group gets SIGKILL.
TASK_GRACE = 5.0


@dataclass
class Component:
    """One running Airflow component: its process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def log_tail(self, characters: int = 3000) -> str:
        text = self.log_text()
        return text[-characters:] if text else "(empty log)"


def start_component(
    name: str,
    command: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    *,
    append: bool = False,
) -> Component:
    """Start ``command`` in a new session, stdout and stderr to ``log_path``.

    The log is truncated first unless ``append`` (a restart: the earlier life of the component
    stays readable above a ``==> restarted`` line).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab" if append else "wb") as output:
        header = "==> restarted: " if append else "==> "
        output.write(f"{header}{' '.join(command)}\n".encode())
        output.flush()
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Component(name=name, process=process, log_path=log_path)


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    group: int
    session: int
    zombie: bool
    # When it started, in seconds since boot: with the pid, what tells it from a later process
    # given the same pid (`is_alive`).
    start_time: float


def _start_time(process: psutil.Process) -> float:
    """``process``'s start in seconds since boot, to the kernel's 1/100 s.

    psutil gives it in seconds since the epoch: the boot time (which moves when the system clock
    is set) plus the start since boot. The boot time is read again at once and taken off, so
    setting the clock between two looks at one process does not make it look like another one.
    """
    return round(float(process.create_time()) - float(psutil.boot_time()), 2)


def _read_stat(pid: int) -> ProcessInfo | None:
    """What the stack needs to know of process ``pid``; None once it is gone."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():  # status, parent and start from one read
            zombie = process.status() == psutil.STATUS_ZOMBIE
            return ProcessInfo(
                pid, process.ppid(), os.getpgid(pid), os.getsid(pid), zombie, _start_time(process)
            )
    except (psutil.Error, OSError):  # gone (ProcessLookupError), or not ours to look at
        return None


def process_table() -> dict[int, ProcessInfo]:
    """Every visible process."""
    table: dict[int, ProcessInfo] = {}
    for pid in psutil.pids():
        info = _read_stat(pid)
        if info is not None:
            table[info.pid] = info
    return table


def stack_processes(sessions: Iterable[int]) -> dict[int, float]:
    """``pid -> start time`` of the live processes in ``sessions`` and of their descendants."""
    return {pid: info.start_time for pid, info in _stack_table(sessions).items()}


def _stack_table(sessions: Iterable[int]) -> dict[int, ProcessInfo]:
    table = process_table()
    wanted = set(sessions)
    found = {pid for pid, info in table.items() if info.session in wanted and not info.zombie}
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found and not table[child].zombie:
                found.add(child)
                pending.append(child)
    return {pid: table[pid] for pid in found}


def is_alive(pid: int, start_time: float) -> bool:
    """Whether that very process (same pid and start time) still runs (zombies do not)."""
    info = _read_stat(pid)
    return info is not None and info.start_time == start_time and not info.zombie


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _signal_process(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


@dataclass
class StopReport:
    """What stopping took: processes that needed SIGKILL after the grace, and any still alive."""

    killed: list[str]
    left: list[str]


def stop_components(
    components: Sequence[Component], grace: float, last: Collection[str] = ("api-server",)
) -> StopReport:
    """SIGTERM the stack's processes, SIGKILL whatever is left after ``grace`` seconds.

    The components named in ``last`` (the API server, which stopping tasks still report to)
    are stopped once the others are gone. Nothing should be left alive at the end.
    """
    tracked: dict[int, float] = {}
    deadline = time.monotonic() + grace
    for stage in ([c for c in components if c.name not in last], [c for c in components if c.name in last]):
        if stage:
            tracked.update(_terminate(stage, max(deadline, time.monotonic() + 3)))
    sessions = [component.pid for component in components]
    tracked.update(stack_processes(sessions))
    killed = [_describe(pid) for pid, start in sorted(tracked.items()) if is_alive(pid, start)]
    for component in components:
        if component.running():
            _signal_group(component.pid, signal.SIGKILL)
    for _ in range(3):  # processes may start children while being killed
        tracked.update(stack_processes(sessions))
        for pid, start in tracked.items():
            if is_alive(pid, start):
                _signal_process(pid, signal.SIGKILL)
    for component in components:
        with contextlib.suppress(subprocess.TimeoutExpired):
            component.process.wait(timeout=10)
    left = {pid: start for pid, start in tracked.items() if is_alive(pid, start)}
    until = time.monotonic() + 5
    while left and time.monotonic() < until:
        time.sleep(0.05)
        left = {pid: start for pid, start in left.items() if is_alive(pid, start)}
    return StopReport(killed=killed, left=[_describe(pid) for pid in sorted(left)])


def kill_component(component: Component, signum: int, grace: float) -> StopReport:
    """End one component as its machine or container would; return once none of its processes is left.

    ``SIGKILL`` models losing the machine or the pod: every process of the component dies at
    once and no handler runs, its helpers included (the triggerer's trigger runner and log
    server, the scheduler's executor workers and the task processes they started). Killing only
    the main process would be a fault no deployment has: its orphaned trigger runner would go on
    firing events. Any other signal goes to the main process alone, as a container runtime sends
    it to PID 1; whatever is left once the main process has exited, or after ``grace`` seconds,
    gets SIGKILL, as when the container is torn down.

    In the report, ``killed`` names the processes that got SIGKILL (with ``SIGKILL``: all of
    them) and ``left`` any still alive at the end (normally none).
    """
    sessions = [component.pid]
    # Read before anything dies: a descendant in a session of its own (a task's subprocess) is
    # found only through its parent.
    tracked = stack_processes(sessions)
    described = {pid: _describe(pid) for pid in tracked}
    if signum != signal.SIGKILL:
        _signal_process(component.pid, signum)
        until = time.monotonic() + grace
        while component.running() and time.monotonic() < until:
            for pid, start in stack_processes(sessions).items():
                if pid not in tracked:
                    tracked[pid], described[pid] = start, _describe(pid)
            time.sleep(0.1)
    killed = {pid: described[pid] for pid, start in tracked.items() if is_alive(pid, start)}
    _signal_group(component.pid, signal.SIGKILL)
    for _ in range(3):  # a process may start a child between the scan and its own death
        for pid, start in stack_processes(sessions).items():
            tracked.setdefault(pid, start)
        for pid, start in tracked.items():
            if is_alive(pid, start):
                killed.setdefault(pid, described.get(pid) or _describe(pid))
                _signal_process(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        component.process.wait(timeout=10)
    left = {pid: start for pid, start in tracked.items() if is_alive(pid, start)}
    until = time.monotonic() + 5
    while left and time.monotonic() < until:
        time.sleep(0.05)
        left = {pid: start for pid, start in left.items() if is_alive(pid, start)}
    return StopReport(
        killed=[killed[pid] for pid in sorted(killed)], left=[_describe(pid) for pid in sorted(left)]
    )


def _terminate(stage: Sequence[Component], deadline: float) -> dict[int, float]:
    """Stop ``stage`` in Airflow's own order; wait until all of it is gone or ``deadline``.

    SIGTERM goes to each component's main process, which stops its own helpers (the
    triggerer's runner, executor workers, log servers; signalling their groups instead makes
    the triggerer wait 10 s for a runner that already left), and to the task process groups:
    Airflow's task process only calls the operator's ``on_kill`` on SIGTERM and goes on
    running while the executor waits for it, so those groups get SIGKILL after `TASK_GRACE`
    seconds. Whatever is left of a component's group once its main process exits gets SIGTERM.
    Returns every process seen (pid -> start time).
    """
    sessions = [component.pid for component in stage]
    table = _stack_table(sessions)
    seen = {pid: info.start_time for pid, info in table.items()}
    task_groups = {info.group for info in table.values()} - set(sessions)
    for component in stage:
        if component.running():
            _signal_process(component.pid, signal.SIGTERM)
    for group in sorted(task_groups):
        _signal_group(group, signal.SIGTERM)
    kill_tasks_at = time.monotonic() + TASK_GRACE
    orphaned: set[int] = set()
    while time.monotonic() < deadline:
        table = _stack_table(sessions)
        seen.update({pid: info.start_time for pid, info in table.items()})
        if time.monotonic() > kill_tasks_at:
            for group in {info.group for info in table.values()} - set(sessions):
                _signal_group(group, signal.SIGKILL)
        for component in stage:
            if component.process.poll() is not None and component.pid not in orphaned:
                orphaned.add(component.pid)
                _signal_group(component.pid, signal.SIGTERM)
        if not table and len(orphaned) == len(stage):
            break
        time.sleep(0.1)
    return seen


def _describe(pid: int) -> str:
    try:
        command = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        command = "?"
    return f"{pid}: {command.strip()}"
