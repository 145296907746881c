"""The simulated Volcano's session cost with thousands of gangs queued, then admitted in waves.

What the triggerer benchmark puts the simulator through, without Airflow in the loop: for each
size N, N gang jobs (a PodGroup with the provider's identity labels, a PyTorchJob owning it, one
Master pod of 1 GPU that runs ``--job-seconds``) are submitted into the queue ``bench`` whose
capability is 0 GPUs, as ``bench_triggerer.submit_all`` submits them. Once Volcano has marked
all N PodGroups ``Pending`` and their pods exist, the benchmark:

1. watches ``--idle-window`` seconds of Volcano sessions with all N waiting (the cost of one
   session over N pending gangs);
2. lists the N PodGroups, pods and PyTorchJobs of the namespace (three times each; the median
   of what one full list costs a client);
3. opens the queue to the whole cluster (10 nodes x 8 GPUs by default: waves of ~80 jobs) and
   follows the jobs (by the queue's status, one GET a second) until every PodGroup is
   ``Completed`` or ``--run-window`` seconds pass, noting when the first and the last gang were
   admitted (PodGroup past ``Pending``), then counts the PyTorchJobs that finished;
4. deletes the namespace.

Session times come from the Volcano controller itself (`Volcano.timings`, one `SessionTiming`
per session, read in the cluster's process): ``session`` is a whole session (snapshot,
decisions, bindings, handing out its writes), ``own`` that less the time spent waiting for its
bindings, i.e. the scheduler's own work. The cluster runs in a child process (all controllers
and the API server in it, as in the triggerer benchmark); ``cpu`` is that process's CPU time
over the phase. Nothing is asserted: the table is for comparing changes.

    .venv/bin/python benchmarks/bench_volcano_session.py [--sizes 1000,10000] [--run-window 120]
    .venv/bin/python benchmarks/bench_volcano_session.py --quick    # N = 20, a smoke run

``--profile DIR`` records the cluster process with py-spy (one SVG flame graph per size and
step, or collapsed stacks with ``--profile-format raw``) while the benchmark runs.
"""

from __future__ import annotations

import os
import tempfile

if "AIRFLOW_HOME" not in os.environ:  # never create or touch ~/airflow
    _AIRFLOW_HOME = tempfile.TemporaryDirectory(prefix="bench-volcano-airflow-")
    os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME.name
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

import argparse
import logging
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import identity_labels
from airflow_gang.spec import GangJobSpec

QUEUE = "bench"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
KUBEFLOW = ("kubeflow.org", "v1")
NOISY_LOGGERS = ("airflow_gang", "airflow", "uvicorn.error", "gang_sim", "kubernetes", "asyncio")
ADMITTED = frozenset({"Inqueue", "Running", "Completed", "Unknown"})
POLL = 2.0


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# The cluster, in a child process that also answers for its Volcano's session timings
# --------------------------------------------------------------------------------------------


def _serve(options: dict[str, Any], conn: Connection) -> None:
    from gang_sim.cluster import SimCluster
    from gang_sim.controllers.manager import ControllerManager
    from gang_sim.controllers.volcano.scheduler import Volcano
    from gang_sim.process_tuning import tune_garbage_collection

    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    tune_garbage_collection()
    try:
        # The upstream node grace period: Lease renewals every 10 s, not the simulator's 0.5 s.
        with SimCluster(**{"node_monitor_grace_period": 40.0, **options}) as cluster:
            assert isinstance(cluster.controllers, ControllerManager)
            volcano = next(c for c in cluster.controllers.controllers if isinstance(c, Volcano))
            conn.send(cluster.kubeconfig_path)
            while (request := conn.recv()) != "stop":
                since = float(request)
                conn.send(
                    [
                        (t.started, t.seconds, t.binding, t.podgroups)
                        for t in list(volcano.timings)
                        if t.started >= since
                    ]
                )
    except BaseException as error:  # reported to the parent instead of a silent hang
        conn.send(error)


class Cluster:
    def __init__(self, options: dict[str, Any]) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(options, child), name="sim-cluster", daemon=True)

    def __enter__(self) -> Cluster:
        self.process.start()
        if not self.conn.poll(90):
            raise RuntimeError("the simulated cluster did not start within 90 s")
        message = self.conn.recv()
        if isinstance(message, BaseException):
            raise RuntimeError("the simulated cluster failed to start") from message
        self.kubeconfig = str(message)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.send("stop")
        self.process.join(30)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def sessions(self, since: float, until: float | None = None) -> list[tuple[float, float, float, int]]:
        """(started, seconds, binding, podgroups) of the sessions started in [since, until]."""
        self.conn.send(since)
        rows: list[tuple[float, float, float, int]] = self.conn.recv()
        return [row for row in rows if until is None or row[0] <= until]

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return float(times.user + times.system)


@contextmanager
def profiling(directory: Path | None, pid: int, name: str, form: str = "flamegraph") -> Iterator[None]:
    """py-spy recording ``pid`` for the block, to ``directory/name.svg`` (nothing without a dir);
    ``form`` ``raw`` writes collapsed stacks (``name.txt``) instead."""
    if directory is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    output = directory / f"{name}.{'svg' if form == 'flamegraph' else 'txt'}"
    command = [spy, "record", "--pid", str(pid), "--rate", "50", "--output", str(output), "--nonblocking"]
    process = subprocess.Popen(
        [*command, "--format", form],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        process.send_signal(2)  # SIGINT: py-spy writes its flame graph and exits
        process.wait(60)
        say(f"profile: {output}")


# --------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------


def job_spec(seconds: float) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=0,
        resources={"nvidia.com/gpu": 1},
        queue=QUEUE,
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": f"{seconds:g}"}}},
    )


def submit_all(kubeconfig: str, namespace: str, size: int, seconds: float) -> None:
    """What the operator submits for each job (4 threads), as ``bench_triggerer.submit_all``."""
    spec = job_spec(seconds)
    local = threading.local()

    def submit(index: int) -> None:
        if not hasattr(local, "hook"):
            local.hook = GangJobHook(config_file=kubeconfig)
        hook: GangJobHook = local.hook
        name = f"vs-{index:05d}"
        labels = identity_labels("bench_volcano", "train", "bench", index, 1)
        podgroup = spec.build_podgroup(name, namespace, labels=labels)
        if podgroup is None:  # pragma: no cover - provider mode always builds one
            raise RuntimeError("no PodGroup built")
        hook.create_podgroup(podgroup, namespace)
        job = hook.create_pytorchjob(spec.build_pytorchjob(name, namespace, labels=labels), namespace)
        hook.set_podgroup_owner(name, namespace, job)

    pool = ThreadPoolExecutor(4)
    try:
        list(pool.map(submit, range(size)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def set_queue_capability(api: k8s.ApiClient, gpus: int) -> None:
    objects = k8s.CustomObjectsApi(api)
    for _ in range(20):
        queue = objects.get_cluster_custom_object(*VOLCANO, "queues", QUEUE)
        queue["spec"]["capability"] = {"nvidia.com/gpu": str(gpus)}
        try:
            objects.replace_cluster_custom_object(*VOLCANO, "queues", QUEUE, queue)
            return
        except ApiException as error:
            if error.status != 409:
                raise
    raise RuntimeError(f"could not update queue {QUEUE}")


def wait_until(check: Callable[[], bool], timeout: float, interval: float = POLL) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# One size
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    size: int
    submit_seconds: float = 0.0
    queued_seconds: float = 0.0
    idle_sessions: list[tuple[float, float, float, int]] = field(default_factory=list)
    idle_cpu: float = 0.0
    idle_window: float = 0.0
    list_seconds: dict[str, float] = field(default_factory=dict)
    run_sessions: list[tuple[float, float, float, int]] = field(default_factory=list)
    run_cpu: float = 0.0
    first_admitted: float | None = None
    all_admitted: float | None = None
    finished: int = 0
    run_seconds: float = 0.0
    all_finished: bool = False
    notes: list[str] = field(default_factory=list)


class Phase:
    def __init__(self, cluster: Cluster, api: k8s.ApiClient, size: int, args: argparse.Namespace) -> None:
        self.cluster, self.api, self.size, self.args = cluster, api, size, args
        self.namespace = f"bench-volcano-{size}"
        self.objects = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.result = Result(size)

    def podgroup_phases(self) -> list[str]:
        items = self.objects.list_namespaced_custom_object(*VOLCANO, self.namespace, "podgroups")["items"]
        return [(item.get("status") or {}).get("phase") or "" for item in items]

    def pod_count(self) -> int:
        return len(self.core.list_namespaced_pod(self.namespace, _preload_content=False).json()["items"])

    def finished_jobs(self) -> int:
        items = self.objects.list_namespaced_custom_object(*KUBEFLOW, self.namespace, "pytorchjobs")["items"]
        return sum(
            1
            for item in items
            if any(
                c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
                for c in (item.get("status") or {}).get("conditions") or []
            )
        )

    def run(self) -> Result:
        result, size = self.result, self.size
        set_queue_capability(self.api, 0)
        self.core.create_namespace({"metadata": {"name": self.namespace}})
        say(f"N={size}: submitting into the closed queue")
        started = time.monotonic()
        submit_all(self.cluster.kubeconfig, self.namespace, size, self.args.job_seconds)
        result.submit_seconds = time.monotonic() - started

        def queued() -> bool:
            phases = self.podgroup_phases()
            return phases.count("Pending") == size and self.pod_count() == size

        if not wait_until(queued, 120 + 0.1 * size):
            result.notes.append("not every PodGroup was seen Pending with its pod")
        result.queued_seconds = time.monotonic() - started
        say(f"N={size}: queued after {result.queued_seconds:.0f} s; watching idle sessions")
        with profiling(self.args.profile, self.cluster.pid, f"idle-{size}", self.args.profile_format):
            since, cpu = time.monotonic(), self.cluster.cpu_seconds()
            time.sleep(self.args.idle_window)
            result.idle_cpu = self.cluster.cpu_seconds() - cpu
            result.idle_window = time.monotonic() - since
            result.idle_sessions = self.cluster.sessions(since)
        for plural, lister in (
            (
                "podgroups",
                lambda: self.objects.list_namespaced_custom_object(*VOLCANO, self.namespace, "podgroups"),
            ),
            ("pods", lambda: self.core.list_namespaced_pod(self.namespace, _preload_content=False).json()),
            (
                "pytorchjobs",
                lambda: self.objects.list_namespaced_custom_object(*KUBEFLOW, self.namespace, "pytorchjobs"),
            ),
        ):
            times = []
            for _ in range(3):
                began = time.monotonic()
                lister()
                times.append(time.monotonic() - began)
            result.list_seconds[plural] = statistics.median(times)
        say(f"N={size}: opening the queue")
        with profiling(self.args.profile, self.cluster.pid, f"run-{size}", self.args.profile_format):
            self._run_waves()
        say(f"N={size}: deleting the namespace")
        self.core.delete_namespace(self.namespace)

        def gone() -> bool:
            try:
                self.core.read_namespace(self.namespace)
            except ApiException as error:
                return bool(error.status == 404)
            return False

        if not wait_until(gone, 300 + 0.05 * size):
            result.notes.append("namespace not deleted in time")
        return result

    def queue_counts(self) -> dict[str, int]:
        """The ``bench`` queue's PodGroup counts by phase, as Volcano last wrote them: one GET,
        so following the waves does not load the cluster with lists of N objects."""
        status = self.objects.get_cluster_custom_object(*VOLCANO, "queues", QUEUE).get("status") or {}
        return {
            phase: int(status.get(phase) or 0) for phase in ("pending", "inqueue", "running", "completed")
        }

    def _run_waves(self) -> None:
        result, size = self.result, self.size
        cpu = self.cluster.cpu_seconds()
        set_queue_capability(self.api, self.args.nodes * self.args.gpus_per_node)
        opened = time.monotonic()
        deadline = opened + self.args.run_window
        while time.monotonic() < deadline:
            time.sleep(POLL / 2)
            counts = self.queue_counts()
            admitted = counts["inqueue"] + counts["running"] + counts["completed"]
            now = time.monotonic() - opened
            if admitted and result.first_admitted is None:
                result.first_admitted = now
            if admitted >= size and counts["pending"] == 0 and result.all_admitted is None:
                result.all_admitted = now
            if counts["completed"] >= size:
                break
        result.run_seconds = time.monotonic() - opened
        result.run_cpu = self.cluster.cpu_seconds() - cpu
        result.run_sessions = self.cluster.sessions(opened, opened + result.run_seconds)
        result.finished = self.finished_jobs()
        result.all_finished = result.finished == size


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _stats(sessions: Sequence[tuple[float, float, float, int]], column: int) -> str:
    if not sessions:
        return "-"
    values = sorted(row[1] - row[2] if column == -1 else row[column] for row in sessions)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{statistics.median(values):.3f} / {p90:.3f} / {values[-1]:.3f}"


def report(results: Sequence[Result], args: argparse.Namespace) -> None:
    def fmt(value: float | None, unit: str = "s") -> str:
        return "-" if value is None else f"{value:.1f} {unit}"

    rows: list[tuple[str, list[str]]] = [
        ("submit N jobs", [fmt(r.submit_seconds) for r in results]),
        ("all Pending with pods", [fmt(r.queued_seconds) for r in results]),
        ("idle: sessions in window", [f"{len(r.idle_sessions)} in {r.idle_window:.0f} s" for r in results]),
        (
            "idle: PodGroups looked at",
            [str(max((s[3] for s in r.idle_sessions), default=0)) for r in results],
        ),
        ("idle: session med/p90/max s", [_stats(r.idle_sessions, 1) for r in results]),
        ("idle: own work med/p90/max s", [_stats(r.idle_sessions, -1) for r in results]),
        ("idle: cluster CPU per s", [f"{r.idle_cpu / max(r.idle_window, 1e-9):.2f}" for r in results]),
    ]
    for plural in ("podgroups", "pods", "pytorchjobs"):
        rows.append((f"list {plural} (median)", [f"{r.list_seconds.get(plural, 0):.3f} s" for r in results]))
    rows += [
        ("run: first admitted after", [fmt(r.first_admitted) for r in results]),
        ("run: all admitted after", [fmt(r.all_admitted) for r in results]),
        (
            "run: jobs finished",
            [f"{r.finished}/{r.size} in {r.run_seconds:.0f} s" for r in results],
        ),
        ("run: finished per s", [f"{r.finished / max(r.run_seconds, 1e-9):.1f}" for r in results]),
        ("run: sessions", [str(len(r.run_sessions)) for r in results]),
        ("run: session med/p90/max s", [_stats(r.run_sessions, 1) for r in results]),
        ("run: own work med/p90/max s", [_stats(r.run_sessions, -1) for r in results]),
        ("run: cluster CPU per s", [f"{r.run_cpu / max(r.run_seconds, 1e-9):.2f}" for r in results]),
    ]
    width = max(len(label) for label, _ in rows)
    cells = max(24, *(len(cell) for _, values in rows for cell in values))
    print(
        f"\nVolcano session benchmark: {args.nodes} nodes x {args.gpus_per_node} GPUs, period "
        f"{args.schedule_period:g} s, jobs of {args.job_seconds:g} s, idle window {args.idle_window:g} s, "
        f"run window {args.run_window:g} s"
    )
    print(f"{'N':<{width}}  " + "  ".join(f"{r.size:>{cells}}" for r in results))
    for label, values in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{value:>{cells}}" for value in values))
    for r in results:
        for note in r.notes:
            print(f"N={r.size}: {note}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: N = 20, 2 s windows")
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated job counts")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--schedule-period", type=float, default=1.0)
    parser.add_argument("--job-seconds", type=float, default=3.0)
    parser.add_argument("--idle-window", type=float, default=10.0, help="seconds of sessions with all queued")
    parser.add_argument("--run-window", type=float, default=120.0, help="most seconds to follow the waves")
    parser.add_argument("--profile", type=Path, default=None, help="directory for py-spy flame graphs")
    parser.add_argument("--profile-format", choices=("flamegraph", "raw", "speedscope"), default="flamegraph")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.idle_window, args.run_window = "20", 2.0, 20.0
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    options = {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "schedule_period": args.schedule_period,
        "queues": {QUEUE: {"nvidia.com/gpu": 0}},
    }
    results: list[Result] = []
    try:
        with Cluster(options) as cluster:
            say(f"cluster process {cluster.pid}")
            with k8s_config.new_client_from_config(config_file=cluster.kubeconfig) as api:
                for size in sizes:
                    results.append(Phase(cluster, api, size, args).run())
    except KeyboardInterrupt:
        say("interrupted: reporting what was measured")
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
