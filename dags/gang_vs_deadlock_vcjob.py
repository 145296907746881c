"""
### Gang scheduling vs. deadlock with Volcano's own Job: six vcjobs on a pool that fits one

`gang_vs_deadlock` with Volcano Jobs (`batch.volcano.sh/v1alpha1`, no Kubeflow at all): six teams
start a 4-pod job at the same moment (a `master` and three `worker`s, wired by Volcano's
`pytorch` plugin), one GPU per pod, on a pool of four GPUs. Set the `gang_scheduling` param:

- **`volcano`** (default): `minAvailable` is every pod, so Volcano's job controller makes each
  job's PodGroup a gang of four. Volcano places a job only when all four fit: the jobs run one
  after another, all succeed.
- **`disabled`**: `minAvailable: 1`. Each PodGroup is a "gang" of one, so Volcano places the
  jobs' pods a few at a time, round-robin: jobs each hold part of the pool waiting for their
  other pods and nothing can start; each sensor's `admission_timeout` deletes its stuck job and
  fails with `GangAdmissionTimeout`; the report fails the run.

How it runs: a Volcano Job cannot be created suspended, so `submit` creates all six in one task,
within a fraction of a second (as when six DAGs start in the same second); `train` waits for each
with a deferrable `VolcanoJobSensor`, `report` logs a timeline table and writes `timeline.html`,
and the `cleanup` teardown deletes whatever is left. `make demo ARGS="--kind vcjob"` runs it on
the embedded cluster. For one job per task, as a sweep, see `VolcanoJobOperator` in
`retrain_vcjob`.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue`, `gang_image` and `gang_report_dir`; the defaults suit the embedded cluster
(`airflow-gang sim`, 2 nodes x 2 GPUs, which runs Volcano's job controller). On its script
runtime a pod "trains" for `train_seconds` (the `sim.airflow-gang.io/duration` annotation, which
real clusters ignore).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_gang.hooks import GangJobHook
from airflow_gang.kinds import VCJOB
from airflow_gang.operators.volcano_job import VolcanoJobSpec
from airflow_gang.sensors.gang import VolcanoJobSensor

DEFAULT_IMAGE = "ghcr.io/kubeflow/training-v1/pytorch-dist-mnist:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


CONN_ID = setting("kubernetes_conn_id", "kubernetes_default")
NAMESPACE = setting("namespace", "default")

with DAG(
    dag_id="gang_vs_deadlock_vcjob",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["airflow-gang", "example", "vcjob"],
    params={
        "gang_scheduling": Param(
            "volcano",
            enum=["volcano", "disabled"],
            description="volcano: minAvailable = every pod (one gang); disabled: minAvailable 1 "
            "(watch the deadlock)",
        ),
        "jobs": Param(6, type="integer", minimum=1, maximum=20, description="jobs submitted together"),
        "workers": Param(3, type="integer", minimum=0, description="worker pods per job (plus the master)"),
        "gpus_per_pod": Param(1, type="integer", minimum=0),
        "admission_timeout": Param(
            60, type="integer", minimum=1, description="seconds a job may wait for its whole gang"
        ),
        "train_seconds": Param(3, type="number", minimum=0, description="simulated training time"),
        "kubernetes_conn_id": Param(None, type=["null", "string"]),
        "namespace": Param(None, type=["null", "string"]),
        "queue": Param(None, type=["null", "string"], description="Volcano queue"),
        "image": Param(None, type=["null", "string"]),
        "report_dir": Param(None, type=["null", "string"], description="where the timeline goes"),
    },
) as dag:

    @task
    def submit(
        conn_id: str,
        namespace: str,
        queue: str,
        image: str,
        *,
        params: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Create the six Volcano Jobs together (one seed each); each is validated first."""
        params = params or {}
        gang = params["gang_scheduling"] == "volcano"
        workers = int(params["workers"])
        run = re.sub(r"[^a-z0-9]", "", str(run_id).lower())[-8:]
        hook = GangJobHook(conn_id=conn_id)
        submitted = []
        for seed in range(int(params["jobs"])):
            spec = VolcanoJobSpec(
                image=image,
                command=["python", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                env={"SEED": str(seed)},
                workers=workers,
                resources={"nvidia.com/gpu": int(params["gpus_per_pod"])},
                queue=queue,
                min_available=None if gang else 1,
                pod_template={
                    "metadata": {
                        "annotations": {"sim.airflow-gang.io/duration": str(params["train_seconds"])}
                    }
                },
            )
            name = f"seed-{run}-{seed}"
            job = hook.create_job(
                VCJOB, spec.build_vcjob(name, namespace, {"airflow-gang.io/demo": run}), namespace
            )
            metadata = job["metadata"]
            submitted.append(
                {
                    "name": name,
                    "namespace": namespace,
                    "queue": queue,
                    "submitted_at": metadata["creationTimestamp"],
                    "min_available": spec.min_member,
                }
            )
        return submitted

    submitted = submit(CONN_ID, NAMESPACE, setting("queue", "default"), setting("image", DEFAULT_IMAGE))

    @task
    def names(jobs: list[dict[str, Any]]) -> list[str]:
        return [job["name"] for job in jobs[:]]

    train = VolcanoJobSensor.partial(
        task_id="train",
        namespace=NAMESPACE,
        kubernetes_conn_id=CONN_ID,
        gang_scheduling="{{ params.gang_scheduling }}",
        admission_timeout="{{ params.admission_timeout }}",
        deferrable=True,
        poke_interval=5,
    ).expand(job_name=names(submitted))

    @task(trigger_rule="all_done")
    def report(
        jobs: list[dict[str, Any]],
        conn_id: str,
        report_dir: str,
        params: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """Log when each job was queued, admitted and finished; write timeline.json/.html/.txt
        (timeline.html: the Gang jobs page's chart of these jobs, in one file that opens offline)."""
        from airflow_gang.plugins.offline_chart import write_html
        from airflow_gang.reports.timeline import format_table, job_timeline, timed_out

        hook = GangJobHook(conn_id=conn_id)
        timelines = []
        for job in jobs[:]:
            found = hook.get_job(VCJOB, job["name"], job["namespace"])
            if found is None:  # deleted by its admission timeout
                queued = dt.datetime.fromisoformat(job["submitted_at"].replace("Z", "+00:00"))
                timelines.append(timed_out(job["name"], job["namespace"], job["queue"], queued))
            else:
                pods = hook.list_job_pods(job["name"], job["namespace"], VCJOB)
                timelines.append(job_timeline(found, pods, job_kind=VCJOB))
        mode = (params or {})["gang_scheduling"]
        table = format_table(timelines)
        folder = (
            Path(report_dir or tempfile.gettempdir()) / "airflow-gang" / re.sub(r"[^\w.-]", "_", str(run_id))
        )
        folder.mkdir(parents=True, exist_ok=True)
        chart = write_html(
            folder / "timeline.html",
            timelines,
            title=f"{len(timelines)} Volcano Jobs, gang_scheduling={mode}",
            gave_up_after=float((params or {})["admission_timeout"]),
        )
        (folder / "timeline.txt").write_text(table + "\n")
        (folder / "timeline.json").write_text(json.dumps([t.to_json() for t in timelines], indent=2))
        print(f"kind=vcjob gang_scheduling={mode}\n{table}\ntimeline chart: {chart}", flush=True)
        stuck = [t.name for t in timelines if t.state != "succeeded"]
        if stuck:
            raise RuntimeError(
                f"{len(stuck)} of {len(timelines)} Volcano Jobs did not succeed with gang_scheduling={mode} "
                f"({', '.join(stuck)}): see the table above and {chart}"
            )
        return {"table": table, "chart": str(chart), "jobs": [t.to_json() for t in timelines]}

    @task
    def cleanup(jobs: list[dict[str, Any]], conn_id: str) -> None:
        """Delete every Volcano Job of this run that is still there (finished or not): its pods
        and PodGroup go with it (Volcano's controller leaves a job being deleted alone)."""
        hook = GangJobHook(conn_id=conn_id)
        jobs = jobs[:]
        for job in jobs:
            hook.delete_job(VCJOB, job["name"], job["namespace"], propagation=VCJOB.deletion_propagation)
        for job in jobs:
            hook.wait_gone(VCJOB.watch_name, job["name"], job["namespace"], timeout=60)

    summary = report(submitted, CONN_ID, setting("report_dir", ""))
    train >> summary >> cleanup(submitted, CONN_ID).as_teardown()
