"""``airflow-gang airflow`` (``make airflow``): a full local Airflow on the embedded cluster.

Starts `SimCluster` (2 nodes x 2 GPUs, queues ``default`` and ``research``, as
``airflow-gang sim`` does) in this process and an `AirflowStack` serving a DAG folder with
``kubernetes_default`` pointing at the cluster, in a persistent home; prints the address, the
login and the DAGs; runs until SIGINT or SIGTERM, then stops everything.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from gang_stack.errors import StackError
from gang_stack.settings import LOG_DIR, port_is_free

if TYPE_CHECKING:
    from gang_sim.cluster import SimCluster
    from gang_stack.stack import AirflowStack

DEFAULT_HOME = ".airflow-local"
DEFAULT_PORT = 8080
RESEARCH_QUEUE = {"research": {"nvidia.com/gpu": 2}}


def register(subparsers: Any) -> None:
    """Add ``airflow`` to the ``airflow-gang`` command's subparsers."""
    parser = subparsers.add_parser(
        "airflow",
        help="a full local Airflow (api-server, scheduler, dag-processor, triggerer) on the embedded cluster",
        description="Start the embedded cluster and the real Airflow components serving a DAG folder; "
        "stay up until Ctrl-C.",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"UI and API port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one)",
    )
    parser.add_argument(
        "--home", default=DEFAULT_HOME, help=f"AIRFLOW_HOME, kept between runs (default {DEFAULT_HOME})"
    )
    parser.add_argument("--dags", default="dags", help="DAG folder (default: dags)")
    parser.add_argument(
        "--runtime",
        choices=["script", "process"],
        default="script",
        help="simulator runtime: script (pods follow their annotations) or process (run the command)",
    )
    parser.add_argument(
        "--training-operator-gang",
        choices=["volcano"],
        default=None,
        help="run the simulated training-operator with --gang-scheduler-name=volcano (default: without)",
    )
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="metadata DB: sqlite in the home, kept between runs (default), or postgres: a "
        "PostgreSQL server started with the stack, fresh each run",
    )
    parser.add_argument(
        "--ha",
        action="store_true",
        help="two schedulers and two triggerers, as a highly available deployment (implies postgres)",
    )
    parser.add_argument(
        "--executor",
        choices=["local", "celery"],
        default="local",
        help="local (LocalExecutor, default) or celery: CeleryExecutor with two Celery workers and a "
        "Redis broker started with the stack (needs redis-server: make services; implies postgres)",
    )
    parser.add_argument("--username", default="admin", help="UI login (default admin)")
    parser.add_argument("--password", default="admin", help="UI password (default admin)")
    parser.add_argument(
        "--startup-timeout", type=float, default=240.0, help="seconds to wait for Airflow (default 240)"
    )
    parser.set_defaults(func=run)


def say(message: str) -> None:
    print(f"[airflow-gang {time.strftime('%H:%M:%S')}] {message}", flush=True)


class _Stop:
    """SIGINT/SIGTERM: interrupt the startup (KeyboardInterrupt), later set ``event``.

    Only the first signal interrupts, so a second Ctrl-C cannot break off the stopping.
    The previous handlers are restored on exit.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.interrupt = True
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt

    def __enter__(self) -> _Stop:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def run(args: argparse.Namespace) -> int:
    from gang_sim.cluster import SimCluster
    from gang_stack.stack import AirflowStack

    home = Path(args.home).resolve()
    dags = Path(args.dags).resolve()
    if not dags.is_dir():
        print(f"error: DAG folder {dags} does not exist (--dags)", file=sys.stderr)
        return 2
    if args.port and not port_is_free(args.port):
        print(
            f"error: port {args.port} on 127.0.0.1 is in use; pass --port N (0: a free one)", file=sys.stderr
        )
        return 2
    home.mkdir(parents=True, exist_ok=True)
    # Process-runtime pods run commands such as "python" with this process's PATH: this venv first.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    began = time.monotonic()
    with _Stop() as stop:
        cluster = SimCluster(
            nodes=2,
            gpus_per_node=2,
            queues=RESEARCH_QUEUE,
            runtime=args.runtime,
            training_operator_gang=args.training_operator_gang,
            schedule_period=0.5,
            kubeconfig_path=str(home / "sim.kubeconfig"),
            workdir=str(Path.cwd()),
        )
        stack = AirflowStack(
            dags,
            home=home,
            kubeconfig=home / "sim.kubeconfig",
            database="postgres" if args.ha or args.executor == "celery" else args.database,
            schedulers=2 if args.ha else 1,
            triggerers=2 if args.ha else 1,
            executor=args.executor,
            port=args.port,
            username=args.username,
            password=args.password,
            startup_timeout=args.startup_timeout,
        )
        try:
            flag = ", training-operator --gang-scheduler-name=volcano" if args.training_operator_gang else ""
            say(f"starting the embedded cluster (2 nodes x 2 GPUs, {args.runtime} runtime{flag})")
            cluster.start()
            say(f"cluster ready at {cluster.url}; starting Airflow (logs: {_shown(home / LOG_DIR)})")
            stack.start()
            parsed = _parsed_dags(stack, dags)
            _announce(stack, cluster, parsed, time.monotonic() - began, runtime=args.runtime)
            stop.interrupt = False
            stop.event.wait()
        except KeyboardInterrupt:
            say("interrupted during startup")
        except StackError as error:
            print(f"error: {error}", file=sys.stderr)
            _stopped(stack, cluster)
            return 1
        except BaseException:
            stop.interrupt = False
            stack.stop()
            cluster.stop()
            raise
        stop.interrupt = False
        return _stopped(stack, cluster)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _parsed_dags(stack: AirflowStack, dags: Path, timeout: float = 120.0) -> list[dict[str, Any]]:
    """The DAGs once every DAG file of the folder is parsed or has an import error (bounded)."""
    expected = {path.relative_to(dags).as_posix() for path in dags.rglob("*.py") if _may_hold_dags(path)}
    deadline = time.monotonic() + timeout
    while True:
        found = stack.client.dags()
        errors = stack.client.import_errors()
        seen = {str(dag.get("relative_fileloc")) for dag in found}
        seen |= {_relative(str(error["filename"]), dags) for error in errors}
        if expected <= seen or time.monotonic() > deadline:
            for error in errors:
                say(f"import error in {error['filename']}:\n{error['stack_trace']}")
            return sorted(found, key=lambda dag: str(dag["dag_id"]))
        time.sleep(1.0)


def _may_hold_dags(path: Path) -> bool:
    """Airflow's own heuristic (safe mode): a DAG file mentions both "airflow" and "dag"."""
    text = path.read_text(encoding="utf-8", errors="replace").lower()
    return "airflow" in text and "dag" in text


def _relative(filename: str, dags: Path) -> str:
    path = Path(filename)
    return path.relative_to(dags).as_posix() if path.is_absolute() and path.is_relative_to(dags) else filename


# A DAG tagged so runs commands in its pods (real training): the script runtime runs none.
NEEDS_PROCESS_RUNTIME_TAG = "needs-process-runtime"
FIRST_DAG = "gang_vs_deadlock"


def _dag_label(dag: dict[str, Any], runtime: str) -> str:
    notes = ["paused"] if dag.get("is_paused") else []
    tags = {str(tag.get("name") if isinstance(tag, dict) else tag) for tag in dag.get("tags") or []}
    if runtime != "process" and NEEDS_PROCESS_RUNTIME_TAG in tags:
        notes.append('needs ARGS="--runtime process"')
    joined = ", ".join(notes)
    return f"{dag['dag_id']} ({joined})" if notes else str(dag["dag_id"])


def _announce(
    stack: AirflowStack, cluster: SimCluster, dags: list[dict[str, Any]], seconds: float, *, runtime: str
) -> None:
    names = ", ".join(_dag_label(dag, runtime) for dag in dags)
    print(flush=True)
    say(f"Airflow is up ({seconds:.0f}s): {stack.url}")
    print(f"  login:     {stack.username} / {stack.password}")
    print(f"  DAGs:      {names or '(none parsed)'}")
    if any(dag.get("is_paused") for dag in dags):
        print("             (switch a paused DAG on in the UI before triggering it)")
    print(f"  cluster:   {cluster.url}, kubeconfig {_shown(Path(cluster.kubeconfig_path))}")
    print("             (connection kubernetes_default; Volcano queues default and research)")
    print(f"  shape:     {', '.join(stack.component_names)}; {stack.settings.database.split(':')[0]}")
    print(f"  logs:      {_shown(stack.log_dir)}/<component>.log, task logs in {_shown(stack.home / 'logs')}")
    if any(dag["dag_id"] == FIRST_DAG for dag in dags):
        print(f"  next:      open {stack.url}, switch {FIRST_DAG} on and trigger it: six 4-GPU gangs")
        print("             on 4 GPUs run one at a time (trigger it with gang_scheduling=disabled to see")
        print(f"             the deadlock); watch them in Gang jobs: {stack.url}/gang/")
    print("Ctrl-C stops everything.", flush=True)


def _stopped(stack: AirflowStack, cluster: SimCluster) -> int:
    say("stopping Airflow and the embedded cluster")
    stack.stop()
    cluster.stop()
    if stack.killed_on_stop:
        say("these ignored SIGTERM and were killed:\n  " + "\n  ".join(stack.killed_on_stop))
    if stack.leftovers:
        say("still running after stop:\n  " + "\n  ".join(stack.leftovers))
        return 1
    say("stopped; nothing left running")
    return 0
