"""How often a real Airflow deployment fails deferred gang tasks whose jobs succeed.

Airflow 3.3.2 fails a task when its resumed try is already queued or running before the scheduler
has read the executor's "success" of the deferring try (apache/airflow#72716, #71580). This runs
the mapped sweep of six deferrable 4-GPU gangs (``retries=0``) on the 2 x 2-GPU embedded cluster
under a real scheduler, triggerer, dag-processor and api-server (`AirflowStack`), ``--runs``
times per configuration, and prints a table: tasks failed although their job succeeded, the
scheduler's "state attribute is running" lines, and jobs left on the cluster.

Configurations (``--configs``, comma-separated):

- ``hold``: this checkout with ``[gang] resume_hold_seconds`` = ``--hold`` (default 10);
- ``no-hold``: this checkout with the hold off (0): one deferral per try, fired as soon as the
  job finishes;
- ``before``: the provider at ``--before-ref`` (default ``853fdf6``, before the fix: progress
  round trips, no hold), checked out into a temporary git worktree and put first on the
  components' PYTHONPATH; the harness and the simulator are this checkout's.

    .venv/bin/python benchmarks/bench_deferral_race.py --runs 10
    .venv/bin/python benchmarks/bench_deferral_race.py --runs 3 --configs hold,before
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client as k8s

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gang_sim.cluster import SimCluster  # noqa: E402
from gang_stack import AirflowStack  # noqa: E402
from tests.realstack.dags import sweep_dag  # noqa: E402  (the real-stack tests' sweep)

SETTLE_SECONDS = 12
REAPER = {"AIRFLOW__GANG__ORPHAN_REAPER_INTERVAL": "3"}
RACE_MESSAGE = "finished with state success, but the task instance's state attribute is"
DAG_ID = "bench_gang_sweep"
SWEEP = sweep_dag(DAG_ID, "provider", 300)


@dataclass
class Outcome:
    config: str
    runs: int = 0
    tasks: int = 0
    failed: int = 0
    race_lines: int = 0
    left_behind: int = 0
    seconds: list[float] = field(default_factory=list)


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="gang-before-"))
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), ref],
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)],
            check=False,
            capture_output=True,
        )


def jobs(api: k8s.ApiClient) -> list[dict[str, object]]:
    listed = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "pytorchjobs"
    )
    return list(listed["items"])


def settled_jobs(api: k8s.ApiClient) -> list[dict[str, object]]:
    """The jobs still there once cleanups and the reaper (every 3 s here) had their chance."""
    deadline = time.monotonic() + SETTLE_SECONDS
    remaining = jobs(api)
    while remaining and time.monotonic() < deadline:
        time.sleep(1.0)
        remaining = jobs(api)
    return remaining


def measure(config: str, runs: int, env: dict[str, str], dags: Path) -> Outcome:
    outcome = Outcome(config)
    with (
        SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.5) as cluster,
        AirflowStack(dags, kubeconfig=cluster.kubeconfig_path, extra_env=env, parallelism=8) as stack,
        cluster.api_client() as api,
    ):
        stack.client.wait_for_dag(DAG_ID, timeout=120)
        for _ in range(runs):
            began = time.monotonic()
            run_id = stack.client.trigger(DAG_ID)
            stack.client.wait_for_run(DAG_ID, run_id, timeout=600)
            outcome.seconds.append(time.monotonic() - began)
            outcome.runs += 1
            tis = stack.client.task_instances(DAG_ID, run_id)
            outcome.tasks += len(tis)
            failed = [ti for ti in tis if ti["state"] != "success"]
            outcome.failed += len(failed)
            remaining = settled_jobs(api)
            outcome.left_behind += len(remaining)
            for job in remaining:  # start the next run on an empty pool
                name = job["metadata"]["name"]  # type: ignore[index]
                k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
                    "kubeflow.org",
                    "v1",
                    "default",
                    "pytorchjobs",
                    name,
                    body={"propagationPolicy": "Foreground"},
                )
        outcome.race_lines = stack.component_log("scheduler").count(RACE_MESSAGE)
    return outcome


def print_table(outcomes: list[Outcome]) -> None:
    header = (
        "configuration",
        "runs",
        "tasks",
        "failed",
        "failed %",
        "race log lines",
        "jobs left",
        "sweep s (mean)",
    )
    rows = [
        (
            o.config,
            str(o.runs),
            str(o.tasks),
            str(o.failed),
            f"{100 * o.failed / o.tasks:.0f}%" if o.tasks else "-",
            str(o.race_lines),
            str(o.left_behind),
            f"{sum(o.seconds) / len(o.seconds):.1f}" if o.seconds else "-",
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="sweeps per configuration (6 tasks each)")
    parser.add_argument("--hold", type=float, default=10.0, help="resume_hold_seconds of 'hold'")
    parser.add_argument("--configs", default="before,no-hold,hold")
    parser.add_argument("--before-ref", default="853fdf6")
    parser.add_argument("--quick", action="store_true", help="one sweep of the 'hold' configuration")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.configs = 1, "hold"
    dags = Path(tempfile.mkdtemp(prefix="bench-race-dags-"))
    (dags / f"{DAG_ID}.py").write_text(SWEEP)
    outcomes = []
    for config in args.configs.split(","):
        print(f"== {config}: {args.runs} sweeps", flush=True)
        if config == "before":
            with worktree(args.before_ref) as old:
                env = {"PYTHONPATH": str(old), **REAPER}  # 0.1 has neither hold nor reaper
                outcomes.append(measure(f"before ({args.before_ref})", args.runs, env, dags))
        elif config == "no-hold":
            outcomes.append(
                measure(
                    "one deferral, hold 0 s",
                    args.runs,
                    {**REAPER, "AIRFLOW__GANG__RESUME_HOLD_SECONDS": "0"},
                    dags,
                )
            )
        elif config == "hold":
            outcomes.append(
                measure(
                    f"one deferral, hold {args.hold:g} s",
                    args.runs,
                    {**REAPER, "AIRFLOW__GANG__RESUME_HOLD_SECONDS": str(args.hold)},
                    dags,
                )
            )
        else:
            parser.error(f"unknown configuration {config!r}")
        print_table(outcomes[-1:])  # so far, in case a later configuration breaks
    print()
    print_table(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
