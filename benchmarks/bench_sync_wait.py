"""How soon a sync-mode wait (in the worker) notices its job finished: watches vs polling vs the trigger.

Issue 24. A ``deferrable=False`` task waits in its worker; before, it read the job, PodGroup and
pods every ``poll_interval`` (10 s), so a job was noticed up to 10 s after it finished. Now the
worker's wait follows the three with watches (`airflow_gang.jobs.job_watch`). This runs
``--jobs`` short gang jobs (one Master, 1 GPU, ``--seconds`` each; ``--concurrency`` at a time)
on the embedded cluster (its own child process) and follows every job with three waiters side by
side, each with its own client and User-Agent:

- ``sync watch``: `WorkerWait` as the operator runs it now (watches; polls only while they fail);
- ``sync poll``: `WorkerWait` with ``watch=False``: the wait before this change;
- ``deferrable``: `GangJobTrigger` with its own watches, as in a triggerer.

**Latency** is the moment each waiter returns minus the moment a ground-truth watcher (a raw
watch of the PyTorchJobs in this process) received the job's ``Succeeded`` condition; both on
this machine's wall clock. **Requests per job** are counted by the API server per User-Agent
(``/sim/v1/metrics``): every list, get and watch a waiter made, from its start to its return.

Targets (issue 24): ``sync watch`` p95 <= 1 s, and no more requests per job than ``sync poll``.

    .venv/bin/python benchmarks/bench_sync_wait.py            # 20 jobs of 2 s, 5 at a time
    .venv/bin/python benchmarks/bench_sync_wait.py --quick    # 4 jobs
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

os.environ.setdefault("AIRFLOW__GANG__RESUME_HOLD_SECONDS", "0")  # measured: the wait, not the hold

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch
from sim_process import cluster_process, sim_metrics  # beside this script
from tagged_clients import TaggedGangJobTrigger, TaggedHook  # beside this script

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs.wait_plan import WaitPlan
from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.operators.worker_wait import WorkerWait
from airflow_gang.spec import GangJobSpec

JsonDict = dict[str, Any]
NAMESPACE = "default"
AGENT_PREFIX = "airflow-gang-bench-sync"
WAITERS = ("sync watch", "sync poll", "deferrable")
NOISY_LOGGERS = (
    "bench",
    "airflow_gang",
    "airflow",
    "airflow.task",
    "uvicorn.error",
    "kubernetes_asyncio",
    "asyncio",
    "urllib3",
)


def agent(waiter: str, job: str) -> str:
    return f"{AGENT_PREFIX}/{waiter.replace(' ', '-')}/{job}"


class GroundTruth(threading.Thread):
    """Stamps the arrival of each job's ``Succeeded`` condition, from a raw watch."""

    def __init__(self, api: k8s.ApiClient) -> None:
        super().__init__(daemon=True, name="ground-truth")
        self.api = api
        self.finished: dict[str, float] = {}
        self.stream = watch.Watch()
        self.stopped = False

    def run(self) -> None:
        custom = k8s.CustomObjectsApi(self.api)
        while not self.stopped:
            try:  # resumed from the last version seen when the server ends the stream
                for event in self.stream.stream(
                    custom.list_namespaced_custom_object,
                    "kubeflow.org",
                    "v1",
                    NAMESPACE,
                    "pytorchjobs",
                    resource_version=self.stream.resource_version,
                    deserialize=False,
                ):
                    job = event["object"]
                    name = job["metadata"]["name"]
                    condition = last_true_condition(job) or {}
                    if name not in self.finished and condition.get("type") == "Succeeded":
                        self.finished[name] = time.time()
            except Exception:  # a cut stream: watch again
                time.sleep(0.05)

    def stop(self) -> None:
        self.stopped = True
        self.stream.stop()


def wait_sync(kubeconfig: str, job: JsonDict, waiter: str, poll_interval: float) -> float:
    hook = TaggedHook(conn_id=None, config_file=kubeconfig, user_agent=agent(waiter, job["metadata"]["name"]))
    wait = WorkerWait(
        hook,
        logging.getLogger("bench"),
        poll_interval,
        on_change=lambda _status: None,
        follow_logs=False,
        watch=waiter == "sync watch",
    )
    end = wait.run(job, WaitPlan.for_job(job, "provider", "completion", admission_timeout=None))
    assert end.kind == "finished", end.kind
    return time.time()


def wait_deferred(kubeconfig: str, job: JsonDict, poll_interval: float) -> float:
    name = job["metadata"]["name"]
    trigger = TaggedGangJobTrigger(
        name=name,
        namespace=NAMESPACE,
        uid=job["metadata"]["uid"],
        gang_scheduling="provider",
        poll_interval=poll_interval,
        watch="per_trigger",
        hook_kwargs={"conn_id": None, "config_file": kubeconfig},
        user_agent=agent("deferrable", name),
    )

    async def first() -> None:
        async for event in trigger.run():
            assert event.payload["status"] == "succeeded", event.payload
            return

    asyncio.run(first())
    return time.time()


def run_job(kubeconfig: str, seconds: float, poll_interval: float) -> tuple[str, dict[str, float]]:
    """Submit one job as the operator does and follow it with the three waiters side by side."""
    hook = GangJobHook(conn_id=None, config_file=kubeconfig)
    name = f"sync-{uuid.uuid4().hex[:8]}"
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=0,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}},
    )
    podgroup = spec.build_podgroup(name, NAMESPACE)
    assert podgroup is not None
    hook.create_podgroup(podgroup, NAMESPACE)
    job = hook.create_pytorchjob(spec.build_pytorchjob(name, NAMESPACE), NAMESPACE)
    hook.set_podgroup_owner(name, NAMESPACE, job)
    with ThreadPoolExecutor(len(WAITERS)) as pool:
        futures = {
            "sync watch": pool.submit(wait_sync, kubeconfig, job, "sync watch", poll_interval),
            "sync poll": pool.submit(wait_sync, kubeconfig, job, "sync poll", poll_interval),
            "deferrable": pool.submit(wait_deferred, kubeconfig, job, poll_interval),
        }
        detected = {
            waiter: future.result(timeout=seconds + 3 * poll_interval + 120)
            for waiter, future in futures.items()
        }
    hook.delete_pytorchjob(name, NAMESPACE, propagation="Foreground")
    hook.delete_podgroup(name, NAMESPACE)
    return name, detected


def request_counts(api: k8s.ApiClient) -> dict[str, dict[str, int]]:
    """Requests per waiter and job, as the API server counted them."""
    body = sim_metrics(api)
    counts: dict[str, dict[str, int]] = {waiter: {} for waiter in WAITERS}
    for entry in body["requests"]:
        parts = entry["userAgent"].split("/")
        if len(parts) == 3 and parts[0] == AGENT_PREFIX:
            waiter = parts[1].replace("-", " ")
            counts[waiter][parts[2]] = counts[waiter].get(parts[2], 0) + entry["count"]
    return counts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=2.0, help="how long each job runs")
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="4 jobs")
    args = parser.parse_args()
    jobs = 4 if args.quick else args.jobs
    for logger in NOISY_LOGGERS:
        logging.getLogger(logger).setLevel(logging.CRITICAL)
    options = {"nodes": 2, "gpus_per_node": 8, "schedule_period": 0.2}
    began = time.monotonic()
    with cluster_process(options, quiet=NOISY_LOGGERS, stop_timeout=20) as kubeconfig:
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
        truth = GroundTruth(api)
        truth.start()
        with ThreadPoolExecutor(args.concurrency) as pool:
            runs = list(
                pool.map(lambda _: run_job(kubeconfig, args.seconds, args.poll_interval), range(jobs))
            )
        counts = request_counts(api)
        truth.stop()
    latencies: dict[str, list[float]] = {waiter: [] for waiter in WAITERS}
    for name, detected in runs:
        for waiter, moment in detected.items():
            latencies[waiter].append(1000 * (moment - truth.finished[name]))
    print(
        f"Sync wait detection: {jobs} jobs of {args.seconds:g} s, {args.concurrency} at a time, "
        f"poll_interval {args.poll_interval:g} s ({time.monotonic() - began:.0f} s)"
    )
    print()
    header = ("waiter", "p50 ms", "p95 ms", "max ms", "requests/job")
    rows = [
        (
            waiter,
            f"{statistics.median(latencies[waiter]):.0f}",
            f"{percentile(latencies[waiter], 0.95):.0f}",
            f"{max(latencies[waiter]):.0f}",
            f"{sum(counts[waiter].values()) / jobs:.1f}",
        )
        for waiter in WAITERS
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * width for width in widths), *rows):
        print(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        )
    p95 = percentile(latencies["sync watch"], 0.95)
    per_job = {waiter: sum(counts[waiter].values()) / jobs for waiter in WAITERS}
    print()
    print(f"target sync watch p95 <= 1000 ms: {'met' if p95 <= 1000 else 'MISSED'} ({p95:.0f} ms)")
    fewer = per_job["sync watch"] <= per_job["sync poll"]
    print(
        f"target sync watch requests/job <= sync poll: {'met' if fewer else 'MISSED'} "
        f"({per_job['sync watch']:.1f} vs {per_job['sync poll']:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
