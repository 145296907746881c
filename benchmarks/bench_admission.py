"""Admission detection: `GangJobTrigger` (watches) vs a 10 s polling loop, on the same jobs.

For each gang job, how long after the gang is admitted does each strategy notice, and how many
API requests does it spend until then? Both strategies follow the *same* jobs at the *same*
time on one simulated cluster, so they see identical admission moments.

- **Pool and queue.** 2 nodes x 2 GPUs; every job is Master + 3 Workers of 1 GPU, so exactly one
  job fits. A blocker job takes the pool first; each measured job is submitted (PodGroup,
  PyTorchJob, ownerReference: what the operator does) 0.5 s after the job ahead of it was
  admitted, while that job holds the pool, so it really waits in the queue. Every job holds the
  pool for a seeded random 1.5 to 11.5 s (a range one poll interval wide), so the queue waits,
  and with them the admission moments, are spread over a whole poll interval: neither strategy
  controls or can predict them. Jobs are admitted one after another in Volcano sessions (1 s).
- **Ground truth.** A separate watcher (own thread, own event loop, own client) runs raw watches
  on PyTorchJobs, PodGroups and pods of the namespace and applies `gang_status` (the provider's
  admission rule) to its cache on every event; the first event after which the rule holds is the
  admission moment. Object timestamps were not used: Kubernetes writes them with one-second
  resolution, too coarse for a watch that reacts in milliseconds. The watch delivers each change
  within milliseconds on loopback, and the trigger learns of it through the same kind of watch,
  so the ground truth is late by about as much as the trigger's own notice (a few ms at most).
- **Strategies.** Ours: `GangJobTrigger(wait_for="admission")` with its defaults (list + watch of
  job, PodGroup and pods, re-reading the three on every change; 10 s poll fallback). Baseline: a
  loop like the cncf `KubernetesJobTrigger`'s, every 10 s doing what a poller needs for the
  same answer: GET job, GET PodGroup, LIST pods, then `gang_status`. Both start right after the
  submission, as a deferrable operator's trigger would, and stop when they detect admission.
  Both use `AsyncGangJobHook`, so their client stacks are identical.
- **Latency** = detection moment - ground-truth moment, one monotonic clock in this process.
- **Requests** are counted by the API server itself (``GET /sim/v1/metrics``), keyed by the
  User-Agent each strategy's clients send (one per strategy and job, set on the hook's
  ``ApiClient``). A watch counts once however long it streams and is reported apart from the
  short requests (get, list).

The cluster runs in a child process so the measuring clients do not share its interpreter;
everything talks over 127.0.0.1; jobs and the namespace are deleted at the end. Nothing is
asserted: the table is for comparing changes and strategies.

    .venv/bin/python benchmarks/bench_admission.py [--quick] [--jobs N] [--seed S]
"""

from __future__ import annotations

import os
import tempfile

# Before anything imports Airflow: never create or touch ~/airflow (make bench sets its own),
# and keep the hooks' and the trigger's INFO lines out of the report.
if "AIRFLOW_HOME" not in os.environ:
    _AIRFLOW_HOME = tempfile.TemporaryDirectory(prefix="bench-admission-airflow-")
    os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME.name
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

import argparse
import asyncio
import contextlib
import json
import logging
import random
import statistics
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import kubernetes_asyncio.client as aclient
import kubernetes_asyncio.config as aconfig
from airflow.triggers.base import TriggerEvent
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from sim_process import cluster_process, sim_metrics  # benchmarks/sim_process.py, beside this script
from tagged_clients import TaggedGangJobTrigger, tag  # beside this script

from airflow_gang.hooks.gang import AsyncGangJobHook, GangJobHook
from airflow_gang.model.gang_state import JOB_NAME_LABEL, GangPhase, gang_status
from airflow_gang.spec import GangJobSpec

JsonDict = dict[str, Any]
NAMESPACE = "bench-admission"
GANG_SCHEDULING = "provider"
AGENT_PREFIX = "airflow-gang-bench"
STRATEGIES = ("trigger", "polling")
LABELS = {"trigger": "GangJobTrigger (watch)", "polling": "polling loop"}
KINDS = {  # plural -> (group, version); "" is the core group
    "pytorchjobs": ("kubeflow.org", "v1"),
    "podgroups": ("scheduling.volcano.sh", "v1beta1"),
    "pods": ("", "v1"),
}
TRUTH_WATCH_SECONDS = 900  # longer than any run: the ground-truth watches never need a restart
# The next job is submitted this long after the ground truth saw the one ahead admitted, so
# setting it up (submission, a new trigger and poller: ~0.2 s of busy event loop) does not
# land on the moment the strategies detect the admission of the job ahead.
SUBMIT_GAP = 0.5
NOISY_LOGGERS = ("airflow_gang", "airflow", "uvicorn.error", "kubernetes_asyncio", "asyncio")


@dataclass(frozen=True)
class Config:
    jobs: int
    poll_interval: float
    schedule_period: float
    deadline: float
    """Seconds allowed from the blocker's submission to the last detection."""
    seed: int

    @property
    def hold(self) -> tuple[float, float]:
        """Range of seconds a job holds the pool: one poll interval wide, so phases spread.

        At least `SUBMIT_GAP` + 1 s, so the next job, submitted `SUBMIT_GAP` after this one's
        admission, still finds the pool busy for a second or more.
        """
        low = SUBMIT_GAP + 1.0
        return (low, low + self.poll_interval)


FULL = Config(jobs=10, poll_interval=10.0, schedule_period=1.0, deadline=150.0, seed=7)
QUICK = Config(jobs=3, poll_interval=10.0, schedule_period=1.0, deadline=42.0, seed=7)


def _quiet() -> None:
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


# --------------------------------------------------------------------------------------------
# Ground truth: the first moment the admission rule holds
# --------------------------------------------------------------------------------------------


class GroundTruth:
    """Raw watches on jobs, PodGroups and pods, `gang_status` on every event (own thread)."""

    def __init__(self, kubeconfig: str, loop: asyncio.AbstractEventLoop) -> None:
        self._kubeconfig = kubeconfig
        self._main_loop = loop
        self._cache: dict[str, dict[str, JsonDict]] = {plural: {} for plural in KINDS}
        self._lock = threading.Lock()
        self._admitted_at: dict[str, float] = {}
        self._waiters: dict[str, asyncio.Event] = {}
        self.queued: set[str] = set()
        """Jobs whose PodGroup Volcano marked ``Pending`` (not admitted) before their admission."""
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="bench-ground-truth", daemon=True)

    # -- main-loop side ---------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout) or self.error is not None:
            raise RuntimeError(f"ground-truth watches did not start: {self.error}")

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def admitted_at(self, name: str) -> float | None:
        with self._lock:
            return self._admitted_at.get(name)

    async def wait_admitted(self, name: str, timeout: float) -> float | None:
        """The ground-truth admission moment of ``name``; None if it did not come in time."""
        with self._lock:
            event = self._waiters.setdefault(name, asyncio.Event())
            if name in self._admitted_at:
                event.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.0, timeout))
        return self.admitted_at(name)

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
        api.user_agent = f"{AGENT_PREFIX}/ground-truth"
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
        """List (into the cache), then watch from the list's resourceVersion."""
        listed = json.loads(await (await self._request(api, plural)).read())
        for item in listed.get("items") or []:
            self._cache[plural][item["metadata"]["name"]] = item
        version = listed["metadata"]["resourceVersion"]
        return await self._request(
            api, plural, watch=True, resource_version=version, timeout_seconds=TRUTH_WATCH_SECONDS
        )

    @staticmethod
    def _request(api: aclient.ApiClient, plural: str, **params: Any) -> Any:
        group, version = KINDS[plural]
        if not group:
            return aclient.CoreV1Api(api).list_namespaced_pod(NAMESPACE, _preload_content=False, **params)
        return aclient.CustomObjectsApi(api).list_namespaced_custom_object(
            group, version, NAMESPACE, plural, _preload_content=False, **params
        )

    async def _consume(self, plural: str, stream: Any) -> None:
        async for line in stream.content:
            seen = time.monotonic()  # before parsing: the moment the change reached us
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                raise RuntimeError(f"ground-truth watch of {plural} failed: {event.get('object')}")
            if event.get("type") == "BOOKMARK":
                continue
            obj = event["object"]
            meta = obj["metadata"]
            if event["type"] == "DELETED":
                self._cache[plural].pop(meta["name"], None)
            else:
                self._cache[plural][meta["name"]] = obj
            job_name = (meta.get("labels") or {}).get(JOB_NAME_LABEL) if plural == "pods" else meta["name"]
            if job_name:
                self._evaluate(job_name, seen)
        raise RuntimeError(f"ground-truth watch of {plural} ended early")

    def _evaluate(self, name: str, seen: float) -> None:
        pods = [
            pod
            for pod in self._cache["pods"].values()
            if (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == name
        ]
        podgroup = self._cache["podgroups"].get(name)
        status = gang_status(self._cache["pytorchjobs"].get(name), podgroup, pods, GANG_SCHEDULING)
        with self._lock:
            if name in self._admitted_at:
                return
            if status.admitted:
                self._admitted_at[name] = seen
                waiter = self._waiters.get(name)
                if waiter is not None:
                    self._main_loop.call_soon_threadsafe(waiter.set)
            elif status.phase is GangPhase.QUEUED and status.podgroup_phase == "Pending":
                self.queued.add(name)  # a Volcano session looked at the gang and could not admit it


# --------------------------------------------------------------------------------------------
# The two strategies
# --------------------------------------------------------------------------------------------


def agent(strategy: str, job: str) -> str:
    return f"{AGENT_PREFIX}/{strategy}/{job}"


async def detect_with_trigger(name: str, uid: str, hook_kwargs: JsonDict, config: Config) -> float:
    trigger = TaggedGangJobTrigger(
        name,
        NAMESPACE,
        uid,
        user_agent=agent("trigger", name),
        wait_for="admission",
        gang_scheduling=GANG_SCHEDULING,
        poll_interval=config.poll_interval,
        hook_kwargs=hook_kwargs,
        # Its own watches, so the API server can count each job's requests (the triggerer's
        # shared watch cache serves all triggers of a connection with three watches).
        watch="per_trigger",
    )
    events = cast(AsyncGenerator[TriggerEvent, None], trigger.run())  # an async generator
    async with contextlib.aclosing(events):
        async for event in events:
            detected = time.monotonic()
            if event.payload["status"] != "admitted":
                raise RuntimeError(f"trigger for {name} reported {event.payload}")
            return detected
    raise RuntimeError(f"trigger for {name} ended without an event")


async def detect_by_polling(name: str, hook_kwargs: JsonDict, config: Config) -> float:
    """What a polling trigger needs for the same answer, every ``poll_interval`` seconds."""
    hook = tag(AsyncGangJobHook(**hook_kwargs), agent("polling", name))
    while True:
        job = await hook.get_pytorchjob(name, NAMESPACE)
        podgroup = await hook.get_podgroup(name, NAMESPACE)
        pods = await hook.list_job_pods(name, NAMESPACE)
        if gang_status(job, podgroup, pods, GANG_SCHEDULING).admitted:
            return time.monotonic()
        await asyncio.sleep(config.poll_interval)  # a fixed delay after each poll, as the cncf trigger


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class JobResult:
    name: str
    submitted: float
    admitted: float | None = None
    detected: dict[str, float] = field(default_factory=dict)

    def latency(self, strategy: str) -> float | None:
        moment = self.detected.get(strategy)
        return None if moment is None or self.admitted is None else moment - self.admitted


@dataclass
class RunResult:
    config: Config
    jobs: list[JobResult]
    queued: set[str]
    requests: dict[str, dict[str, dict[str, int]]]
    """strategy -> job -> verb -> count, as the API server counted them."""
    seconds: float
    problems: list[str]


def job_spec(hold: float) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=3,
        resources={"nvidia.com/gpu": 1},
        gang_scheduling=GANG_SCHEDULING,
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": f"{hold:.2f}"}}},
    )


def submit(hook: GangJobHook, name: str, hold: float) -> str:
    """What the operator submits: the PodGroup, the PyTorchJob, then the job owns the PodGroup."""
    spec = job_spec(hold)
    podgroup = spec.build_podgroup(name, NAMESPACE)
    if podgroup is None:  # pragma: no cover - provider mode always builds one
        raise RuntimeError("no PodGroup built")
    hook.create_podgroup(podgroup, NAMESPACE)
    job = hook.create_pytorchjob(spec.build_pytorchjob(name, NAMESPACE), NAMESPACE)
    hook.set_podgroup_owner(name, NAMESPACE, job)
    return str(job["metadata"]["uid"])


def cleanup(hook: GangJobHook, names: list[str]) -> list[str]:
    """Delete every job (its PodGroup and pods follow), then the namespace; returns leftovers."""
    for name in names:
        hook.delete_pytorchjob(name, NAMESPACE, propagation="Foreground")
        hook.delete_podgroup(name, NAMESPACE)
    left = [
        name
        for name in names
        if not (
            hook.wait_deleted("pytorchjob", name, NAMESPACE, 15)
            and hook.wait_deleted("podgroup", name, NAMESPACE, 5)
        )
    ]
    core = hook.core_v1_client
    if not core.list_namespaced_pod(NAMESPACE).items and not left:
        core.delete_namespace(NAMESPACE)
    return left


def request_counts(api: k8s.ApiClient) -> dict[str, dict[str, dict[str, int]]]:
    """The API server's own counters for the benchmark's strategies: strategy -> job -> verb -> n."""
    body = sim_metrics(api)
    counts: dict[str, dict[str, dict[str, int]]] = {strategy: {} for strategy in STRATEGIES}
    for entry in body["requests"]:
        parts = entry["userAgent"].split("/")
        if len(parts) == 3 and parts[0] == AGENT_PREFIX and parts[1] in counts:
            verbs = counts[parts[1]].setdefault(parts[2], {})
            verbs[entry["verb"]] = verbs.get(entry["verb"], 0) + entry["count"]
    return counts


async def follow_job(result: JobResult, uid: str, hook_kwargs: JsonDict, config: Config) -> None:
    """Run both strategies on one job, side by side, until each has detected admission."""
    strategies: dict[str, Callable[[], Any]] = {
        "trigger": lambda: detect_with_trigger(result.name, uid, hook_kwargs, config),
        "polling": lambda: detect_by_polling(result.name, hook_kwargs, config),
    }
    tasks = {strategy: asyncio.create_task(run()) for strategy, run in strategies.items()}
    try:
        for strategy, task in tasks.items():
            result.detected[strategy] = await task
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def measure(kubeconfig: str, config: Config) -> RunResult:
    hook = GangJobHook(config_file=kubeconfig)
    await asyncio.to_thread(hook.core_v1_client.create_namespace, {"metadata": {"name": NAMESPACE}})
    hook_kwargs = hook.async_hook_kwargs()  # what the operator hands its trigger
    truth = GroundTruth(kubeconfig, asyncio.get_running_loop())
    await asyncio.to_thread(truth.start)
    rng = random.Random(config.seed)
    names: list[str] = []
    jobs: list[JobResult] = []
    followers: list[asyncio.Task[None]] = []
    problems: list[str] = []
    started = time.monotonic()
    deadline = started + config.deadline
    try:
        names.append("blocker")
        await asyncio.to_thread(submit, hook, "blocker", rng.uniform(*config.hold))
        ahead = "blocker"
        for index in range(1, config.jobs + 1):
            if await truth.wait_admitted(ahead, deadline - time.monotonic()) is None:
                problems.append(f"{ahead} was not admitted before the deadline; stopped submitting")
                break
            # The job ahead now holds the pool: the next one will queue behind it.
            await asyncio.sleep(SUBMIT_GAP)
            name, hold = f"job-{index:02d}", rng.uniform(*config.hold)
            names.append(name)
            uid = await asyncio.to_thread(submit, hook, name, hold)
            result = JobResult(name, submitted=time.monotonic())
            jobs.append(result)
            followers.append(asyncio.create_task(follow_job(result, uid, hook_kwargs, config)))
            ahead = name
        _, pending = await asyncio.wait(followers, timeout=max(0.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        for task in followers:
            if not task.cancelled() and task.exception() is not None:
                problems.append(f"a strategy failed: {task.exception()!r}")
        for result in jobs:
            result.admitted = truth.admitted_at(result.name)
            missing = [s for s in STRATEGIES if s not in result.detected]
            if missing:
                problems.append(f"{result.name}: no detection by {', '.join(missing)} before the deadline")
        seconds = time.monotonic() - started
    finally:
        truth.stop()
        left = await asyncio.to_thread(cleanup, hook, names)
        if left:
            problems.append(f"not deleted in time: {', '.join(left)}")
    if truth.error is not None:
        problems.append(f"ground-truth watcher: {truth.error!r}")
    with k8s_config.new_client_from_config(config_file=kubeconfig) as api:
        requests = await asyncio.to_thread(request_counts, api)
    return RunResult(config, jobs, set(truth.queued), requests, seconds, problems)


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 1]."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None:
        return "-"
    if theirs == 0:  # e.g. watches: the polling loop opens none
        return "-" if ours == 0 else "n/a"
    return f"{ours / theirs:.3g}x"


def number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(result: RunResult, strategy: str) -> dict[str, float | None]:
    latencies = [v for job in result.jobs if (v := job.latency(strategy)) is not None]
    per_job = result.requests[strategy]
    jobs = len(result.jobs) or 1
    watches = sum(verbs.get("watch", 0) for verbs in per_job.values())
    short = sum(n for verbs in per_job.values() for verb, n in verbs.items() if verb != "watch")
    return {
        "jobs": float(len(latencies)),
        "p50": statistics.median(latencies) if latencies else None,
        "p95": percentile(latencies, 0.95) if latencies else None,
        "requests": short / jobs,
        "watches": watches / jobs,
    }


def aligned(cells: Sequence[str], widths: Sequence[int], indent: int = 0) -> str:
    """First column left-aligned, the others right-aligned."""
    padded = [
        cell.ljust(width) if index == 0 else cell.rjust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
    ]
    return " " * indent + "  ".join(padded)


def print_report(result: RunResult) -> None:
    config = result.config
    rows = {strategy: summary(result, strategy) for strategy in STRATEGIES}
    ours, theirs = rows["trigger"], rows["polling"]
    header = ("strategy", "jobs", "p50 latency s", "p95 latency s", "requests/job", "watches/job")
    table = [
        [
            LABELS[strategy],
            f"{row['jobs']:.0f}",
            number(row["p50"]),
            number(row["p95"]),
            number(row["requests"], 1),
            number(row["watches"], 1),
        ]
        for strategy, row in rows.items()
    ]
    table.append(
        [
            "ratio ours/polling",
            "",
            *(ratio(ours[key], theirs[key]) for key in ("p50", "p95", "requests", "watches")),
        ]
    )
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *table, strict=True)]
    print(
        f"Admission detection: {len(result.jobs)} queued gang jobs, polling every "
        f"{config.poll_interval:g} s, Volcano session {config.schedule_period:g} s, "
        f"seed {config.seed}, measured phase {result.seconds:.0f} s"
    )
    print(aligned(header, widths))
    print("  ".join("-" * w for w in widths))
    for line in table:
        print(aligned(line, widths))
    print()
    print("Per job (latency = detection - ground-truth admission; requests = short/watch):")
    columns = ("job", "queued s", "trigger s", "polling s", "trigger req", "polling req")
    job_widths = [7, 8, 10, 10, 12, 12]
    print(aligned(columns, job_widths, indent=2))
    for job in result.jobs:
        waited = None if job.admitted is None else job.admitted - job.submitted
        counts = []
        for strategy in STRATEGIES:
            verbs = result.requests[strategy].get(job.name, {})
            short = sum(n for verb, n in verbs.items() if verb != "watch")
            counts.append(f"{short}/{verbs.get('watch', 0)}")
        cells = (job.name, number(waited, 2), number(job.latency("trigger")), number(job.latency("polling")))
        print(aligned((*cells, *counts), job_widths, indent=2))
    for strategy in STRATEGIES:
        mix: dict[str, int] = {}
        for verbs in result.requests[strategy].values():
            for verb, n in verbs.items():
                mix[verb] = mix.get(verb, 0) + n
        shown = ", ".join(f"{verb} {n}" for verb, n in sorted(mix.items()))
        print(f"  requests by verb, {LABELS[strategy]}: {shown or 'none'}")
    not_queued = [job.name for job in result.jobs if job.name not in result.queued]
    if not_queued:
        print(f"  note: never seen waiting in the queue: {', '.join(not_queued)}")
    for problem in result.problems:
        print(f"  PROBLEM: {problem}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.jobs} jobs instead of {FULL.jobs}")
    parser.add_argument("--jobs", type=int, help="measured jobs")
    parser.add_argument("--seed", type=int, help="seed of the hold times")
    args = parser.parse_args()
    config = QUICK if args.quick else FULL
    if args.jobs is not None:
        # Every job adds at most one hold plus a session to the run.
        extra = (args.jobs - config.jobs) * (config.hold[1] + 2 * config.schedule_period)
        config = Config(**{**config.__dict__, "jobs": args.jobs, "deadline": config.deadline + max(0, extra)})
    if args.seed is not None:
        config = Config(**{**config.__dict__, "seed": args.seed})
    _quiet()
    options = {"nodes": 2, "gpus_per_node": 2, "schedule_period": config.schedule_period}
    with cluster_process(options, quiet=NOISY_LOGGERS, stop_timeout=20) as kubeconfig:
        result = asyncio.run(measure(kubeconfig, config))
    print_report(result)
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
