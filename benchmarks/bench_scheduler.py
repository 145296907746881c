"""Scheduler benchmark: how fast the embedded cluster admits, binds and completes gang jobs.

Submits N PyTorchJobs of R replicas (1 GPU each, a short script duration) in "provider" gang
mode — a PodGroup, then the PyTorchJob — all at once, as a sweep would, on a pool that runs
many of them side by side, and measures from the API what a user sees:

- **admitted**: every replica of the job has a node (the gang is admitted);
- **pods bound**: each pod's first ``spec.nodeName``;
- **completed**: the PyTorchJob's ``Succeeded`` condition;
- **admission latency**: PodGroup ADDED → all replicas bound (queueing included: every job is
  submitted at t=0, so the later ones wait for capacity — compare with the "ideal" row);
- **scheduling time**: first create → last job admitted (every pod created and bound);
- **API requests per pod**: every request the cluster's own controllers sent (the simulator's
  ``/sim/v1/metrics``, by their user agent), divided by the pods they ran.

Timestamps come from three watches (podgroups, pods, pytorchjobs) opened before the first
create. The cluster (`SimCluster`, context manager) runs in a child process so the measuring
client does not share its interpreter, and its controllers in a process of their own
(``isolate_controllers``; ``--in-process-controllers`` measures them sharing the API server's
interpreter); everything talks over 127.0.0.1. Nothing is asserted:
the table is for comparing changes. By default it runs 100 x 8 and then 1,000 x 8 (the issue's
target: under 60 s of scheduling time on 2 cores) and prints them side by side; ``--quick`` runs
one small configuration, ``--jobs N`` one configuration of N jobs.

    .venv/bin/python benchmarks/bench_scheduler.py [--quick] [--jobs N --replicas R ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from sim_process import cluster_process  # benchmarks/sim_process.py, beside this script

NAMESPACE = "default"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
PYTORCH = ("kubeflow.org", "v1")
JOB_LABEL = "training.kubeflow.org/job-name"
CONTROLLERS_AGENT_PREFIX = "sim-controller-manager/"
SUBMITTERS = 4
WATCH_SECONDS = 20


@dataclass(frozen=True)
class Config:
    jobs: int
    replicas: int
    nodes: int
    gpus_per_node: int
    duration: float
    schedule_period: float
    deadline: float
    """Seconds allowed from the first create to the last completion."""
    isolate_controllers: bool = True
    """Controllers in a process of their own (`SimCluster(isolate_controllers=True)`)."""

    @property
    def concurrent(self) -> int:
        return max(1, (self.nodes * self.gpus_per_node) // self.replicas)

    @property
    def ideal_seconds(self) -> float:
        """Lower bound: waves of ``concurrent`` jobs, each lasting ``duration``."""
        return math.ceil(self.jobs / self.concurrent) * self.duration


SMALL = Config(
    jobs=100, replicas=8, nodes=16, gpus_per_node=8, duration=0.2, schedule_period=0.2, deadline=170
)
TARGET = Config(
    jobs=1000, replicas=8, nodes=16, gpus_per_node=8, duration=0.2, schedule_period=0.2, deadline=600
)
QUICK = Config(jobs=48, replicas=8, nodes=16, gpus_per_node=8, duration=0.2, schedule_period=0.2, deadline=60)


# --------------------------------------------------------------------------------------------
# What we measure
# --------------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Monotonic timestamps of what the watches saw, keyed by job name."""

    replicas: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    created: dict[str, float] = field(default_factory=dict)
    pod_bound: dict[str, float] = field(default_factory=dict)
    bound_per_job: dict[str, int] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    completed: dict[str, float] = field(default_factory=dict)
    holding: dict[str, set[str]] = field(default_factory=dict)
    """Per job, its bound pods that have not finished: what holds the job's GPUs."""
    most_holding: int = 0
    relists: int = 0

    def podgroup(self, obj: dict[str, Any], now: float) -> None:
        with self.lock:
            self.created.setdefault(obj["metadata"]["name"], now)

    def pod(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        job = (obj["metadata"].get("labels") or {}).get(JOB_LABEL)
        if job is None or not (obj.get("spec") or {}).get("nodeName"):
            return
        finished = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        with self.lock:
            pods = self.holding.setdefault(job, set())
            if finished:
                pods.discard(name)
                if not pods:
                    del self.holding[job]
            else:
                pods.add(name)
                self.most_holding = max(self.most_holding, len(self.holding))
            if name in self.pod_bound:
                return
            self.pod_bound[name] = now
            count = self.bound_per_job.get(job, 0) + 1
            self.bound_per_job[job] = count
            if count == self.replicas:
                self.admitted[job] = now

    def pytorchjob(self, obj: dict[str, Any], now: float) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions):
            with self.lock:
                name = obj["metadata"]["name"]
                self.completed.setdefault(name, now)


class Watcher(threading.Thread):
    """List + watch one collection, feeding every object to ``handle``; re-lists after 410.

    Reads the watch stream as JSON lines itself: turning 40k pod events into client model
    objects would cost more CPU than the cluster being measured.
    """

    def __init__(
        self, name: str, lister: Callable[..., Any], handle: Callable[[dict[str, Any], float], None]
    ) -> None:
        super().__init__(name=f"watch-{name}", daemon=True)
        self.lister = lister
        self.handle = handle
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.relists = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            version = self._list()
            while not self.stopping.is_set():
                version = self._watch(version) or self._list()
        except BaseException as error:  # shown in the table rather than lost with the thread
            if not self.stopping.is_set():
                self.error = error

    def _list(self) -> str:
        body = json.loads(self.lister(_preload_content=False).data)
        now = time.monotonic()
        for item in body.get("items") or []:
            self.handle(item, now)
        if self.ready.is_set():
            self.relists += 1
        self.ready.set()
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str | None:
        """Follow the stream from ``version``; the version to resume from, or None to re-list."""
        response = self.lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
        )
        pending = b""
        try:
            for chunk in response.stream(1 << 16):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                now = time.monotonic()
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        return None  # 410 Expired (we fell behind): re-list
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.handle(obj, now)
                if self.stopping.is_set():
                    break
        finally:
            response.release_conn()
        return version

    def stop(self) -> None:
        self.stopping.set()


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def job_manifests(config: Config, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from airflow_gang.spec import GangJobSpec

    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=config.replicas - 1,
        resources={"nvidia.com/gpu": 1},
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(config.duration)}}},
    )
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    return podgroup, spec.build_pytorchjob(name, NAMESPACE)


@dataclass
class Result:
    config: Config
    recorder: Recorder
    started: float
    submitted: float
    finished: float
    complete: bool
    controller_requests: int | None = None
    """Requests the cluster's own controllers sent during the run (None: metrics unavailable)."""


def controller_requests(api: k8s.ApiClient) -> int | None:
    """What the simulator's metrics count for its controllers' user agent, or None if it has none."""
    try:
        answer = api.call_api("/sim/v1/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False)
    except k8s.ApiException:
        return None
    metrics = json.loads(answer.data)
    return sum(
        int(entry["count"])
        for entry in metrics.get("requests") or []
        if str(entry.get("userAgent", "")).startswith(CONTROLLERS_AGENT_PREFIX)
    )


def run(config: Config) -> Result:
    names = [f"bench-{index:05d}" for index in range(config.jobs)]
    manifests = [job_manifests(config, name) for name in names]
    recorder = Recorder(config.replicas)
    options = {
        "nodes": config.nodes,
        "gpus_per_node": config.gpus_per_node,
        "schedule_period": config.schedule_period,
        "isolate_controllers": config.isolate_controllers,
    }
    with cluster_process(options) as kubeconfig:
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)

        def podgroups(**kwargs: Any) -> Any:
            return custom.list_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", **kwargs)

        def pytorchjobs(**kwargs: Any) -> Any:
            return custom.list_namespaced_custom_object(*PYTORCH, NAMESPACE, "pytorchjobs", **kwargs)

        def pods(**kwargs: Any) -> Any:
            return core.list_namespaced_pod(NAMESPACE, **kwargs)

        watchers = [
            Watcher("podgroups", podgroups, recorder.podgroup),
            Watcher("pods", pods, recorder.pod),
            Watcher("pytorchjobs", pytorchjobs, recorder.pytorchjob),
        ]
        for watcher in watchers:
            watcher.start()
        for watcher in watchers:
            watcher.ready.wait(30)

        clients = [k8s_config.new_client_from_config(config_file=kubeconfig) for _ in range(SUBMITTERS)]

        def submit(index: int) -> None:
            submitter = k8s.CustomObjectsApi(clients[index % SUBMITTERS])
            podgroup, job = manifests[index]
            submitter.create_namespaced_custom_object(*VOLCANO, NAMESPACE, "podgroups", podgroup)
            submitter.create_namespaced_custom_object(*PYTORCH, NAMESPACE, "pytorchjobs", job)

        before = controller_requests(api)
        started = time.monotonic()
        with ThreadPoolExecutor(SUBMITTERS) as pool:
            list(pool.map(submit, range(config.jobs)))
        submitted = time.monotonic()
        deadline = started + config.deadline
        while time.monotonic() < deadline:
            with recorder.lock:
                if len(recorder.completed) >= config.jobs:
                    break
            time.sleep(0.1)
        finished = time.monotonic()
        after = controller_requests(api)
        for watcher in watchers:
            watcher.stop()
        recorder.relists = sum(w.relists for w in watchers)
        errors = [f"{w.name}: {w.error!r}" for w in watchers if w.error is not None]
        if errors:
            print("watch errors: " + "; ".join(errors), file=sys.stderr)
        for client in [api, *clients]:
            client.close()
    complete = len(recorder.completed) >= config.jobs
    requests = after - before if after is not None and before is not None else None
    return Result(config, recorder, started, submitted, finished, complete, requests)


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("nan")


def rows_of(result: Result) -> list[tuple[str, str]]:
    config, recorder = result.config, result.recorder
    start = result.started

    def last(stamps: dict[str, float]) -> float:
        return max(stamps.values(), default=start) - start

    latencies = [
        recorder.admitted[j] - recorder.created[j] for j in recorder.admitted if j in recorder.created
    ]
    run_times = [
        recorder.completed[j] - recorder.admitted[j] for j in recorder.completed if j in recorder.admitted
    ]
    wall = result.finished - start
    status = "complete" if result.complete else f"INCOMPLETE: deadline {config.deadline:.0f} s reached"
    nan = float("nan")
    pods = len(recorder.pod_bound)
    per_pod = f"{result.controller_requests / pods:.1f}" if result.controller_requests and pods else "n/a"
    return [
        ("configuration", f"{config.jobs} jobs x {config.replicas} replicas, 1 GPU, {config.duration:g} s"),
        ("pool", f"{config.nodes} nodes x {config.gpus_per_node} GPUs = {config.concurrent} jobs at once"),
        ("schedule period", f"{config.schedule_period:g} s"),
        ("controllers", "own process" if config.isolate_controllers else "in the API server's process"),
        ("status", status),
        ("submit all (PodGroup + PyTorchJob)", f"{result.submitted - start:.2f} s"),
        ("scheduling time (first create -> last admitted)", f"{last(recorder.admitted):.2f} s"),
        ("wall time (first create -> last Succeeded)", f"{wall:.2f} s"),
        ("ideal wall time (waves x duration)", f"{config.ideal_seconds:.2f} s"),
        ("jobs admitted", f"{len(recorder.admitted)} / {config.jobs}"),
        ("jobs admitted/s", f"{rate(len(recorder.admitted), last(recorder.admitted)):.2f}"),
        ("pods bound/s", f"{rate(pods, last(recorder.pod_bound)):.1f}"),
        ("jobs completed", f"{len(recorder.completed)} / {config.jobs}"),
        ("jobs completed/s", f"{rate(len(recorder.completed), last(recorder.completed)):.2f}"),
        (
            "admission latency p50 / p99 / max",
            f"{percentile(latencies, 0.5):.2f} / {percentile(latencies, 0.99):.2f} / "
            f"{max(latencies, default=nan):.2f} s",
        ),
        ("bound -> Succeeded p50", f"{statistics.median(run_times) if run_times else nan:.2f} s"),
        ("most jobs holding GPUs at once", f"{recorder.most_holding} (pool fits {config.concurrent})"),
        ("controller API requests per pod", per_pod),
        ("watch re-lists (410)", str(recorder.relists)),
    ]


def print_table(columns: list[list[tuple[str, str]]]) -> None:
    labels = [label for label, _ in columns[0]]
    width = max(len(label) for label in labels)
    values = [[value for _, value in column] for column in columns]
    widths = [max(len(value) for value in column) for column in values]
    print(f"{'metric':<{width}}  " + "  ".join(f"{'run ' + str(i + 1):<{w}}" for i, w in enumerate(widths)))
    print(f"{'-' * width}  " + "  ".join("-" * w for w in widths))
    for row, label in enumerate(labels):
        print(
            f"{label:<{width}}  "
            + "  ".join(f"{column[row]:<{w}}" for column, w in zip(values, widths, strict=True))
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"one run of {QUICK.jobs} jobs")
    parser.add_argument("--jobs", type=int, help="one run of this many jobs")
    parser.add_argument("--replicas", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--gpus-per-node", type=int)
    parser.add_argument("--duration", type=float, help="seconds each replica runs")
    parser.add_argument("--schedule-period", type=float, help="seconds between Volcano sessions")
    parser.add_argument("--deadline", type=float, help="seconds allowed for each run")
    parser.add_argument(
        "--in-process-controllers",
        dest="isolate_controllers",
        action="store_false",
        default=None,
        help="run the controllers in the API server's process (one core), as before",
    )
    args = parser.parse_args()
    overrides = {
        key: value
        for key, value in vars(args).items()
        if key != "quick" and value is not None and key in Config.__dataclass_fields__
    }
    if args.quick:
        bases = [QUICK]
    elif args.jobs is not None:
        bases = [TARGET if args.jobs >= TARGET.jobs else SMALL]
    else:
        bases = [SMALL, TARGET]
    results = [run(Config(**{**base.__dict__, **overrides})) for base in bases]
    print_table([rows_of(result) for result in results])
    return 0 if all(result.complete for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
