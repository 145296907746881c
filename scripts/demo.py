"""``make demo`` / ``make demo-train``: run an example DAG against the embedded cluster, end to end.

1. start ``airflow-gang sim`` in the background (script runtime; ``--train``: process runtime,
   so the replicas run ``examples/train_digits.py`` for real);
2. point a private Airflow home (``.demo/airflow``, SQLite) at it through
   ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` and run ``airflow dags test`` on ``gang_vs_deadlock``
   (``--kind trainjob``: ``gang_vs_deadlock_trainjob``, the same with Kubeflow Trainer v2
   TrainJobs; ``--kind vcjob``: ``gang_vs_deadlock_vcjob``, with Volcano's own Jobs;
   ``--train``: ``retrain_daily``);
3. print the job timeline (or the accuracy reached) and where the chart (``timeline.html``, the
   Gang jobs page's chart in one file that opens in a browser from disk) and logs are;
4. stop the simulator, whatever happened, and check that nothing it started is still running.

Everything goes under ``.demo/`` (or ``$GANG_DEMO_DIR``): logs, kubeconfig, Airflow home,
report; nothing else is touched. Exit code 0 only when the DAG run succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("GANG_DEMO_DIR") or REPO / ".demo").resolve()
BIN = Path(sys.executable).parent
READY = "simulated cluster ready"
# The seed scenario's DAG per job kind, and the gang modes each takes (its first is the default).
SEED_DAGS = {
    "pytorchjob": "gang_vs_deadlock",
    "trainjob": "gang_vs_deadlock_trainjob",
    "vcjob": "gang_vs_deadlock_vcjob",
}
GANG_MODES = {
    "pytorchjob": ("provider", "training-operator", "disabled"),
    "trainjob": ("trainer", "disabled"),
    "vcjob": ("volcano", "disabled"),
}
DEFAULT_GANG_SCHEDULING = {kind: modes[0] for kind, modes in GANG_MODES.items()}


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def log(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def airflow_env(kubeconfig: Path) -> dict[str, str]:
    home = OUT / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        ),
    }
    env.pop("KUBECONFIG", None)  # the connection, not a developer's cluster, decides
    return env


def start_simulator(
    kubeconfig: Path, train: bool, env: dict[str, str], operator_gang: str | None = None
) -> subprocess.Popen[bytes]:
    kubeconfig.unlink(missing_ok=True)
    command = [str(BIN / "airflow-gang"), "sim", "--kubeconfig", str(kubeconfig), "--schedule-period", "0.5"]
    if train:
        command += ["--runtime", "process", "--workdir", str(REPO)]
    if operator_gang:
        command += ["--training-operator-gang", operator_gang]
    log(f"starting the embedded cluster: {' '.join(command[1:])}")
    with (OUT / "sim.log").open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while READY not in (OUT / "sim.log").read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_simulator(process)
            sys.exit(f"the simulator did not start; see {OUT / 'sim.log'}")
        time.sleep(0.2)
    log(f"cluster ready (2 nodes x 2 GPUs); kubeconfig {shown(kubeconfig)}")
    return process


def stop_simulator(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    log(f"simulator stopped (exit code {process.returncode})")


def leftover_processes(marker: str) -> list[str]:
    """Processes whose command line still mentions ``marker`` (the demo's own files)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found


def run(command: list[str], env: dict[str, str], log_name: str, timeout: float) -> int:
    with (OUT / log_name).open("wb") as output:
        try:
            return subprocess.run(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                timeout=timeout,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            log(f"{' '.join(command[:3])} overran {timeout:.0f}s")
            return 124


def latest_report(report_dir: Path) -> Path | None:
    reports = sorted(report_dir.glob("airflow-gang/*/timeline.txt"), key=lambda p: p.stat().st_mtime)
    return reports[-1].parent if reports else None


def show_timeline(report_dir: Path) -> None:
    folder = latest_report(report_dir)
    if folder is None:
        log("no timeline was written")
        return
    print()
    print((folder / "timeline.txt").read_text())
    print(f"timeline chart: {shown(folder / 'timeline.html')}")


def show_accuracy(output: str) -> None:
    verdicts = re.findall(r"accuracy=([0-9.]+) \(bar ([0-9.]+)\): (.+)", output)
    epochs = re.findall(r"epoch \d+/\d+ loss=[0-9.]+", output)
    if epochs:
        print("\n".join(["", "master replica (rank 0) log:", *epochs[-3:]]))
    if not verdicts:
        log("the training job reported no accuracy")
        return
    accuracy, bar, decision = verdicts[-1]
    print(
        f"\nachieved accuracy: {float(accuracy):.4f} (2-replica DDP on CPU; bar {bar}) -> {decision.strip()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help="retrain_daily with real DDP training")
    parser.add_argument(
        "--kind",
        default="pytorchjob",
        choices=sorted(SEED_DAGS),
        help="the seed scenario's job kind: PyTorchJobs (default), Kubeflow Trainer v2 TrainJobs or "
        "Volcano's own Jobs",
    )
    parser.add_argument(
        "--gang-scheduling",
        choices=["provider", "training-operator", "trainer", "volcano", "disabled"],
        help="default: provider for PyTorchJobs, trainer (the runtime's podGroupPolicy) for TrainJobs, "
        "volcano (minAvailable = every pod) for Volcano Jobs",
    )
    parser.add_argument(
        "--training-operator-gang",
        choices=["volcano"],
        help="start the simulated training-operator with --gang-scheduler-name=volcano",
    )
    args = parser.parse_args()
    gang_scheduling = args.gang_scheduling or DEFAULT_GANG_SCHEDULING[args.kind]
    if not args.train and gang_scheduling not in GANG_MODES[args.kind]:
        parser.error(f"--kind {args.kind} takes --gang-scheduling {' or '.join(GANG_MODES[args.kind])}")
    started = time.monotonic()
    OUT.mkdir(exist_ok=True)
    kubeconfig = OUT / "sim.kubeconfig"
    env = airflow_env(kubeconfig)

    log(f"preparing the demo's Airflow database ({shown(OUT / 'airflow')})")
    if run([str(BIN / "airflow"), "db", "migrate"], env, "db-migrate.log", timeout=300) != 0:
        sys.exit(f"airflow db migrate failed; see {OUT / 'db-migrate.log'}")
    simulator = start_simulator(kubeconfig, args.train, env, args.training_operator_gang)
    try:
        if args.train:
            dag_id = "retrain_daily"
            conf = {"python": sys.executable, "registry_dir": str(OUT / "registry"), "epochs": 12}
        else:
            dag_id = SEED_DAGS[args.kind]
            conf = {"gang_scheduling": gang_scheduling, "report_dir": str(OUT / "report")}
        log(f"airflow dags test {dag_id} -c '{json.dumps(conf)}'  (log: {shown(OUT / 'dags-test.log')})")
        code = run(
            [str(BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)], env, "dags-test.log", 170
        )
    finally:
        stop_simulator(simulator)
    output = (OUT / "dags-test.log").read_text(errors="replace")
    if args.train:
        show_accuracy(output)
    else:
        show_timeline(OUT / "report")
    left = leftover_processes(str(kubeconfig)) + (
        leftover_processes("examples/train_digits.py") if args.train else []
    )
    if left:
        log("still running after the simulator stopped:\n  " + "\n  ".join(left))
        return 1
    log("nothing left running")
    state = re.findall(r"DagRun Finished: dag_id=\S+ .*?state=(\w+)", output)
    outcome = state[-1] if state else "unknown"
    log(f"DAG run {dag_id}: {outcome}; demo took {time.monotonic() - started:.0f}s (logs in {shown(OUT)})")
    return 0 if code == 0 and outcome == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
