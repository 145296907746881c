"""Seeded chaos lifecycles on a real Airflow deployment: does the provider ever delete a job it
should not, leave one behind, or submit one twice?

Starts its own embedded cluster (4 nodes x 2 GPUs, the training-operator running with
``--gang-scheduler-name=volcano`` so both gang modes are real) and a real Airflow
(`AirflowStack`: api-server, scheduler with 8 LocalExecutor slots, dag-processor, triggerer)
serving the chaos DAGs, then runs ``--lifecycles`` seeded lifecycles (success, replica failure,
admission timeout then retry, kill, clear; sync or deferrable; provider or training-operator
gangs) at most ``--concurrency`` at once, while the API server answers 5 % of requests with
500/503/429, cuts watches every few seconds, goes away twice for 5-20 s, deletes one job from
outside, and the triggerer is SIGKILLed and restarted once (`benchmarks/chaos.py`).
Prints one table; exits 1 when a target is missed (100 % of tasks in their expected end state,
nothing left behind, no job submitted twice for one try, no healthy job deleted).

    .venv/bin/python benchmarks/bench_chaos.py --quick            # 12 lifecycles, ~2 min
    .venv/bin/python benchmarks/bench_chaos.py --lifecycles 200 --seed 1
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from chaos import CHAOS_DAG_FILES, ChaosReport, run_chaos  # benchmarks/chaos.py, beside this script

from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack

ENV = {
    # The reaper sweeps every 3 s (default 30 s) so the count of what is left needs seconds.
    "AIRFLOW__GANG__ORPHAN_REAPER_INTERVAL": "3",
    # Production's hold before a trigger may fire (apache/airflow#72716).
    "AIRFLOW__GANG__RESUME_HOLD_SECONDS": "10",
}


def write_dags(folder: Path) -> None:
    for dag_id, source in CHAOS_DAG_FILES.items():
        (folder / f"{dag_id}.py").write_text(source)


def run(lifecycles: int, seed: int, concurrency: int, keep: bool) -> ChaosReport:
    dags = Path(tempfile.mkdtemp(prefix="bench-chaos-dags-"))
    home = Path(tempfile.mkdtemp(prefix="bench-chaos-home-"))
    write_dags(dags)
    started = time.monotonic()
    cluster = SimCluster(nodes=4, gpus_per_node=2, schedule_period=0.5, training_operator_gang="volcano")
    with cluster, AirflowStack(dags, home=home, kubeconfig=cluster.kubeconfig_path, extra_env=ENV) as stack:
        for dag_id in CHAOS_DAG_FILES:
            stack.client.wait_for_dag(dag_id, timeout=180)
        print(f"stack up in {time.monotonic() - started:.0f}s (home {home})", flush=True)
        report = run_chaos(
            cluster,
            stack,
            seed=seed,
            lifecycles=lifecycles,
            concurrency=concurrency,
            log=lambda line: print(line, flush=True),
        )
    if not keep and not report.missed_targets():
        shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(dags, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8, help="DAG runs active at once")
    parser.add_argument("--quick", action="store_true", help="12 lifecycles (a smoke run: CI runs it)")
    parser.add_argument("--keep", action="store_true", help="keep the Airflow home (logs) after a green run")
    args = parser.parse_args()
    lifecycles = 12 if args.quick else args.lifecycles
    report = run(lifecycles, args.seed, args.concurrency, args.keep)
    print()
    print(report.table())
    missed = report.missed_targets()
    if missed:
        print("\nunexpected lifecycles:\n" + report.unexpected())
        print("\ntargets missed:\n" + "\n".join(f"- {line}" for line in missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
