"""
### Gang scheduling vs. deadlock: six PyTorchJobs on a pool that fits one

Six teams start a training job at the same moment; each job is a Master and three Workers with
one GPU each, and the pool has four GPUs. Set the `gang_scheduling` param and compare:

- **`provider`** (default): each job gets a Volcano PodGroup. Volcano places a job only when
  all four of its pods fit, so the jobs run one after another and all six succeed.
- **`disabled`**: plain pods. The default scheduler binds whichever pods come first, four jobs
  each hold one GPU waiting for their workers, and nothing can ever start. The sensors'
  `admission_timeout` catches the deadlock: each stuck job is deleted (freeing its GPU) and its
  task fails with `GangAdmissionTimeout`; the report lists the victims and fails the run.

How it runs: `submit` creates the six jobs *suspended* (mapped over one seed per job), `release`
resumes them all within a fraction of a second so their pods reach the schedulers together (as
when six DAGs start in the same second), `train` waits for each job with a deferrable
`PyTorchJobSensor`, `report` logs a timeline table and writes `timeline.html`, and the `cleanup`
teardown deletes whatever is left, whatever happened.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue`, `gang_image` and `gang_report_dir`; the defaults suit the embedded cluster
(`airflow-gang sim`, 2 nodes x 2 GPUs). On the embedded cluster's script runtime a replica
"trains" for `train_seconds` (the `sim.airflow-gang.io/duration` annotation, which real
clusters ignore).
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
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import PyTorchJobSensor

DEFAULT_IMAGE = "ghcr.io/kubeflow/training-v1/pytorch-dist-mnist:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


CONN_ID = setting("kubernetes_conn_id", "kubernetes_default")
NAMESPACE = setting("namespace", "default")

with DAG(
    dag_id="gang_vs_deadlock",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["airflow-gang", "example"],
    params={
        "gang_scheduling": Param(
            "provider",
            enum=["provider", "training-operator", "disabled"],
            description="provider: PodGroups made by Airflow; training-operator: by its "
            "--gang-scheduler-name=volcano flag; disabled: no gang (watch the deadlock)",
        ),
        "jobs": Param(6, type="integer", minimum=1, maximum=20, description="jobs submitted together"),
        "workers": Param(3, type="integer", minimum=0, description="Workers per job (plus one Master)"),
        "gpus_per_replica": Param(1, type="integer", minimum=0),
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
    def seeds(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """One environment per job: the same training run with another seed."""
        return [{"SEED": str(seed)} for seed in range(int((params or {})["jobs"]))]

    submit = PyTorchJobOperator.partial(
        task_id="submit",
        image=setting("image", DEFAULT_IMAGE),
        command=["python", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
        workers="{{ params.workers }}",
        resources={"nvidia.com/gpu": "{{ params.gpus_per_replica }}"},
        volcano_queue=setting("queue", "default"),
        namespace=NAMESPACE,
        kubernetes_conn_id=CONN_ID,
        gang_scheduling="{{ params.gang_scheduling }}",
        # Held at the start line until `release`: creation order must not decide the race.
        run_policy={"suspend": True},
        wait_for_admission=False,
        wait_for_completion=False,
        pod_template={
            "metadata": {"annotations": {"sim.airflow-gang.io/duration": "{{ params.train_seconds }}"}}
        },
    ).expand(env=seeds())

    @task
    def release(submitted: list[dict[str, Any]], conn_id: str) -> list[str]:
        """Resume every job at once: their pods reach the schedulers together."""
        hook = GangJobHook(conn_id=conn_id)
        jobs = submitted[:]  # one request; iterating would probe past the end
        for job in jobs:
            hook.set_pytorchjob_suspended(job["name"], job["namespace"], False)
        return [job["name"] for job in jobs]

    released = release(submit.output, CONN_ID)

    train = PyTorchJobSensor.partial(
        task_id="train",
        namespace=NAMESPACE,
        kubernetes_conn_id=CONN_ID,
        gang_scheduling="{{ params.gang_scheduling }}",
        admission_timeout="{{ params.admission_timeout }}",
        deferrable=True,
        poke_interval=5,
    ).expand(job_name=released)

    @task(trigger_rule="all_done")
    def report(
        submitted: list[dict[str, Any]],
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
        for job in submitted[:]:
            found = hook.get_pytorchjob(job["name"], job["namespace"])
            if found is None:  # deleted by its admission timeout
                queued = dt.datetime.fromisoformat(job["submitted_at"])
                timelines.append(timed_out(job["name"], job["namespace"], job["queue"], queued))
            else:
                timelines.append(job_timeline(found, hook.list_job_pods(job["name"], job["namespace"])))
        mode = (params or {})["gang_scheduling"]
        table = format_table(timelines)
        folder = (
            Path(report_dir or tempfile.gettempdir()) / "airflow-gang" / re.sub(r"[^\w.-]", "_", str(run_id))
        )
        folder.mkdir(parents=True, exist_ok=True)
        chart = write_html(
            folder / "timeline.html",
            timelines,
            title=f"{len(timelines)} jobs, gang_scheduling={mode}",
            gave_up_after=float((params or {})["admission_timeout"]),
        )
        (folder / "timeline.txt").write_text(table + "\n")
        (folder / "timeline.json").write_text(json.dumps([t.to_json() for t in timelines], indent=2))
        print(f"gang_scheduling={mode}\n{table}\ntimeline chart: {chart}", flush=True)
        stuck = [t.name for t in timelines if t.state != "succeeded"]
        if stuck:
            raise RuntimeError(
                f"{len(stuck)} of {len(timelines)} jobs did not succeed with gang_scheduling={mode} "
                f"({', '.join(stuck)}): see the table above and {chart}"
            )
        return {"table": table, "chart": str(chart), "jobs": [t.to_json() for t in timelines]}

    @task
    def cleanup(submitted: list[dict[str, Any]], conn_id: str) -> None:
        """Delete every job of this run that is still there (finished or not)."""
        hook = GangJobHook(conn_id=conn_id)
        jobs = submitted[:]
        for job in jobs:
            hook.delete_pytorchjob(job["name"], job["namespace"], propagation="Foreground")
            hook.delete_podgroup(job["name"], job["namespace"])
        for job in jobs:
            for kind in ("pytorchjob", "podgroup"):
                hook.wait_deleted(kind, job["name"], job["namespace"], timeout=60)

    summary = report(submit.output, CONN_ID, setting("report_dir", ""))
    train >> summary >> cleanup(submit.output, CONN_ID).as_teardown()
