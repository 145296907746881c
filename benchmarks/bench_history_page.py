"""The Gang jobs page with thousands of jobs cleanup has deleted: how long its API calls take.

Fills a private Airflow metadata DB (SQLite, ``airflow db migrate``) with N recorded jobs as the
operator writes them (``gang_history`` task state store entries of 20 DAGs, their runs and 25
mapped task instances each, a third of them with retries after admission timeouts; no
``task_instance`` rows, which the page only outer-joins for a state), starts an embedded cluster
(no live jobs: the recorded ones are the load), and times the page's calls to the plugin app
served by uvicorn over HTTP, as a browser makes them, the page's three per refresh concurrently.
Prints one table; the target (the page loads in under 1 s with 10,000 jobs) is reported, not
asserted.

    .venv/bin/python benchmarks/bench_history_page.py [--jobs 10000] [--repeat 10] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

NAMESPACE = "default"
CONN_ID = "bench_history"
DAGS = 20
MAP_WIDTH = 25  # mapped task instances per run
TARGET_SECONDS = 1.0
PAGE_LOAD = "page load (jobs + queues + timeline)"


def prepare_home(home: Path) -> None:
    """Env for a private Airflow before anything imports it, then ``airflow db migrate``."""
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "false"
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home / 'airflow.db'}"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(home / "dags")
    (home / "dags").mkdir(parents=True, exist_ok=True)
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, timeout=600)


def records_for(dag: int, run: int, index: int, now: float) -> list[dict[str, Any]]:
    """The records one task instance keeps: one job, or two or three when admission timeouts
    made it retry."""
    from airflow_gang.state import history

    tries = 1 + (index % 3 == 0) + (index % 9 == 0)
    kept = []
    for try_number in range(1, tries + 1):
        submitted = now - (dag * 7 + run * 3 + index) * 60 - try_number * 5
        job = {
            "metadata": {
                "name": f"train-{dag:02d}{run:03d}{index:02d}{try_number}",
                "namespace": NAMESPACE,
                "uid": f"uid-{dag}-{run}-{index}-{try_number}",
                "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(submitted)),
            },
            "spec": {
                "runPolicy": {"schedulingPolicy": {"queue": f"team-{dag % 4}"}},
                "pytorchReplicaSpecs": {
                    kind: {
                        "replicas": count,
                        "template": {
                            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}
                        },
                    }
                    for kind, count in (("Master", 1), ("Worker", 3))
                },
            },
        }
        moment = dt.datetime.fromtimestamp(submitted, dt.UTC)
        started = history.started(job, try_number=try_number, gang_scheduling="provider", now=moment)
        if try_number < tries:
            end = history.ended(started, "admission_timeout", now=moment + dt.timedelta(seconds=1800))
        else:
            admitted = (moment + dt.timedelta(seconds=40)).isoformat()
            finished = (moment + dt.timedelta(seconds=600)).isoformat()
            state = "failed" if index % 11 == 0 else "succeeded"
            extra = {"failed_replica": "Worker 1", "exit_code": 1} if state == "failed" else {}
            end = history.ended(
                started, state, now=moment, admitted_at=admitted, finished_at=finished, reason=None, **extra
            )
        kept.append(end)
    return kept


def fill(jobs: int) -> tuple[int, str, str]:
    """At least ``jobs`` recorded jobs; (how many, one DAG id, one job name)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    now = time.time()
    written = 0
    runs_per_dag = max(1, -(-jobs // (DAGS * MAP_WIDTH * 4 // 3)))
    with create_session() as session:
        session.add(DagBundleModel(name="dags-folder"))
        session.flush()
        for dag in range(DAGS):
            session.add(DagModel(dag_id=f"sweep_{dag:02d}", fileloc="bench.py", bundle_name="dags-folder"))
        session.flush()
        for dag in range(DAGS):
            for run in range(runs_per_dag):
                if written >= jobs:
                    break
                dag_id, run_id = f"sweep_{dag:02d}", f"scheduled__bench_{run:04d}"
                session.add(DagRun(dag_id=dag_id, run_id=run_id, run_type="scheduled", state="success"))
                session.flush()
                dag_run_id = session.scalar(
                    select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
                )
                rows = []
                for index in range(MAP_WIDTH):
                    kept = records_for(dag, run, index, now)
                    written += len(kept)
                    rows.append(
                        {
                            "dag_run_id": dag_run_id,
                            "dag_id": dag_id,
                            "run_id": run_id,
                            "task_id": "train",
                            "map_index": index,
                            "key": "gang_history",
                            "value": json.dumps(kept),
                        }
                    )
                session.execute(insert(TaskStateStoreModel), rows)
    return written, "sweep_03", records_for(0, 0, 1, now)[-1]["name"]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def serve_page(kubeconfig: str) -> tuple[Any, threading.Thread, str]:
    """The plugin app at /gang, served by uvicorn on a free port: (server, its thread, API URL)."""
    import uvicorn
    from fastapi import FastAPI

    from airflow_gang.plugins.app import create_app
    from airflow_gang.plugins.settings import UiSettings

    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}}
    )
    settings = UiSettings(conn_id=CONN_ID, namespaces=(NAMESPACE,))
    root = FastAPI()
    root.mount("/gang", create_app(authenticate=False, settings_loader=lambda: settings))
    server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}/gang/api"


def measure(base: str, calls: dict[str, str], written: int, repeat: int) -> dict[str, list[float]]:
    """Seconds per call, ``repeat`` times each, and the page's three calls made together."""
    import httpx

    timings: dict[str, list[float]] = {label: [] for label in [*calls, PAGE_LOAD]}
    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(3) as pool:
        first = client.get(f"{base}/jobs").json()
        if first["total"] != written:
            raise SystemExit(f"the page counts {first['total']} jobs, {written} were recorded")
        for _ in range(repeat):
            for label, path in calls.items():
                start = time.perf_counter()
                client.get(f"{base}{path}").raise_for_status()
                timings[label].append(time.perf_counter() - start)
            start = time.perf_counter()
            for answer in pool.map(
                lambda path: client.get(f"{base}{path}"), ["/jobs", "/queues", "/timeline"]
            ):
                answer.raise_for_status()
            timings[PAGE_LOAD].append(time.perf_counter() - start)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, 3 repeats: a smoke test")
    args = parser.parse_args()
    jobs, repeat = (1_000, 3) if args.quick else (args.jobs, args.repeat)

    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        began = time.monotonic()
        prepare_home(Path(tmp))
        from gang_sim.cluster import SimCluster

        written, dag_id, one_job = fill(jobs)
        prepared = time.monotonic() - began
        with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.5) as cluster:
            server, thread, base = serve_page(cluster.kubeconfig_path)
            calls = {
                "GET /api/jobs (first page of 100)": "/jobs",
                f"GET /api/jobs?state=failed&dag_id={dag_id}": f"/jobs?state=failed&dag_id={dag_id}",
                "GET /api/jobs (last page)": f"/jobs?offset={max(0, written - 100)}",
                "GET /api/timeline (first page)": "/timeline",
                "GET /api/queues": "/queues",
                "GET /api/jobs/<deleted job>": f"/jobs/{NAMESPACE}/{one_job}",
            }
            try:
                timings = measure(base, calls, written, repeat)
            finally:
                server.should_exit = True
                thread.join(timeout=10)

    load = statistics.median(timings[PAGE_LOAD])
    print(
        f"\nGang jobs page with {written:,} recorded jobs ({DAGS} DAGs; metadata DB SQLite), "
        f"{repeat} repeats, {os.cpu_count()} cores; setup {prepared:.0f}s"
    )
    width = max(len(label) for label in timings)
    print(f"{'call':<{width}}  {'median s':>9}  {'p95 s':>7}")
    for label, values in timings.items():
        print(f"{label:<{width}}  {statistics.median(values):>9.3f}  {percentile(values, 0.95):>7.3f}")
    verdict = "target met" if load < TARGET_SECONDS else "target missed"
    print(f"{PAGE_LOAD}: median {load:.3f}s against a target of {TARGET_SECONDS:.0f}s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
