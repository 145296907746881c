"""`AirflowStack`: the real Airflow components of this installation, on loopback, for tests and people."""

from __future__ import annotations

import atexit
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from gang_stack.celery_workers import WORKER, worker_command, workers_answering
from gang_stack.client import AirflowClient
from gang_stack.errors import StackError
from gang_stack.postgres import PostgresDatabase
from gang_stack.processes import (
    Component,
    kill_component,
    stack_processes,
    start_component,
    stop_components,
)
from gang_stack.redis_broker import RedisBroker
from gang_stack.settings import (
    LOG_DIR,
    StackSettings,
    airflow_executable,
    free_port,
    kubernetes_connection,
    port_is_free,
)

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer", WORKER)
HEALTH_PARTS = {
    "scheduler": "latest_scheduler_heartbeat",
    "triggerer": "latest_triggerer_heartbeat",
    "dag_processor": "latest_dag_processor_heartbeat",
}
# The part of /api/v2/monitor/health that reports each component's heartbeat (the API server
# has none: its answering at all, with the metadatabase healthy, is its readiness).
HEALTH_PART_OF = {"scheduler": "scheduler", "triggerer": "triggerer", "dag-processor": "dag_processor"}
# Components that may run more than once (Airflow's high availability, Celery workers): the
# second is "scheduler-2"; each serves its logs on a port of its own (this setting).
REPLICABLE = {
    "scheduler": "worker_log_server_port",
    "triggerer": "trigger_log_server_port",
    WORKER: "worker_log_server_port",
}


def component_names(schedulers: int = 1, triggerers: int = 1, celery_workers: int = 0) -> tuple[str, ...]:
    """``api-server``, ``scheduler`` (``scheduler-2``...), ``dag-processor``, ``triggerer`` (...),
    then ``celery-worker`` (...) under the CeleryExecutor."""
    if schedulers < 1 or triggerers < 1:
        raise StackError("a stack runs at least one scheduler and one triggerer")
    counts = {"scheduler": schedulers, "triggerer": triggerers, WORKER: celery_workers}
    names: list[str] = []
    for kind in COMPONENTS:
        count = counts.get(kind, 1)
        names += [kind, *(f"{kind}-{n}" for n in range(2, count + 1))] if count else []
    return tuple(names)


def kind_of(name: str) -> str:
    """The Airflow command a component runs: ``scheduler-2`` -> ``scheduler``."""
    kind, _, number = name.rpartition("-")
    return kind if kind in REPLICABLE and number.isdigit() else name


class AirflowStack:
    """``airflow api-server``, ``scheduler``, ``dag-processor`` and ``triggerer`` as separate processes.

    :param dags_folder: the DAG files to serve.
    :param home: AIRFLOW_HOME (created if missing); default a temporary folder, removed by `stop`
        unless the start failed (its logs are named in the error).
    :param sql_alchemy_conn: metadata DB URL of a database of yours; default SQLite in the home.
    :param database: ``sqlite`` (the default, in the home) or ``postgres``: a PostgreSQL server
        the stack starts and stops itself (`gang_stack.postgres`), as production Airflow runs on.
    :param schedulers, triggerers: how many of each (more than one needs PostgreSQL).
    :param executor: ``local`` (LocalExecutor in the scheduler) or ``celery``: CeleryExecutor with
        a Redis broker the stack starts (`gang_stack.redis_broker`) and ``celery_workers``
        ``airflow celery worker`` processes of ``worker_concurrency`` slots each; needs PostgreSQL
        (Celery keeps its results in the metadata database).
    :param kubeconfig: sets ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` to a connection using this file.
    :param extra_env: more variables for every component (``AIRFLOW_CONN_*``, ``AIRFLOW__GANG__*``...);
        they win over the stack's own settings.
    :param port: API server port on 127.0.0.1 (0: a free one).
    :param username, password: the simple auth manager's admin user.
    :param parallelism: LocalExecutor slots (task instances running at once).
    :param startup_timeout: seconds for ``db migrate`` plus every part becoming healthy.
    :param stop_grace: seconds between SIGTERM and SIGKILL when stopping.

    Process faults: ``stack.kill("triggerer")`` SIGKILLs a component with every process it
    started (for the triggerer its trigger runner and log server, for the scheduler its executor
    workers and their task processes), as losing its machine or pod would, and returns once all
    are gone; another signal (``stack.kill("scheduler", signal.SIGTERM)``) goes to the main
    process alone, and what is left when it exits or after ``stop_grace`` gets SIGKILL.
    ``stack.start_component("triggerer")`` starts it again (its log continues) and returns once
    its own heartbeat in ``/api/v2/monitor/health`` is newer than the restart; the others need
    not be healthy then (a triggerer killed for good turns unhealthy after 30 s). Airflow hands
    the triggers of a killed triggerer to a live one only when the dead one's last heartbeat is
    ``[triggerer] triggerer_health_check_threshold`` (30 s) old.
    """

    def __init__(
        self,
        dags_folder: str | Path,
        *,
        home: str | Path | None = None,
        sql_alchemy_conn: str | None = None,
        database: Literal["sqlite", "postgres"] = "sqlite",
        schedulers: int = 1,
        triggerers: int = 1,
        executor: Literal["local", "celery"] = "local",
        celery_workers: int = 2,
        worker_concurrency: int = 4,
        kubeconfig: str | Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        port: int = 0,
        username: str = "admin",
        password: str = "admin",
        parallelism: int = 8,
        startup_timeout: float = 180.0,
        stop_grace: float = 15.0,
    ) -> None:
        self.dags_folder = Path(dags_folder).resolve()
        self._given_home = Path(home).resolve() if home is not None else None
        if sql_alchemy_conn is not None and database != "sqlite":
            raise StackError("pass either sql_alchemy_conn (your own database) or database, not both")
        self._sql_alchemy_conn = sql_alchemy_conn
        self._postgres = PostgresDatabase() if database == "postgres" else None
        if (schedulers > 1 or triggerers > 1) and database == "sqlite" and sql_alchemy_conn is None:
            raise StackError(
                "two schedulers or triggerers need a database with row locks: database='postgres'"
            )
        if executor == "celery" and database == "sqlite" and sql_alchemy_conn is None:
            raise StackError("the CeleryExecutor needs a database other than SQLite: database='postgres'")
        if executor == "celery" and celery_workers < 1:
            raise StackError("the CeleryExecutor needs at least one celery worker")
        self.executor = executor
        self._broker = RedisBroker() if executor == "celery" else None
        self.worker_concurrency = worker_concurrency
        self.component_names = component_names(
            schedulers, triggerers, celery_workers if executor == "celery" else 0
        )
        # The log server port of each extra scheduler, triggerer or celery worker (the first
        # ones' are settings').
        self._log_ports: dict[str, int] = {}
        env = dict(extra_env or {})
        if kubeconfig is not None:
            env.setdefault("AIRFLOW_CONN_KUBERNETES_DEFAULT", kubernetes_connection(kubeconfig))
        self._extra_env = env
        self._port = port
        self.username = username
        self.password = password
        self.parallelism = parallelism
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.stack_id = uuid.uuid4().hex
        self.components: dict[str, Component] = {}
        self.startup_seconds: float | None = None
        # After stop(): processes that ignored SIGTERM for stop_grace seconds (then got SIGKILL),
        # and any still alive at the end (normally none).
        self.killed_on_stop: list[str] = []
        self.leftovers: list[str] = []
        self._settings: StackSettings | None = None
        self._client: AirflowClient | None = None
        self._lock = threading.Lock()
        self._temporary_home = False
        # Between a successful start() and stop(): what start_component needs, even when every
        # component has been killed.
        self._started = False

    # What callers use
    @property
    def settings(self) -> StackSettings:
        if self._settings is None:
            raise StackError("the stack is not started: call start() or use it as a context manager")
        return self._settings

    @property
    def home(self) -> Path:
        return self.settings.home

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the UI and the REST API."""
        return self.settings.url

    @property
    def log_dir(self) -> Path:
        return self.home / LOG_DIR

    @property
    def client(self) -> AirflowClient:
        """The REST client of this stack, signed in as the admin user."""
        if self._client is None:
            self._client = AirflowClient(self.url, self.username, self.password)
        return self._client

    def environment(self) -> dict[str, str]:
        """The components' environment (for running more ``airflow`` commands against the stack)."""
        return self.settings.environment()

    def component_log(self, name: str) -> str:
        """The text of one component's log: ``api-server``, ``scheduler``, ``dag-processor``,
        ``triggerer`` or ``db-migrate``."""
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            raise StackError(f"no log for {name!r} in {self.log_dir}")
        return path.read_text(encoding="utf-8", errors="replace")

    def pids(self) -> list[int]:
        """The live processes of the stack: components, their workers, task processes."""
        return sorted(stack_processes(component.pid for component in self.components.values()))

    @property
    def running(self) -> bool:
        """Every component started and alive (False while one is killed)."""
        return set(self.components) == set(self.component_names) and all(
            c.running() for c in self.components.values()
        )

    def __enter__(self) -> AirflowStack:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    # Starting
    def start(self) -> AirflowStack:
        """Migrate the DB, start the four components, return once all are healthy (else `StackError`)."""
        if self._started or self.components:
            raise StackError("the stack is already running")
        began = time.monotonic()
        self._settings = self._prepare_settings()
        atexit.register(self.stop)
        try:
            env = self.settings.environment()
            self._migrate(env, deadline=began + self.startup_timeout)
            since = datetime.now(UTC)
            for name in self.component_names:
                self.components[name] = start_component(
                    name,
                    self._command(name),
                    self._environment_of(name),
                    self.home,
                    self.log_dir / f"{name}.log",
                )
            self._wait_healthy(since, deadline=began + self.startup_timeout, timeout=self.startup_timeout)
            self._wait_workers(self.celery_workers, deadline=began + self.startup_timeout)
            self.client.token(refresh=True)
        except BaseException:
            self._temporary_home = False  # keep the logs the error names
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self._started = True
        return self

    def _prepare_settings(self) -> StackSettings:
        if not self.dags_folder.is_dir():
            raise StackError(f"dags folder {self.dags_folder} does not exist")
        if self._port and not port_is_free(self._port):
            raise StackError(f"port {self._port} on 127.0.0.1 is in use; choose another one")
        if self._given_home is None:
            home = Path(tempfile.mkdtemp(prefix="airflow-stack-"))
            self._temporary_home = True
        else:
            home = self._given_home
            home.mkdir(parents=True, exist_ok=True)
        (home / LOG_DIR).mkdir(exist_ok=True)
        return StackSettings(
            home=home,
            dags_folder=self.dags_folder,
            port=self._port or free_port(),
            sql_alchemy_conn=self._postgres.start() if self._postgres else self._sql_alchemy_conn,
            broker_url=self._broker.start() if self._broker else None,
            worker_concurrency=self.worker_concurrency,
            username=self.username,
            password=self.password,
            parallelism=self.parallelism,
            worker_log_port=free_port(),
            trigger_log_port=free_port(),
            stack_id=self.stack_id,
            extra_env=self._extra_env,
        )

    def _command(self, name: str) -> list[str]:
        airflow = str(airflow_executable())
        if name == "api-server":
            port = str(self.settings.port)
            return [airflow, "api-server", "--host", self.settings.host, "--port", port, "--workers", "1"]
        if kind_of(name) == WORKER:
            return worker_command(airflow, name, self.worker_concurrency)
        return [airflow, kind_of(name)]

    def _environment_of(self, name: str) -> dict[str, str]:
        """The stack's environment, with a log server port of its own for an extra scheduler,
        triggerer or celery worker (two on one machine would fight over one). The first celery
        worker takes the scheduler's: under the CeleryExecutor the scheduler serves no logs."""
        env = self.settings.environment()
        kind = kind_of(name)
        if kind != name:
            port = self._log_ports.setdefault(name, free_port())
            env[f"AIRFLOW__LOGGING__{REPLICABLE[kind].upper()}"] = str(port)
        return env

    def _migrate(self, env: dict[str, str], deadline: float) -> None:
        log_path = self.log_dir / "db-migrate.log"
        with log_path.open("wb") as output:
            try:
                result = subprocess.run(
                    [str(airflow_executable()), "db", "migrate"],
                    cwd=self.home,
                    env=env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=max(1.0, deadline - time.monotonic()),
                    check=False,
                )
            except subprocess.TimeoutExpired as error:
                raise StackError(f"airflow db migrate overran; see {log_path}") from error
        if result.returncode != 0:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise StackError(f"airflow db migrate failed ({result.returncode}):\n{tail}")

    def _wait_healthy(
        self,
        since: datetime,
        deadline: float,
        timeout: float,
        parts: Collection[str] = tuple(HEALTH_PARTS),
        watched: Collection[str] | None = None,
    ) -> None:
        """The ``parts`` healthy, with heartbeats from this start (not from an earlier one in the DB).

        ``watched`` (default: all) are the components whose exit ends the wait with `StackError`.
        """
        last: Any = "no answer yet"
        while True:
            dead = [
                c
                for c in self.components.values()
                if not c.running() and (watched is None or c.name in watched)
            ]
            if dead:
                names = ", ".join(f"{c.name} (exit code {c.process.returncode})" for c in dead)
                raise StackError(f"Airflow component exited during startup: {names}\n{self._log_tails(dead)}")
            try:
                last = self.client.health()
                if _all_healthy(last, since, parts):
                    return
            except (httpx.HTTPError, ValueError) as error:
                last = repr(error)
            if time.monotonic() > deadline:
                raise StackError(
                    f"Airflow not healthy within {timeout:.0f}s; last health: {last}\n{self._log_tails()}"
                )
            time.sleep(0.5)

    @property
    def celery_workers(self) -> tuple[str, ...]:
        """The celery worker components (none under the LocalExecutor)."""
        return tuple(name for name in self.component_names if kind_of(name) == WORKER)

    def _wait_workers(self, names: Collection[str], deadline: float) -> None:
        """Return once each celery worker of ``names`` answers a control ping (else `StackError`)."""
        if not names or self._broker is None:
            return
        while True:
            dead = [self.components[name] for name in names if not self.components[name].running()]
            if dead:
                raise StackError(f"celery worker exited during startup\n{self._log_tails(dead)}")
            answering = workers_answering(self._broker.url, names)
            if answering == set(names):
                return
            if time.monotonic() > deadline:
                missing = sorted(set(names) - answering)
                raise StackError(f"celery workers {missing} never answered a ping\n{self._log_tails()}")
            time.sleep(0.5)

    def _log_tails(self, first: list[Component] | None = None) -> str:
        """The end of each component's log, those in ``first`` (the ones that failed) first."""
        ordered = [*(first or []), *(c for c in self.components.values() if c not in (first or []))]
        return "\n".join(f"--- {c.name} ({c.log_path}), last lines:\n{c.log_tail()}" for c in ordered)

    # Process faults
    def kill(self, name: str, signum: int = signal.SIGKILL) -> list[str]:
        """End component ``name`` with ``signum``; return once none of its processes is left.

        ``SIGKILL`` (the default) kills the component's every process at once, as losing its
        machine or pod does; another signal goes to its main process, and what is left when that
        exits or after ``stop_grace`` seconds gets SIGKILL. Returns the processes that got
        SIGKILL (``"pid: command line"``). The component stays down until `start_component`.
        """
        self._check_name(name)
        with self._lock:
            component = self.components.get(name)
            if component is None:
                raise StackError(f"{name} is not running (not started, killed, or the stack is stopped)")
            report = kill_component(component, signum, self.stop_grace)
            del self.components[name]
        if report.left:
            raise StackError(f"killing {name} left processes alive: {report.left}")
        return report.killed

    def start_component(self, name: str, timeout: float | None = None) -> Component:
        """Start component ``name`` again after `kill`; return once it is healthy.

        Healthy: ``/api/v2/monitor/health`` answers with the metadatabase healthy and, for the
        scheduler, triggerer and dag-processor, this component's heartbeat is newer than the
        restart; a celery worker answers a control ping. Its log continues the earlier one.
        ``timeout`` defaults to ``startup_timeout``.
        """
        self._check_name(name)
        limit = self.startup_timeout if timeout is None else timeout
        with self._lock:
            if not self._started:
                raise StackError("the stack is not started: call start() or use it as a context manager")
            if name in self.components:
                raise StackError(f"{name} is already running: kill() it first")
            since = datetime.now(UTC)
            component = start_component(
                name,
                self._command(name),
                self._environment_of(name),
                self.home,
                self.log_dir / f"{name}.log",
                append=True,
            )
            self.components[name] = component
        if kind_of(name) == WORKER:
            self._wait_workers([name], deadline=time.monotonic() + limit)
            return component
        part = HEALTH_PART_OF.get(kind_of(name))
        self._wait_healthy(
            since,
            deadline=time.monotonic() + limit,
            timeout=limit,
            parts=[part] if part else [],
            watched=[name],
        )
        return component

    def _check_name(self, name: str) -> None:
        if name not in self.component_names:
            raise StackError(f"no component {name!r}: the stack runs {', '.join(self.component_names)}")

    # Stopping
    def stop(self) -> None:
        """Stop every process the stack started (SIGTERM, then SIGKILL after ``stop_grace``). Idempotent."""
        with self._lock:
            self._started = False
            atexit.unregister(self.stop)
            if self._client is not None:
                self._client.close()
                self._client = None
            if self.components:
                report = stop_components(list(self.components.values()), self.stop_grace)
                self.killed_on_stop, self.leftovers = report.killed, report.left
                self.components = {}
            if self._postgres is not None:
                self._postgres.stop()
            if self._broker is not None:
                self._broker.stop()
            if self._temporary_home and self._settings is not None:
                shutil.rmtree(self._settings.home, ignore_errors=True)
                self._temporary_home = False


def _all_healthy(health: Any, since: datetime, parts: Collection[str] = tuple(HEALTH_PARTS)) -> bool:
    """The metadatabase and each of ``parts`` healthy, each part's heartbeat not older than ``since``."""
    if not isinstance(health, dict):
        return False
    if (health.get("metadatabase") or {}).get("status") != "healthy":
        return False
    for part in parts:
        heartbeat_key = HEALTH_PARTS[part]
        info = health.get(part) or {}
        if info.get("status") != "healthy" or not info.get(heartbeat_key):
            return False
        heartbeat = datetime.fromisoformat(str(info[heartbeat_key]))
        if heartbeat.tzinfo is None:
            heartbeat = heartbeat.replace(tzinfo=UTC)
        if heartbeat < since:
            return False
    return True
