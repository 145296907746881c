"""The parts of `bench_triggerer.py` and `bench_triggerer_fleet.py` that are not the measurement itself.

- `prepare_environment`: a temporary ``AIRFLOW_HOME`` (SQLite metadata DB, or the PostgreSQL one
  the caller started, task logs), set in ``os.environ`` before anything imports Airflow, so the
  benchmark and the ``airflow triggerer`` processes it starts share one database and one Fernet key,
  and nothing touches ``~/airflow``.
- The cluster side: the ``bench`` queue's capability, jobs submitted as the operator submits them
  (`submit_all`), the triggers their deferrals leave (`make_triggers`), a namespace's deletion.
- `AirflowDatabase`: ``airflow db migrate``, the benchmark's DAG serialized into the DB, and deferred
  task instances created through Airflow's ORM, each with its `Trigger` row, as a worker's deferral
  leaves them (no scheduler runs, so nothing resumes them).
- `Triggerer`: one real ``airflow triggerer`` process (its supervisor, trigger runner and log
  server), its environment (`triggerer_environment`), resident memory and CPU time, a clean stop,
  and what its own log says (`triggerer_log_lines`).
- `GroundTruth`: its own client's list + watch of one namespace's PyTorchJobs, PodGroups and pods,
  applying the provider's `gang_status` on every event: when each gang was admitted and finished.
- `read_trigger_logs`: what each trigger wrote into its task instance's trigger log (all of them, or
  those one triggerer wrote: the file name carries its job id).
- `request_counts` / `open_watches`: the API server's own counters (``GET /sim/v1/metrics``).

Nothing here imports Airflow at module level: the importing script sets the environment first.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
import psutil  # type: ignore[import-untyped]
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from sim_process import sim_metrics  # beside this module

from airflow_gang.model.gang_state import gang_status

JsonDict = dict[str, Any]
HOME_VARIABLE = "AIRFLOW_GANG_BENCH_TRIGGERER_HOME"
DAG_ID = "bench_triggerer"
TASK_ID = "train"
GANG_SCHEDULING = "provider"
QUEUE = "bench"
CONN_ID = "kubernetes_default"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
KINDS = {  # plural -> (group, version); "" is the core group
    "pytorchjobs": ("kubeflow.org", "v1"),
    "podgroups": ("scheduling.volcano.sh", "v1beta1"),
    "pods": ("", "v1"),
}
TRUTH_WATCH_SECONDS = 3600  # longer than any phase: the ground-truth watches never restart
# The benchmark's DAG: one mapped deferrable task. Only its serialized form matters (the triggerer
# reads it for each trigger's task instance); no scheduler ever runs it.
DAG_FILE = f"""
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("{DAG_ID}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator.partial(
        task_id="{TASK_ID}", image="ghcr.io/acme/train:1", workers=0,
        resources={{"nvidia.com/gpu": 1}}, deferrable=True, queue="bench",
    ).expand(env=[{{"SWEEP_INDEX": "0"}}])
"""


def utc(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).isoformat()


def parse_time(text: str) -> float:
    """An ISO 8601 time (``Z`` or an offset) as a Unix timestamp."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def kubernetes_connection(kubeconfig: str) -> str:
    """The ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` value for a kubeconfig file."""
    return json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(Path(kubeconfig).resolve())}}
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], bool], limit: float, period: float = 1.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(period)
    return condition()


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 1]."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# --------------------------------------------------------------------------------------------
# Cluster side: queue, jobs, triggers, namespace
# --------------------------------------------------------------------------------------------


def set_queue_capability(api: k8s.ApiClient, gpus: int) -> None:
    """The ``bench`` queue's GPU capability (0 holds every job Pending); retried on conflicts."""
    objects = k8s.CustomObjectsApi(api)
    for _ in range(20):
        queue = objects.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", QUEUE)
        queue["spec"]["capability"] = {"nvidia.com/gpu": str(gpus)}
        try:
            objects.replace_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", QUEUE, queue)
            return
        except ApiException as error:
            if error.status != 409:  # Volcano wrote the queue's status meanwhile
                raise
    raise RuntimeError(f"could not update queue {QUEUE}")


def job_spec(seconds: float) -> Any:
    """One Master of 1 GPU in the ``bench`` queue that runs ``seconds`` (a `GangJobSpec`)."""
    from airflow_gang.spec import GangJobSpec

    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=0,
        resources={"nvidia.com/gpu": 1},
        queue=QUEUE,
        gang_scheduling=GANG_SCHEDULING,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": f"{seconds:g}"}}},
    )


def submit_all(
    kubeconfig: str, namespace: str, run_id: str, names: Sequence[str], seconds: float
) -> list[str]:
    """What the operator submits for each mapped TI (4 threads); returns the jobs' uids."""
    from airflow_gang.hooks.gang import GangJobHook
    from airflow_gang.model.naming import identity_labels

    spec = job_spec(seconds)
    local = threading.local()

    def submit(index: int) -> str:
        if not hasattr(local, "hook"):
            local.hook = GangJobHook(config_file=kubeconfig)
        hook: GangJobHook = local.hook
        name = names[index]
        labels = identity_labels(DAG_ID, TASK_ID, run_id, index, 1)
        podgroup = spec.build_podgroup(name, namespace, labels=labels)
        if podgroup is None:  # pragma: no cover - provider mode always builds one
            raise RuntimeError("no PodGroup built")
        hook.create_podgroup(podgroup, namespace)
        job = hook.create_pytorchjob(spec.build_pytorchjob(name, namespace, labels=labels), namespace)
        hook.set_podgroup_owner(name, namespace, job)
        return str(job["metadata"]["uid"])

    pool = ThreadPoolExecutor(4)
    try:
        return list(pool.map(submit, range(len(names))))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on Ctrl-C: no more submissions


def make_triggers(
    design: str, namespace: str, names: Sequence[str], uids: Sequence[str], poll: float
) -> list[Any]:
    """The `GangJobTrigger` each submitted job's deferral leaves (``watch=design``)."""
    from airflow_gang.hooks.gang import GangJobHook
    from airflow_gang.triggers.gang import GangJobTrigger

    hook_kwargs = GangJobHook(conn_id=CONN_ID).async_hook_kwargs()  # what the operator hands over
    submitted = utc(time.time())
    return [
        GangJobTrigger(
            name,
            namespace,
            uid,
            wait_for="both",
            gang_scheduling=GANG_SCHEDULING,
            submitted_at=submitted,
            poll_interval=poll,
            kubernetes_conn_id=CONN_ID,
            hook_kwargs=hook_kwargs,
            watch=design,  # type: ignore[arg-type]
        )
        for name, uid in zip(names, uids, strict=True)
    ]


def delete_namespace(api: k8s.ApiClient, namespace: str, timeout: float) -> bool:
    """Delete a namespace (its jobs, PodGroups and pods go with it); True once gone."""
    core = k8s.CoreV1Api(api)
    try:
        core.delete_namespace(namespace)
    except ApiException as error:
        if error.status != 404:
            raise

    def gone() -> bool:
        try:
            core.read_namespace(namespace)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    return wait_until(gone, timeout)


# --------------------------------------------------------------------------------------------
# Airflow home and metadata database
# --------------------------------------------------------------------------------------------


def prepare_environment(sql_alchemy_conn: str | None = None) -> Path:
    """Create (or, in a child process, reuse) the benchmark's ``AIRFLOW_HOME`` and point Airflow at it.

    Inherited ``AIRFLOW__*`` settings and ``AIRFLOW_CONFIG`` are dropped: the benchmark decides.
    Child processes (the spawned cluster) inherit the variables and so reuse the same home. The
    metadata DB is SQLite in the home unless ``sql_alchemy_conn`` names another (a PostgreSQL
    server the caller started before importing Airflow).
    """
    home = Path(os.environ.get(HOME_VARIABLE) or tempfile.mkdtemp(prefix="bench-triggerer-"))
    os.environ[HOME_VARIABLE] = str(home)
    for key in [key for key in os.environ if key.startswith("AIRFLOW__")]:
        del os.environ[key]
    os.environ.pop("AIRFLOW_CONFIG", None)
    fernet = (
        os.environ.get("AIRFLOW_GANG_BENCH_FERNET_KEY") or base64.urlsafe_b64encode(os.urandom(32)).decode()
    )
    os.environ["AIRFLOW_GANG_BENCH_FERNET_KEY"] = fernet
    settings = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__FERNET_KEY": fernet,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn or f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        # The benchmark's own output stays a table; the triggerer gets INFO back (see Triggerer).
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
    os.environ.update(settings)
    return home


class AirflowDatabase:
    """The metadata DB of the benchmark's home: migrated, the DAG serialized, deferred TIs created."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def migrate(self) -> None:
        airflow = Path(sys.executable).parent / "airflow"
        result = subprocess.run(
            [str(airflow), "db", "migrate"],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ),
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{result.stderr[-3000:]}")

    def sync_dag(self) -> None:
        """Write the DAG file and serialize it into the DB, as the dag-processor would."""
        from airflow.dag_processing.bundles.manager import DagBundlesManager
        from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

        folder = self.home / "dags"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{DAG_ID}.py").write_text(DAG_FILE, encoding="utf-8")
        manager = DagBundlesManager()  # type: ignore[no-untyped-call]
        manager.sync_bundles_to_db()
        for bundle in manager.get_all_dag_bundles():
            if not bundle.is_initialized:
                bundle.initialize()
            dagbag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
            if dagbag.import_errors:
                raise RuntimeError(f"the benchmark's DAG does not import: {dagbag.import_errors}")
            sync_bag_to_db(dagbag, bundle.name, bundle.version)

    def create_deferred(self, run_id: str, triggers: Sequence[Any], *, batch: int | None = None) -> None:
        """One DagRun and, for each trigger, the mapped TI ``map_index=i`` (try 1) deferred on it.

        What a worker's deferral leaves behind: state ``deferred``, ``next_method``, a `Trigger`
        row (kwargs encrypted) the triggerer picks up. One transaction, so the triggerer sees all
        of them at once; with ``batch``, one commit per ``batch`` TIs instead (thousands of them
        are then picked up while the rest are written, as thousands of workers' deferrals are).
        The `Trigger` rows of a batch go in with one flush (multi-row inserts).
        """
        from airflow.models.dagbag import DBDagBag
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import Trigger
        from airflow.utils.session import create_session
        from airflow.utils.state import DagRunState, TaskInstanceState
        from airflow.utils.types import DagRunTriggeredByType, DagRunType
        from sqlalchemy import delete, select

        with create_session() as session:
            dag = DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)
            if dag is None:
                raise RuntimeError(f"DAG {DAG_ID} is not serialized")
            dag.create_dagrun(
                run_id=run_id,
                run_after=dt.datetime.now(dt.UTC),
                run_type=DagRunType.MANUAL,
                triggered_by=DagRunTriggeredByType.TEST,
                state=DagRunState.RUNNING,
                session=session,
            )
            version = session.scalars(
                select(TaskInstance.dag_version_id).where(
                    TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id
                )
            ).first()
            # The run created the task's TIs of its literal expansion: replace them with ours.
            session.execute(
                delete(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id)
            )
            task = dag.get_task(TASK_ID)
            size = batch or max(1, len(triggers))
            for start in range(0, len(triggers), size):
                rows = [Trigger.from_object(trigger) for trigger in triggers[start : start + size]]
                session.add_all(rows)
                session.flush()
                for map_index, row in enumerate(rows, start):
                    ti = TaskInstance(task, dag_version_id=version, run_id=run_id, map_index=map_index)
                    ti.try_number = 1
                    ti.state = TaskInstanceState.DEFERRED
                    ti.trigger_id = row.id
                    ti.next_method = "execute_complete"
                    ti.next_kwargs = {}
                    session.add(ti)
                if batch:
                    session.commit()

    def abandon(self, run_id: str) -> int:
        """Take the run's still deferred TIs off their triggers (state ``removed``) and delete those
        `Trigger` rows, so the next phase's triggerer does not pick them up; returns how many."""
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import Trigger
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import delete, select, update

        with create_session() as session:
            waiting = (
                TaskInstance.dag_id == DAG_ID,
                TaskInstance.run_id == run_id,
                TaskInstance.state == TaskInstanceState.DEFERRED,
            )
            trigger_ids = [i for i in session.scalars(select(TaskInstance.trigger_id).where(*waiting)) if i]
            session.execute(
                update(TaskInstance).where(*waiting).values(state=TaskInstanceState.REMOVED, trigger_id=None)
            )
            if trigger_ids:
                session.execute(delete(Trigger).where(Trigger.id.in_(trigger_ids)))
        return len(trigger_ids)

    def task_states(self, run_id: str) -> Counter[str]:
        """How many of the run's TIs are in each state (cheap: no payloads)."""
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import func, select

        with create_session() as session:
            rows = session.execute(
                select(TaskInstance.state, func.count())
                .where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id)
                .group_by(TaskInstance.state)
            ).all()
        return Counter({str(state): int(count) for state, count in rows})

    def resumed(self, run_id: str) -> dict[int, Resumed]:
        """Every TI of the run that an event moved out of ``deferred``: when, and with which event."""
        from airflow.models.taskinstance import TaskInstance
        from airflow.sdk.serde import deserialize
        from airflow.utils.session import create_session
        from sqlalchemy import select

        found: dict[int, Resumed] = {}
        with create_session() as session:
            for ti in session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == DAG_ID,
                    TaskInstance.run_id == run_id,
                    TaskInstance.state != "deferred",
                )
            ):
                event: JsonDict = {}
                with contextlib.suppress(Exception):
                    kwargs: JsonDict = deserialize(dict(ti.next_kwargs or {}))  # type: ignore[assignment]
                    event = dict(kwargs.get("event") or {})
                scheduled = ti.scheduled_dttm.timestamp() if ti.scheduled_dttm else None
                found[ti.map_index] = Resumed(str(ti.state), scheduled, event)
        return found


@dataclass(frozen=True)
class Resumed:
    state: str
    scheduled_at: float | None
    """When the triggerer moved the TI to ``scheduled`` (its DB write)."""
    event: JsonDict


# --------------------------------------------------------------------------------------------
# The triggerer process
# --------------------------------------------------------------------------------------------


def triggerer_environment(kubeconfig: str, capacity: int) -> dict[str, str]:
    """A triggerer's variables: the benchmark's (``os.environ``), the cluster's connection, INFO
    logs, ``[triggerer] capacity``, this directory on ``PYTHONPATH`` (the loop probe's module) and
    a trigger log server port of its own (two triggerers on one machine cannot share one)."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent)
    path = [here, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(
        {
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": kubernetes_connection(kubeconfig),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",  # the triggers' own lines are what we read
            "AIRFLOW__TRIGGERER__CAPACITY": str(capacity),
            "PYTHONPATH": os.pathsep.join(path),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        }
    )
    return env


@dataclass
class TriggererLog:
    """What a triggerer's own log says about its loop."""

    blocked: list[float] = field(default_factory=list)
    """Seconds of each "async thread was blocked for X seconds" warning (nan: unreadable X)."""
    blocked_at: list[float | None] = field(default_factory=list)
    """When each of them was logged (Unix seconds; None: no readable timestamp), same order."""
    errors: int = 0
    """Error lines and tracebacks."""


def long_blocks(
    blocked: Sequence[float],
    blocked_at: Sequence[float | None],
    limit: float,
    cut: float | None,
    starting: bool,
) -> list[float]:
    """The "blocked" warnings of ``limit`` s or longer (nan counts) logged before ``cut``, while the
    triggers started (``starting``), or the others (no ``cut``: none started; no moment: running)."""
    before = cut if cut is not None else float("inf")
    return [
        seconds
        for seconds, moment in zip(blocked, blocked_at, strict=False)
        if not seconds < limit and (moment is not None and moment < before) is starting
    ]


def longest(blocked: Sequence[float]) -> str:
    """``count (max X s)`` of some "blocked" warnings."""
    return f"{len(blocked)} (max {max(blocked):.2f} s)" if blocked else "0"


def triggerer_log_lines(text: str) -> TriggererLog:
    found = TriggererLog()
    for line in text.splitlines():
        if "async thread was blocked for" in line:
            with_seconds = line.split("blocked for", 1)[1].split()[0]
            try:
                found.blocked.append(float(with_seconds))
            except ValueError:
                found.blocked.append(float("nan"))
            try:  # Airflow's console lines start with their ISO 8601 UTC timestamp
                found.blocked_at.append(parse_time(line.split(maxsplit=1)[0]))
            except (ValueError, IndexError):
                found.blocked_at.append(None)
        elif "[error" in line or "Traceback" in line:
            found.errors += 1
    return found


class Triggerer:
    """``airflow triggerer`` in a session of its own, its output in ``log_path``."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.env = dict(env)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        airflow = Path(sys.executable).parent / "airflow"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as output:
            self.process = subprocess.Popen(
                [str(airflow), "triggerer"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float) -> None:
        """Until the supervisor runs its loop and its trigger runner subprocess exists."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"the triggerer exited:\n{self.log_text()[-3000:]}")
            if "Starting the triggerer" in self.log_text() and len(self._tree()) >= 3:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the triggerer was not ready within {timeout:.0f} s:\n{self.log_text()[-3000:]}")

    def _tree(self) -> list[psutil.Process]:
        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def rss(self) -> int:
        """Resident bytes of the supervisor, the trigger runner and the log server together."""
        total = 0
        for process in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += process.memory_info().rss
        return total

    def cpu_seconds(self) -> float:
        """CPU time (user + system) its processes still running have used so far."""
        total = 0.0
        for process in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM to the supervisor (it stops its runner and log server); SIGKILL what is left."""
        if self.process is None:
            return
        tree = self._tree()
        if self.running:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)


class RssSampler:
    """Samples a `Triggerer`'s resident memory every ``period`` seconds in a thread."""

    def __init__(self, triggerer: Triggerer, period: float = 0.5) -> None:
        self.triggerer = triggerer
        self.period = period
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.triggerer.rss()))
            self._stop.wait(self.period)

    def peak(self, since: float = 0.0) -> int:
        return max((rss for moment, rss in self.samples if moment >= since), default=0)


# --------------------------------------------------------------------------------------------
# What the triggers wrote
# --------------------------------------------------------------------------------------------


@dataclass
class TriggerLog:
    """One trigger's log (its task instance's ``*.trigger.<job>.log``): the moments that matter."""

    started_at: float | None = None
    first_look_at: float | None = None
    admitted_at: float | None = None
    fired: int = 0
    warnings: list[str] = field(default_factory=list)


def trigger_log_paths(home: Path, run_id: str, job_id: int | None = None) -> dict[int, list[Path]]:
    """Each TI's trigger log files by map index; only those of triggerer job ``job_id`` if given.

    Airflow names them ``attempt=<try>.log.trigger.<triggerer job id>.log``: a trigger that moved
    to another triggerer has one file per triggerer.
    """
    folder = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={TASK_ID}"
    paths: dict[int, list[Path]] = {}
    pattern = f"attempt=1.log.trigger.{'*' if job_id is None else job_id}.log"
    for path in folder.glob(f"map_index=*/{pattern}"):
        index = int(path.parent.name.split("=", 1)[1])
        paths.setdefault(index, []).append(path)
    return paths


def trigger_log_job_id(path: Path) -> int | None:
    """The triggerer job id in a trigger log's file name (None if it is not a number)."""
    tail = path.name.rsplit(".trigger.", 1)[-1].removesuffix(".log")
    return int(tail) if tail.isdigit() else None


def fired_in_triggerer_log(text: str, run_id: str) -> Counter[int]:
    """``Trigger fired event`` lines that reached the triggerer's own log, by map index.

    Airflow 3.3 drops a trigger's log file as soon as the trigger is done, so its last line often
    lands in the triggerer's log instead (console format, ``name='<dag>/<run>/<task>/<index>/<try>
    (ID n)'``).
    """
    pattern = re.compile(
        rf"Trigger fired event.*name='{re.escape(DAG_ID)}/{re.escape(run_id)}/{TASK_ID}/(\d+)/"
    )
    return Counter(int(match.group(1)) for match in pattern.finditer(text))


FIRST_LOOK_MARKS = ('"gang job ', '"gang admitted ', "starting")


def read_trigger_logs(
    home: Path, run_id: str, *, first_look_only: bool = False, job_id: int | None = None
) -> dict[int, TriggerLog]:
    """Parse the JSON lines of every trigger log of ``run_id`` (map index -> `TriggerLog`).

    The timestamps are the trigger runner's own (structlog stamps each record where it is made,
    microseconds, UTC). ``first_look_only`` stops at each file's first status line (cheap polling).
    ``job_id``: only the files the triggerer of that job id wrote.
    """
    logs: dict[int, TriggerLog] = {}
    for index, paths in trigger_log_paths(home, run_id, job_id).items():
        found = logs.setdefault(index, TriggerLog())
        for path in paths:
            with contextlib.suppress(OSError), path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if first_look_only and not any(mark in line for mark in FIRST_LOOK_MARKS):
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # a line being written right now
                    event = str(record.get("event") or "")
                    moment = parse_time(record["timestamp"]) if record.get("timestamp") else None
                    if event.startswith("trigger ") and event.endswith(" starting"):
                        found.started_at = found.started_at or moment
                    elif event.startswith("gang job "):
                        found.first_look_at = found.first_look_at or moment
                        if first_look_only:
                            break
                    elif event.startswith("gang admitted "):  # a first look may see it admitted
                        found.admitted_at = found.admitted_at or moment
                        found.first_look_at = found.first_look_at or moment
                        if first_look_only:
                            break
                    elif event == "Trigger fired event":
                        found.fired += 1
                    if record.get("level") in ("warning", "error", "critical"):
                        found.warnings.append(event[:200])
    return logs


# --------------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------------


class GroundTruth:
    """Raw watches of one namespace's jobs, PodGroups and pods; `gang_status` on every event.

    Runs in its own thread with its own event loop and client (User-Agent ``user_agent``). The
    moment recorded is the wall clock (``time.time()``) when the change's line arrived, before it
    is parsed: the first event after which the provider's admission rule holds, and the first
    after which the job is finished.
    """

    def __init__(self, kubeconfig: str, namespace: str, user_agent: str) -> None:
        self._kubeconfig = kubeconfig
        self.namespace = namespace
        self._user_agent = user_agent
        self._objects: dict[str, dict[str, JsonDict]] = {plural: {} for plural in KINDS}
        self._pods_of: dict[str, dict[str, JsonDict]] = {}
        self._lock = threading.Lock()
        self._admitted: dict[str, float] = {}
        self._finished: dict[str, tuple[float, str]] = {}
        self._pending: set[str] = set()
        self.events = 0
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="bench-ground-truth", daemon=True)

    # -- caller's side ------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout) or self.error is not None:
            raise RuntimeError(f"ground-truth watches did not start: {self.error!r}")

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def admitted_at(self, name: str) -> float | None:
        with self._lock:
            return self._admitted.get(name)

    def finished(self, name: str) -> tuple[float, str] | None:
        """(moment, final phase) of a finished job, else None."""
        with self._lock:
            return self._finished.get(name)

    def counts(self, names: Sequence[str]) -> tuple[int, int, int]:
        """Of ``names``: (queued: PodGroup marked Pending by Volcano and a pod exists, admitted, finished)."""
        with self._lock:
            queued = sum(1 for name in names if name in self._pending and self._pods_of.get(name))
            admitted = sum(1 for name in names if name in self._admitted)
            finished = sum(1 for name in names if name in self._finished)
        return queued, admitted, finished

    # -- watcher thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._watch_all())
        except BaseException as error:  # surfaced by start() or in the report
            self.error = error
            self._ready.set()

    async def _watch_all(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        api = await aconfig.new_client_from_config(config_file=self._kubeconfig)
        api.user_agent = self._user_agent
        try:
            streams = [await self._open(api, plural) for plural in KINDS]
            self._ready.set()
            readers = [
                asyncio.create_task(self._consume(plural, stream))
                for plural, stream in zip(KINDS, streams, strict=True)
            ]
            stopping = asyncio.create_task(self._stopping.wait())
            done, _ = await asyncio.wait([stopping, *readers], return_when=asyncio.FIRST_COMPLETED)
            for task in [stopping, *readers]:
                task.cancel()
            await asyncio.gather(stopping, *readers, return_exceptions=True)
            for task in done:
                if task is not stopping and not task.cancelled() and task.exception() is not None:
                    self.error = task.exception()
            for stream in streams:
                stream.release()
        finally:
            await api.close()

    async def _open(self, api: aclient.ApiClient, plural: str) -> Any:
        listed = json.loads(await (await self._request(api, plural)).read())
        for item in listed.get("items") or []:
            self._store(plural, "ADDED", item)
        version = listed["metadata"]["resourceVersion"]
        return await self._request(
            api,
            plural,
            watch=True,
            resource_version=version,
            timeout_seconds=TRUTH_WATCH_SECONDS,
            allow_watch_bookmarks=True,
        )

    def _request(self, api: aclient.ApiClient, plural: str, **params: Any) -> Any:
        group, version = KINDS[plural]
        if not group:
            return aclient.CoreV1Api(api).list_namespaced_pod(
                self.namespace, _preload_content=False, **params
            )
        return aclient.CustomObjectsApi(api).list_namespaced_custom_object(
            group, version, self.namespace, plural, _preload_content=False, **params
        )

    async def _consume(self, plural: str, stream: Any) -> None:
        async for line in stream.content:
            seen = time.time()  # before parsing: the moment the change reached us
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                raise RuntimeError(f"ground-truth watch of {plural} failed: {event.get('object')}")
            if event.get("type") == "BOOKMARK":
                continue
            self.events += 1
            job = self._store(plural, event["type"], event["object"])
            if job:
                self._evaluate(job, seen)
        raise RuntimeError(f"ground-truth watch of {plural} ended early")

    def _store(self, plural: str, kind_of_event: str, obj: JsonDict) -> str | None:
        meta = obj["metadata"]
        name = str(meta["name"])
        job = (meta.get("labels") or {}).get(JOB_NAME_LABEL) if plural == "pods" else name
        with self._lock:
            if kind_of_event == "DELETED":
                self._objects[plural].pop(name, None)
                if plural == "pods" and job:
                    self._pods_of.get(job, {}).pop(name, None)
            else:
                self._objects[plural][name] = obj
                if plural == "pods" and job:
                    self._pods_of.setdefault(job, {})[name] = obj
            if plural == "podgroups" and (obj.get("status") or {}).get("phase") == "Pending":
                self._pending.add(name)
        return str(job) if job else None

    def _evaluate(self, name: str, seen: float) -> None:
        with self._lock:
            if name in self._finished:
                return
            job = self._objects["pytorchjobs"].get(name)
            podgroup = self._objects["podgroups"].get(name)
            pods = list(self._pods_of.get(name, {}).values())
            status = gang_status(job, podgroup, pods, GANG_SCHEDULING)
            if job is None:
                return  # not created yet, or deleted: neither is a moment we measure
            if status.admitted and name not in self._admitted:
                self._admitted[name] = seen
            if status.finished:
                self._admitted.setdefault(name, seen)
                self._finished[name] = (seen, status.phase.value)


# --------------------------------------------------------------------------------------------
# The API server's counters
# --------------------------------------------------------------------------------------------


def request_counts(api: k8s.ApiClient, user_agent: str) -> Counter[tuple[str, str]]:
    """Requests so far from ``user_agent``, by (verb, resource); a watch counts once when opened."""
    counts: Counter[tuple[str, str]] = Counter()
    for entry in sim_metrics(api)["requests"]:
        if entry["userAgent"] == user_agent:
            counts[entry["verb"], entry["resource"]] += int(entry["count"])
    return counts


def open_watches(api: k8s.ApiClient, user_agent: str) -> int:
    """Watch streams of ``user_agent`` open at the API server right now."""
    return sum(int(e["count"]) for e in sim_metrics(api)["openWatches"] if e["userAgent"] == user_agent)


def simulator_cpu(cpu_seconds: float | None, seconds: float | None) -> str:
    """The simulated cluster's CPU over a span, as a share of one core (for a report line)."""
    if cpu_seconds is None or not seconds:
        return "simulator CPU n/a"
    share = 100 * cpu_seconds / seconds
    return f"simulator CPU {cpu_seconds:.0f} s in {seconds:.0f} s ({share:.0f}% of one core)"


def verdict(value: float | None, limit: float) -> str:
    """A target's verdict: ``n/a`` without a value, ``met`` at or under ``limit``, else ``MISSED``."""
    return "n/a" if value is None else "met" if value <= limit else "MISSED"
