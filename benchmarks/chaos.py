"""Seeded chaos lifecycles: many DAG runs under API faults, outages, an external deletion and a
triggerer kill, checked against the provider's deletion rule.

The rule: the provider deletes a job only for (a) its admission timeout, (b) a person's kill,
mark-failed or clear of the task, (c) the task's own give-up (``execution_timeout``), (d)
``delete_on_finish`` once the job finished; never because it could not see it.

`run_chaos` drives N lifecycles (one DAG run each, at most K at once) against a running
`SimCluster` and `AirflowStack` whose dags folder holds `CHAOS_DAG_FILES`, while the cluster
injects faults, and returns a `ChaosReport`. What it measures comes from a watch of its own on
every PyTorchJob (`JobWatch`: it resumes from its last resourceVersion, so no ADDED/DELETED is lost),
the task instances over REST, and the cluster at the end. The benchmark
(``benchmarks/bench_chaos.py``) and the CI test (``tests/realstack/test_chaos.py``, which loads
this module by its path: benchmarks/ is not a package) share it.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.model.naming import (
    DAG_ID_LABEL,
    MAP_INDEX_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
    safe_label_value,
)
from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from gang_stack.errors import StackError

JsonDict = dict[str, Any]
Outcome = Literal["success", "replica_failure", "admission_timeout_retry", "kill", "clear", "victim"]
NAMESPACE = "default"
PYTORCHJOBS = ("kubeflow.org", "v1", NAMESPACE, "pytorchjobs")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups")
TASK_ID = "train"
MODES = ("sync", "deferrable")
GANGS = ("provider", "training-operator")
LIFECYCLE_LABEL = "chaos.airflow-gang.io/lifecycle"
VICTIM_LABEL = "chaos.airflow-gang.io/victim"
WATCH_USER_AGENT = "airflow-gang-chaos-watch/1.0"
FINISHED_RUN = frozenset({"success", "failed"})

# --- the DAGs -----------------------------------------------------------------------------------

ADMISSION_TIMEOUT = 8.0  # seconds, of the admission DAGs
# Well above the outage windows (5-20 s): a wait rides them out, it never fails on them.
API_UNAVAILABLE_TIMEOUT = 120.0
# The other DAGs: long enough for a busy pool, short enough to end a run that went wrong.
QUEUE_ADMISSION_TIMEOUT = 600.0

_DAG_TEMPLATE = """
# A chaos DAG (benchmarks/chaos.py): one gang job whose work comes from the run's conf.
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.pytorch_job import PyTorchJobOperator

# One duration per try (a cleared task's second try runs the second one), the last repeats.
DURATION = (
    "{{ dag_run.conf.get('durations', [5])"
    "[[ti.try_number, dag_run.conf.get('durations', [5]) | length] | min - 1] }}"
)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False,
         max_active_runs=64, tags=["chaos"]) as dag:
    PyTorchJobOperator(
        task_id="__TASK_ID__", image="ghcr.io/acme/train:1", workers=1,
        resources={"nvidia.com/gpu": "{{ dag_run.conf.get('gpus', 1) }}"},
        gang_scheduling="__GANG__", deferrable=__DEFERRABLE__, admission_timeout=__ADMISSION__,
        retries=__RETRIES__, retry_delay=dt.timedelta(seconds=1), restart_policy="Never",
        delete_on_finish="always", api_unavailable_timeout=__UNAVAILABLE__, poll_interval=5,
        labels={
            "__LIFECYCLE_LABEL__": "{{ dag_run.conf.get('lifecycle', 'none') }}",
            "__VICTIM_LABEL__": "{{ dag_run.conf.get('victim', 'no') }}",
        },
        pod_template={"metadata": {"annotations": {
            "sim.airflow-gang.io/duration": DURATION,
            "sim.airflow-gang.io/exit-code": "{{ dag_run.conf.get('exit_code', 0) }}",
            "sim.airflow-gang.io/log": "chaos {{ dag_run.conf.get('lifecycle') }} try {{ ti.try_number }}",
        }}},
    )
"""


def dag_id_of(mode: str, gang: str, admission: bool) -> str:
    kind = "chaos_admit" if admission else "chaos"
    return f"{kind}_{mode}_{gang.replace('-', '_')}"


def chaos_dag_source(mode: str, gang: str, admission: bool) -> str:
    """One chaos DAG: fixed mode, gang and retry policy; per-run work from ``dag_run.conf``.

    ``deferrable``, ``admission_timeout`` and ``retries`` are not template fields, hence one DAG
    per mode and separate admission DAGs (short timeout, one retry); ``gang_scheduling`` is one,
    but a DAG per gang mode keeps each DAG's runs alike in the UI. The templated fields
    (``pod_template``, ``replica_resources``, ``labels``) carry the run's work.
    """
    values = {
        "__DAG_ID__": dag_id_of(mode, gang, admission),
        "__TASK_ID__": TASK_ID,
        "__GANG__": gang,
        "__DEFERRABLE__": str(mode == "deferrable"),
        "__ADMISSION__": repr(ADMISSION_TIMEOUT if admission else QUEUE_ADMISSION_TIMEOUT),
        "__RETRIES__": "1" if admission else "0",
        "__UNAVAILABLE__": repr(API_UNAVAILABLE_TIMEOUT),
        "__LIFECYCLE_LABEL__": LIFECYCLE_LABEL,
        "__VICTIM_LABEL__": VICTIM_LABEL,
    }
    source = _DAG_TEMPLATE
    for placeholder, value in values.items():
        source = source.replace(placeholder, value)
    return source


CHAOS_DAG_FILES = {
    dag_id_of(mode, gang, admission): chaos_dag_source(mode, gang, admission)
    for mode in MODES
    for gang in GANGS
    for admission in (False, True)
}

# --- the plan -----------------------------------------------------------------------------------

# Weights of the outcomes after the victim; successes dominate, as in a real pool.
OUTCOME_WEIGHTS: dict[Outcome, int] = {
    "success": 4,
    "replica_failure": 1,
    "admission_timeout_retry": 1,
    "kill": 1,
    "clear": 1,
}
LONG_SECONDS = 60  # the job of a try that is killed or cleared
FAST_SECONDS = 3  # the second try of a cleared task


@dataclass(frozen=True)
class Expected:
    state: str
    jobs_per_try: dict[int, int]
    reason: str | None = None  # an exception name the final try's log must show


@dataclass(frozen=True)
class Lifecycle:
    index: int
    outcome: Outcome
    mode: str
    gang: str
    run_id: str
    conf: JsonDict

    @property
    def dag_id(self) -> str:
        return dag_id_of(self.mode, self.gang, self.outcome == "admission_timeout_retry")

    @property
    def deferrable(self) -> bool:
        return self.mode == "deferrable"

    def expected(self, victim_deleted: bool) -> Expected:
        if self.outcome == "success":
            return Expected("success", {1: 1})
        if self.outcome == "replica_failure":
            return Expected("failed", {1: 1}, "PyTorchJobFailed")
        if self.outcome == "admission_timeout_retry":
            return Expected("failed", {1: 1, 2: 1}, "GangAdmissionTimeout")
        if self.outcome == "kill":
            return Expected("failed", {1: 1})
        if self.outcome == "clear":
            return Expected("success", {1: 1, 2: 1})
        if victim_deleted:
            return Expected("failed", {1: 1}, "GangJobLost")
        return Expected("success", {1: 1})


def plan_lifecycles(
    rng: random.Random, count: int, tag: str, never_fit_gpus: int, victim_seconds: int
) -> list[Lifecycle]:
    """``count`` lifecycles: the victim first (a long success), then seeded outcomes."""
    plan = []
    outcomes = list(OUTCOME_WEIGHTS)
    weights = list(OUTCOME_WEIGHTS.values())
    for index in range(count):
        outcome: Outcome = "victim" if index == 0 else rng.choices(outcomes, weights)[0]
        mode, gang = rng.choice(MODES), rng.choice(GANGS)
        run_id = f"chaos-{tag}-{index:03d}-{outcome.replace('_', '-')}"
        conf: JsonDict = {"lifecycle": run_id, "durations": [rng.randint(3, 8)], "exit_code": 0, "gpus": 1}
        if outcome == "replica_failure":
            conf["exit_code"] = 1
        elif outcome == "admission_timeout_retry":
            conf["gpus"] = never_fit_gpus
        elif outcome == "kill":
            conf["durations"] = [LONG_SECONDS]
        elif outcome == "clear":
            conf["durations"] = [LONG_SECONDS, FAST_SECONDS]
        elif outcome == "victim":
            conf["durations"] = [victim_seconds]
            conf["victim"] = "yes"
        plan.append(Lifecycle(index, outcome, mode, gang, run_id, conf))
    return plan


# --- the faults ---------------------------------------------------------------------------------

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
RESOURCES = (
    "pytorchjobs.kubeflow.org",
    "pytorchjobs.kubeflow.org/status",
    "podgroups.scheduling.volcano.sh",
    "queues.scheduling.volcano.sh",
    "pods",
    "pods/log",
    "events",
)
ERROR_RATE = 0.05
STATUSES = (500, 503, 429)


@dataclass(frozen=True)
class FaultPlan:
    """What the run injects; times in seconds after the spec is applied."""

    spec: JsonDict
    outages: list[tuple[float, float]]
    deletion_at: float
    triggerer_kill_at: float
    triggerer_down: float


def error_rules(rng: random.Random) -> list[JsonDict]:
    """5 % errors on every verb and resource, each pair with its own seeded status.

    The injector lets the first matching rule decide, so a mix of statuses needs disjoint rules;
    the last rule (no verbs, no resources) covers what the pairs do not name.
    """
    rules = [
        {"verbs": [verb], "resources": [resource], "rate": ERROR_RATE, "status": rng.choice(STATUSES)}
        for verb in VERBS
        for resource in RESOURCES
    ]
    rules.append({"rate": ERROR_RATE, "status": rng.choice(STATUSES)})
    for rule in rules:
        if rule["status"] == 429:
            rule["retry_after"] = 1
    return rules


def plan_faults(rng: random.Random, expected_seconds: float, victim_selector: str) -> FaultPlan:
    """Errors, watch cuts, two outages spread over the run, the victim's deletion, a triggerer kill."""
    first_start = rng.uniform(0.15, 0.35) * expected_seconds
    first = (round(first_start, 1), round(rng.uniform(5, 20), 1))
    second_start = max(rng.uniform(0.55, 0.75) * expected_seconds, first[0] + first[1] + 10)
    second = (round(second_start, 1), round(rng.uniform(5, 20), 1))
    deletion_at = round(rng.uniform(30, 40), 1)
    spec = {
        "seed": rng.randrange(1_000_000),
        "errors": error_rules(rng),
        "watches": {"cut_after_seconds": round(rng.uniform(2, 5), 1)},
        "outages": [{"start": start, "duration": length} for start, length in (first, second)],
        "deletions": [{"at": deletion_at, "kind": "pytorchjob", "label_selector": victim_selector}],
    }
    return FaultPlan(
        spec=spec,
        outages=[first, second],
        deletion_at=deletion_at,
        triggerer_kill_at=round(rng.uniform(0.3, 0.6) * expected_seconds, 1),
        triggerer_down=round(rng.uniform(3, 6), 1),
    )


# --- the job watch ------------------------------------------------------------------------------


def outcome_of(job: JsonDict) -> str | None:
    """``Succeeded``/``Failed`` when the job's last true condition says it ended, else None."""
    kind = (last_true_condition(job) or {}).get("type")
    return str(kind) if kind in ("Succeeded", "Failed") else None


def is_running(job: JsonDict) -> bool:
    return (last_true_condition(job) or {}).get("type") == "Running"


@dataclass(frozen=True)
class JobEvent:
    """A PyTorchJob created (ADDED) or gone (DELETED); ``finished`` is its outcome when last seen.

    ``seen`` is ``watch`` for an event the watch delivered, ``list`` for one inferred by
    comparing a fresh list with what the watch knew (its history was gone).
    """

    kind: str
    name: str
    uid: str
    labels: dict[str, str]
    finished: str | None
    at: float
    seen: str

    @property
    def try_number(self) -> int:
        return int(self.labels.get(TRY_NUMBER_LABEL, "0") or 0)

    def key(self) -> tuple[str, ...]:
        """The task instance try the job belongs to."""
        labels = self.labels
        return tuple(
            labels.get(name, "")
            for name in (DAG_ID_LABEL, RUN_ID_LABEL, TASK_ID_LABEL, MAP_INDEX_LABEL, TRY_NUMBER_LABEL)
        )


class JobWatch:
    """Every PyTorchJob ADDED or DELETED in the namespace, through faults and outages.

    It resumes from the last resourceVersion after a cut stream, an error or an outage (the
    server keeps every object and its event history through an outage), so it misses nothing.
    Only when the server no longer has that version (410) does it list again and infer ADDED and
    DELETED from the difference; a job created and deleted inside such a gap would be missed,
    which is why the report counts re-lists and inferred events (and compares the end with a
    final list). Its own User-Agent makes its requests easy to tell apart in the simulator's
    metrics; the fault spec targets it like any other client.
    """

    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None
        self._listed = 0
        self._began = time.monotonic()
        self.events: list[JobEvent] = []
        self.latest: dict[str, JsonDict] = {}  # uid -> the job as last seen
        self.gone: set[str] = set()
        self.relists = 0  # lists after the first: each is a gap the watch could not resume
        self.failures = 0  # watch or list attempts that failed (refused, injected error, cut)

    def start(self) -> JobWatch:
        self._thread = threading.Thread(target=self._run, name="chaos-job-watch", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while self._version is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the chaos job watch could not list PyTorchJobs")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(20)

    def now(self) -> float:
        return time.monotonic() - self._began

    def _client(self) -> k8s.ApiClient:
        """A client of its own: our User-Agent, and no urllib3 retries (the loop retries, quietly:
        during an outage urllib3 would log a warning per refused connection)."""
        apiserver = self._cluster.apiserver
        if apiserver is None:
            raise RuntimeError("the cluster is not running")
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=apiserver.local_kubeconfig_path, client_configuration=configuration
        )
        configuration.retries = 0
        api = k8s.ApiClient(configuration)
        api.user_agent = WATCH_USER_AGENT
        return api

    def _run(self) -> None:
        with self._client() as api:
            custom = k8s.CustomObjectsApi(api)
            while not self._stop.is_set():
                try:
                    if self._version is None:
                        self._relist(custom)
                    self._follow(custom)
                except k8s.ApiException as error:
                    if error.status == 410:  # compacted: list again, infer the difference
                        self._version = None
                    self._pause()
                except Exception:  # refused during an outage, an injected 5xx, a cut connection
                    self._pause()

    def _pause(self) -> None:
        self.failures += 1
        self._stop.wait(0.5)

    def _follow(self, custom: k8s.CustomObjectsApi) -> None:
        stream = k8s_watch.Watch().stream(
            custom.list_namespaced_custom_object,
            *PYTORCHJOBS,
            resource_version=self._version,
            timeout_seconds=10,
            allow_watch_bookmarks=True,
            _request_timeout=(5, 30),
        )
        for event in stream:
            job = event["raw_object"]
            version = (job.get("metadata") or {}).get("resourceVersion")
            if event["type"] != "BOOKMARK":
                self._apply(event["type"], job, "watch")
            if version:
                self._version = version
            if self._stop.is_set():
                return

    def _relist(self, custom: k8s.CustomObjectsApi) -> None:
        listed = custom.list_namespaced_custom_object(*PYTORCHJOBS, _request_timeout=(5, 30))
        present = {job["metadata"]["uid"]: job for job in listed["items"]}
        with self._lock:
            missing = [uid for uid in self.latest if uid not in self.gone and uid not in present]
        for uid in missing:
            self._apply("DELETED", self.latest[uid], "list")
        for job in present.values():
            self._apply("MODIFIED", job, "list")
        self.relists += self._listed
        self._listed = 1
        self._version = listed["metadata"]["resourceVersion"]

    def _apply(self, kind: str, job: JsonDict, seen: str) -> None:
        metadata = job["metadata"]
        uid = metadata["uid"]
        with self._lock:
            known = uid in self.latest
            if kind == "DELETED":
                if uid in self.gone:
                    return
                if not known:  # created and deleted between two looks: still a job
                    self._record("ADDED", job, seen)
                last = job if outcome_of(job) else self.latest.get(uid, job)
                self.latest[uid] = last
                self.gone.add(uid)
                self._record("DELETED", last, seen)
                return
            if uid in self.gone:  # a late MODIFIED replayed after its DELETED
                return
            self.latest[uid] = job
            if not known:
                self._record("ADDED", job, seen)

    def _record(self, kind: str, job: JsonDict, seen: str) -> None:
        metadata = job["metadata"]
        self.events.append(
            JobEvent(
                kind=kind,
                name=metadata["name"],
                uid=metadata["uid"],
                labels=dict(metadata.get("labels") or {}),
                finished=outcome_of(job),
                at=self.now(),
                seen=seen,
            )
        )

    def live_jobs(self, dag_id: str, run_id: str) -> list[JsonDict]:
        with self._lock:
            return [
                job
                for uid, job in self.latest.items()
                if uid not in self.gone
                and (job["metadata"].get("labels") or {}).get(DAG_ID_LABEL) == safe_label_value(dag_id)
                and (job["metadata"].get("labels") or {}).get(RUN_ID_LABEL) == safe_label_value(run_id)
            ]

    def snapshot(self) -> list[JobEvent]:
        with self._lock:
            return list(self.events)

    def disagreements(self, api: k8s.ApiClient) -> list[str]:
        """Jobs the cluster has that the watch thinks gone, or the other way round."""
        listed = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*PYTORCHJOBS)["items"]
        present = {job["metadata"]["uid"]: job["metadata"]["name"] for job in listed}
        with self._lock:
            live = {uid: job["metadata"]["name"] for uid, job in self.latest.items() if uid not in self.gone}
        found = [f"{name}: on the cluster, never seen" for uid, name in present.items() if uid not in live]
        found += [
            f"{name}: seen live, not on the cluster" for uid, name in live.items() if uid not in present
        ]
        return found


# --- driving the lifecycles ---------------------------------------------------------------------

POLL_SECONDS = 1.0
LIFECYCLE_TIMEOUT = 300.0  # then the driver fails the task itself and the lifecycle is unexpected
TERMINAL_TI = frozenset({"success", "failed", "upstream_failed", "skipped", "removed"})


@dataclass
class Run:
    """One lifecycle while it runs and after: what the driver did and saw."""

    lifecycle: Lifecycle
    started: float
    acted_at: float | None = None
    gave_up: bool = False
    finished_at: float | None = None
    run_state: str | None = None
    ti_state: str | None = None
    try_number: int = 0
    ti_state_seen: str | None = None


@dataclass
class TriggererKill:
    """The triggerer's SIGKILL and restart; times in seconds after the faults were applied."""

    at: float | None = None
    back_at: float | None = None
    killed: list[str] = field(default_factory=list)
    deferred: int = 0  # tasks deferred when it was killed

    def describe(self) -> str:
        if self.at is None:
            return "not done (no deferred task after its planned time)"
        if self.back_at is None:
            return f"at {self.at:.0f}s, restart failed"
        return f"at {self.at:.0f}s with {self.deferred} tasks deferred, healthy again at {self.back_at:.0f}s"


@dataclass(frozen=True)
class Crash:
    """An Airflow component that died on its own (not killed by the driver)."""

    component: str
    at: float
    reason: str


def last_error_line(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if "Error" in line or "Exception" in line]
    return lines[-1][:160] if lines else "(no error in its log)"


class Supervisor:
    """Keeps the stack's components running, as Kubernetes restarts a crashed Airflow pod.

    A component can die on its own under load (a triggerer on SQLite's "database is locked");
    without a restart every deferred task would wait for ever, which no deployment does. Each
    such crash is recorded for the report. It also carries out the planned triggerer SIGKILL.
    """

    def __init__(self, stack: AirflowStack, clock: Callable[[], float]) -> None:
        self.stack = stack
        self.clock = clock
        self.crashes: list[Crash] = []
        self.errors: list[str] = []
        self._busy: set[str] = set()  # components being killed or restarted by us
        self._threads: list[threading.Thread] = []

    def check(self) -> None:
        for name, component in dict(self.stack.components).items():
            if name in self._busy or component.running():
                continue
            self.crashes.append(Crash(name, self.clock(), last_error_line(component.log_tail(20_000))))
            self._in_background(name, self._restart, name)

    def kill_and_restart(self, name: str, down_seconds: float, record: TriggererKill) -> None:
        """SIGKILL ``name`` (a lost machine), start it again ``down_seconds`` later."""

        def run() -> None:
            record.killed = self.stack.kill(name, signal.SIGKILL)
            time.sleep(down_seconds)
            self.stack.start_component(name)
            record.back_at = self.clock()

        self._in_background(name, run)

    def join(self) -> None:
        for thread in self._threads:
            thread.join(300)

    def _in_background(self, name: str, action: Callable[..., None], *args: Any) -> None:
        self._busy.add(name)

        def run() -> None:
            try:
                action(*args)
            except Exception as error:
                self.errors.append(f"{name}: {error!r}")
            finally:
                self._busy.discard(name)

        thread = threading.Thread(target=run, name=f"chaos-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _restart(self, name: str) -> None:
        self.stack.kill(name, signal.SIGKILL)  # what its death left (helpers), and its entry
        self.stack.start_component(name)


def retrying(call: Callable[[], Any], attempts: int = 5) -> Any:
    """A REST call the SQLite-backed API server may refuse under load (500 "Database error")."""
    for attempt in range(attempts):
        try:
            return call()
        except StackError:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0 + attempt)
    return None


class Driver:
    """Triggers the lifecycles (at most ``concurrency`` at once), acts on kill/clear ones, kills
    the triggerer once while deferred tasks wait, and records each run's end."""

    def __init__(
        self,
        stack: AirflowStack,
        watch: JobWatch,
        faults: FaultPlan,
        *,
        concurrency: int,
        faults_applied_at: float,
        log: Callable[[str], None],
    ) -> None:
        self.log = log
        self.stack = stack
        self.client = stack.client
        self.watch = watch
        self.faults = faults
        self.concurrency = concurrency
        self.faults_applied_at = faults_applied_at
        self.triggerer = TriggererKill()
        self.supervisor = Supervisor(stack, lambda: self.watch.now() - faults_applied_at)

    def drive(self, plan: list[Lifecycle]) -> list[Run]:
        pending = list(reversed(plan))
        active: list[Run] = []
        done: list[Run] = []
        while pending or active:
            while pending and len(active) < self.concurrency:
                active.append(self._trigger(pending.pop()))
            for run in list(active):
                if self._step(run):
                    active.remove(run)
                    done.append(run)
                    self._report(run, len(done), len(plan))
            self._maybe_kill_triggerer(active)
            self.supervisor.check()
            time.sleep(POLL_SECONDS)
        self.supervisor.join()
        return sorted(done, key=lambda run: run.lifecycle.index)

    def _report(self, run: Run, done: int, total: int) -> None:
        took = (run.finished_at or 0.0) - run.started
        self.log(
            f"[{done:>3}/{total}] {self.watch.now():6.0f}s  {run.lifecycle.run_id} "
            f"({run.lifecycle.mode}/{run.lifecycle.gang}): {run.ti_state}, try {run.try_number}, {took:.0f}s"
        )

    def _trigger(self, lifecycle: Lifecycle) -> Run:
        def post() -> None:
            try:
                self.client.trigger(lifecycle.dag_id, conf=lifecycle.conf, run_id=lifecycle.run_id)
            except StackError as error:
                if ": 409 " not in str(error):  # a retried POST whose first attempt got through
                    raise

        retrying(post)
        return Run(lifecycle, started=self.watch.now())

    def _step(self, run: Run) -> bool:
        """One look at a run; True once it ended."""
        lifecycle = run.lifecycle
        if lifecycle.outcome in ("kill", "clear") and run.acted_at is None:
            self._act_when_running(run)
        state = retrying(lambda: self.client.dag_run(lifecycle.dag_id, lifecycle.run_id)).get("state")
        if state in FINISHED_RUN:
            ti = retrying(lambda: self.client.task_instance(lifecycle.dag_id, lifecycle.run_id, TASK_ID))
            run.run_state, run.ti_state = str(state), ti.get("state")
            run.try_number = int(ti.get("try_number") or 0)
            run.finished_at = self.watch.now()
            return True
        if not run.gave_up and self.watch.now() - run.started > LIFECYCLE_TIMEOUT:
            run.gave_up = True  # a person would end it: mark it failed, so its run ends too
            self._fail_task(lifecycle)
        return False

    def _fail_task(self, lifecycle: Lifecycle) -> None:
        """Mark the task failed, as a person would; one that failed meanwhile is left as it is
        (the API answers 409 "already in failed state" while its run has not ended yet)."""
        try:
            retrying(
                lambda: self.client.set_task_state(lifecycle.dag_id, lifecycle.run_id, TASK_ID, "failed")
            )
        except StackError as error:
            if "already in failed state" not in str(error):
                raise

    def _act_when_running(self, run: Run) -> None:
        lifecycle = run.lifecycle
        jobs = self.watch.live_jobs(lifecycle.dag_id, lifecycle.run_id)
        if not any(is_running(job) for job in jobs):
            return
        if lifecycle.outcome == "kill":
            self._fail_task(lifecycle)
        else:
            retrying(lambda: self.client.clear_task(lifecycle.dag_id, lifecycle.run_id, TASK_ID))
        run.acted_at = self.watch.now()

    def _maybe_kill_triggerer(self, active: list[Run]) -> None:
        """Once, after its planned time, while deferrable lifecycles' tasks are deferred."""
        due = self.faults_applied_at + self.faults.triggerer_kill_at
        if self.triggerer.at is not None or self.watch.now() < due:
            return
        deferred = sum(self._ti_state(run) == "deferred" for run in active if run.lifecycle.deferrable)
        if deferred:
            self.triggerer.at = self.watch.now() - self.faults_applied_at
            self.triggerer.deferred = deferred
            self.supervisor.kill_and_restart("triggerer", self.faults.triggerer_down, self.triggerer)

    def _ti_state(self, run: Run) -> str | None:
        lifecycle = run.lifecycle
        try:
            ti = retrying(partial(self.client.task_instance, lifecycle.dag_id, lifecycle.run_id, TASK_ID))
        except StackError:  # not created yet
            return None
        return ti.get("state") if isinstance(ti, dict) else None


# --- the verdicts -------------------------------------------------------------------------------


@dataclass
class Verdict:
    """One lifecycle's end against what was expected."""

    run: Run
    expected: Expected
    jobs_per_try: dict[int, int]
    problems: list[str]
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def jobs_of_run(events: list[JobEvent], lifecycle: Lifecycle) -> list[JobEvent]:
    dag, run_id = safe_label_value(lifecycle.dag_id), safe_label_value(lifecycle.run_id)
    return [
        event
        for event in events
        if event.labels.get(DAG_ID_LABEL) == dag and event.labels.get(RUN_ID_LABEL) == run_id
    ]


def judge(stack: AirflowStack, run: Run, events: list[JobEvent], victim_deleted: bool) -> Verdict:
    lifecycle = run.lifecycle
    expected = lifecycle.expected(victim_deleted)
    added = [event for event in jobs_of_run(events, lifecycle) if event.kind == "ADDED"]
    per_try = dict(sorted(Counter(event.try_number for event in added).items()))
    problems = []
    if run.gave_up:
        problems.append(f"still running after {LIFECYCLE_TIMEOUT:.0f}s: the driver failed it")
    if lifecycle.outcome in ("kill", "clear") and run.acted_at is None:
        problems.append(f"the driver never saw its job Running, so it could not {lifecycle.outcome} it")
    if run.ti_state != expected.state:
        problems.append(f"task {run.ti_state} (try {run.try_number}), expected {expected.state}")
    if per_try != expected.jobs_per_try:
        problems.append(f"jobs per try {per_try}, expected {expected.jobs_per_try}")
    verdict = Verdict(run, expected, per_try, problems)
    if expected.reason is not None:
        log = task_log(stack, lifecycle, max(run.try_number, 1))
        if expected.reason not in log:
            problems.append(f"the log of try {run.try_number} does not name {expected.reason}")
    if problems:
        verdict.log_tail = log_tails(stack, lifecycle, max(run.try_number, 1))
    return verdict


BOILERPLATE = ("::group::", "::endgroup::", "DagBag", "bundles loaded", "startup parse", "/logs/dag_id=")


def log_tails(stack: AirflowStack, lifecycle: Lifecycle, tries: int, lines: int = 20) -> str:
    """The end of every try's log (the trigger's lines included, Airflow's boilerplate not)."""
    blocks = []
    for number in range(1, tries + 1):
        log = task_log(stack, lifecycle, number).splitlines()
        kept = [line for line in log if not any(noise in line for noise in BOILERPLATE)]
        blocks.append(f"  [try {number}]\n" + "\n".join(kept[-lines:]))
    return "\n".join(blocks)


def task_log(stack: AirflowStack, lifecycle: Lifecycle, try_number: int) -> str:
    try:
        return str(
            retrying(lambda: stack.client.task_log(lifecycle.dag_id, lifecycle.run_id, TASK_ID, try_number))
        )
    except StackError as error:
        return f"(log not readable: {error})"


def explained(event: JobEvent, age: float, run: Run | None, victim_deleted: bool, deletion_at: float) -> bool:
    """Whether a live job's deletion (``age`` seconds after it was seen created) has one of the
    rule's reasons, or is the injected deletion."""
    if run is None:
        return False
    outcome = run.lifecycle.outcome
    if run.gave_up:
        return True  # the driver failed the task itself, as a person would
    if outcome == "admission_timeout_retry":
        return age >= ADMISSION_TIMEOUT - 2  # the watch sees creation a little late
    if outcome in ("kill", "clear"):
        return event.try_number == 1 and run.acted_at is not None and event.at >= run.acted_at - 1
    if outcome == "victim":
        return victim_deleted and event.at >= deletion_at - 1
    return False


# --- the report ---------------------------------------------------------------------------------


@dataclass
class ChaosReport:
    seed: int
    concurrency: int
    verdicts: list[Verdict]
    faults: dict[str, int]
    leftovers: dict[str, list[str]]
    twice: list[str]
    healthy_deleted: list[str]
    wall_seconds: float
    watch_note: str
    triggerer: TriggererKill
    crashes: list[Crash]
    process_errors: list[str]
    outages: list[tuple[float, float]]

    @property
    def expected_count(self) -> int:
        return sum(verdict.ok for verdict in self.verdicts)

    @property
    def left_behind(self) -> int:
        return sum(len(names) for names in self.leftovers.values())

    def missed_targets(self) -> list[str]:
        missed = []
        if self.expected_count != len(self.verdicts):
            missed.append(f"{len(self.verdicts) - self.expected_count} lifecycles not in their expected end")
        if self.left_behind:
            missed.append(f"left behind: {self.leftovers}")
        if self.twice:
            missed.append(f"submitted twice: {self.twice}")
        if self.healthy_deleted:
            missed.append(f"healthy jobs deleted: {self.healthy_deleted}")
        if self.process_errors:  # the run itself went wrong: its numbers prove nothing
            missed.append(f"killing or restarting a component failed: {self.process_errors}")
        return missed

    def table(self) -> str:
        """The plain-text table: what ran, what was injected, and the four targets."""
        outcomes = Counter(verdict.run.lifecycle.outcome for verdict in self.verdicts)
        modes = Counter(
            f"{verdict.run.lifecycle.mode}/{verdict.run.lifecycle.gang}" for verdict in self.verdicts
        )
        injected = {kind: count for kind, count in self.faults.items() if count}
        if self.triggerer.at is not None:
            injected["triggerer_sigkill"] = 1
        total = len(self.verdicts)
        rows = [
            ("lifecycles", f"{total} (seed {self.seed}, at most {self.concurrency} at once)"),
            ("  by outcome", ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items()))),
            ("  by mode/gang", ", ".join(f"{name} {count}" for name, count in sorted(modes.items()))),
            ("faults injected", ", ".join(f"{name} {count}" for name, count in sorted(injected.items()))),
            ("  outage windows", ", ".join(f"{length:g}s at {start:g}s" for start, length in self.outages)),
            ("  triggerer SIGKILL", self.triggerer.describe()),
            ("components crashed (restarted)", self.describe_crashes()),
            (
                "tasks in expected end state",
                f"{self.expected_count}/{total} ({100 * self.expected_count / max(total, 1):.1f}%)",
            ),
            (
                "objects left behind",
                f"{self.left_behind} (jobs {len(self.leftovers.get('pytorchjobs', []))}, "
                f"PodGroups {len(self.leftovers.get('podgroups', []))}, "
                f"pods {len(self.leftovers.get('pods', []))})",
            ),
            ("jobs submitted twice for one try", str(len(self.twice))),
            ("healthy jobs deleted by us", str(len(self.healthy_deleted))),
            ("job watch", self.watch_note),
            ("wall time", f"{self.wall_seconds:.0f}s"),
        ]
        width = max(len(name) for name, _ in rows)
        lines = [f"{'measure'.ljust(width)}  value", f"{'-' * width}  {'-' * 40}"]
        lines += [f"{name.ljust(width)}  {value}" for name, value in rows]
        return "\n".join(lines)

    def describe_crashes(self) -> str:
        if not self.crashes:
            return "none"
        return "; ".join(f"{crash.component} at {crash.at:.0f}s: {crash.reason}" for crash in self.crashes)

    def unexpected(self) -> str:
        """Each lifecycle not in its expected end: run id, expected vs got, the task log's tail."""
        blocks = []
        for verdict in self.verdicts:
            if verdict.ok:
                continue
            lifecycle = verdict.run.lifecycle
            blocks.append(
                f"--- {lifecycle.dag_id} {lifecycle.run_id}: expected {verdict.expected.state} "
                f"{verdict.expected.jobs_per_try}, got {verdict.run.ti_state} "
                f"(try {verdict.run.try_number}) {verdict.jobs_per_try}\n"
                + "\n".join(f"  {problem}" for problem in verdict.problems)
                + f"\n{verdict.log_tail}"
            )
        return "\n".join(blocks)


# --- the run ------------------------------------------------------------------------------------

SETTLE_SECONDS = 30.0


def leftovers(api: k8s.ApiClient) -> dict[str, list[str]]:
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    return {
        "pytorchjobs": [
            job["metadata"]["name"] for job in custom.list_namespaced_custom_object(*PYTORCHJOBS)["items"]
        ],
        "podgroups": [
            group["metadata"]["name"] for group in custom.list_namespaced_custom_object(*PODGROUPS)["items"]
        ],
        "pods": [pod.metadata.name for pod in core.list_namespaced_pod(NAMESPACE).items],
    }


def settle(api: k8s.ApiClient, timeout: float = SETTLE_SECONDS) -> dict[str, list[str]]:
    """What is still there once the reaper and the garbage collector had ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(api)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(1.0)


@contextmanager
def watching(cluster: SimCluster) -> Iterator[JobWatch]:
    watch = JobWatch(cluster).start()
    try:
        yield watch
    finally:
        watch.stop()


def expected_wall_seconds(count: int, concurrency: int) -> float:
    """A rough run length, to spread the timed faults over it: the victim's two minutes, then
    ~20 s per lifecycle and slot (measured: 30 in 150 s at 6, 200 in 544 s at 8)."""
    return max(120.0, 60.0 + count * 20.0 / concurrency)


def run_chaos(
    cluster: SimCluster,
    stack: AirflowStack,
    *,
    seed: int,
    lifecycles: int,
    concurrency: int = 6,
    log: Callable[[str], None] = print,
) -> ChaosReport:
    """Run ``lifecycles`` seeded lifecycles under faults and judge them (see the module docstring)."""
    rng = random.Random(seed)
    tag = f"s{seed}-{random.Random().randrange(16**4):04x}"  # unique per run: run ids must not repeat
    victim_seconds = 120
    plan = plan_lifecycles(rng, lifecycles, tag, cluster.topology.gpus_per_node + 1, victim_seconds)
    selector = f"{VICTIM_LABEL}=yes,{LIFECYCLE_LABEL}={plan[0].run_id}"
    faults = plan_faults(rng, expected_wall_seconds(lifecycles, concurrency), selector)
    before = cluster.fault_counts()
    began = time.monotonic()
    with watching(cluster) as watch, cluster.api_client() as api:
        cluster.set_faults(faults.spec)
        log(f"chaos {tag}: {lifecycles} lifecycles, faults {fault_summary(faults)}")
        driver = Driver(stack, watch, faults, concurrency=concurrency, faults_applied_at=watch.now(), log=log)
        try:
            runs = driver.drive(plan)
        finally:
            cluster.clear_faults()
        counts = {kind: count - before.get(kind, 0) for kind, count in cluster.fault_counts().items()}
        left = settle(api)
        wall = time.monotonic() - began
        disagreements = watch.disagreements(api)
        events = watch.snapshot()
        note = (
            f"{len(events)} events, {watch.failures} failed watch attempts, {watch.relists} re-lists, "
            f"{sum(event.seen == 'list' for event in events)} inferred, "
            f"{len(disagreements)} disagreements with the final list"
        )
    victim_deleted = counts.get("deletion", 0) > 0
    deletion_at = driver.faults_applied_at + faults.deletion_at
    verdicts = [judge(stack, run, events, victim_deleted) for run in runs]
    return ChaosReport(
        seed=seed,
        concurrency=concurrency,
        verdicts=verdicts,
        faults=counts,
        leftovers=left,
        twice=submitted_twice(events),
        healthy_deleted=healthy_deleted(events, runs, victim_deleted, deletion_at) + disagreements,
        wall_seconds=wall,
        watch_note=note,
        triggerer=driver.triggerer,
        crashes=driver.supervisor.crashes,
        process_errors=driver.supervisor.errors,
        outages=faults.outages,
    )


def fault_summary(faults: FaultPlan) -> str:
    outages = ", ".join(f"{length:g}s at {start:g}s" for start, length in faults.outages)
    return (
        f"5% errors, watch cuts every {faults.spec['watches']['cut_after_seconds']}s, outages {outages}, "
        f"victim deleted at {faults.deletion_at:g}s, triggerer killed after {faults.triggerer_kill_at:g}s"
    )


def is_chaos_job(event: JobEvent) -> bool:
    return event.labels.get(DAG_ID_LABEL, "") in {safe_label_value(dag_id) for dag_id in CHAOS_DAG_FILES}


def submitted_twice(events: list[JobEvent]) -> list[str]:
    added = Counter(event.key() for event in events if event.kind == "ADDED" and is_chaos_job(event))
    return ["/".join(key) + f" x{count}" for key, count in sorted(added.items()) if count > 1]


def healthy_deleted(
    events: list[JobEvent], runs: list[Run], victim_deleted: bool, deletion_at: float
) -> list[str]:
    by_run = {safe_label_value(run.lifecycle.run_id): run for run in runs}
    added_at = {event.uid: event.at for event in events if event.kind == "ADDED"}
    found = []
    for event in events:
        if event.kind != "DELETED" or event.finished or not is_chaos_job(event):
            continue
        run = by_run.get(event.labels.get(RUN_ID_LABEL, ""))
        age = event.at - added_at.get(event.uid, event.at)
        if not explained(event, age, run, victim_deleted, deletion_at):
            found.append(f"{event.name} (run {event.labels.get(RUN_ID_LABEL)}, try {event.try_number})")
    return found
