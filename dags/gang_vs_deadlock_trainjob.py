"""
### Gang scheduling vs. deadlock with Kubeflow Trainer v2: six TrainJobs on a pool that fits one

`gang_vs_deadlock` with TrainJobs instead of PyTorchJobs: six teams start a 4-node TrainJob at
the same moment, one GPU per node, on a pool of four GPUs. Set the `gang_scheduling` param:

- **`trainer`** (default): the jobs name the `torch-distributed` runtime, whose
  `podGroupPolicy.volcano` makes Trainer's Volcano plugin create a PodGroup per job. Volcano
  places a job only when all four of its pods fit: the jobs run one after another, all succeed.
- **`disabled`**: the jobs name `torch-distributed-no-gang` (the same runtime without a
  podGroupPolicy): plain pods, bound one by one. Jobs each hold part of the pool waiting for
  their other nodes and nothing can start; each sensor's `admission_timeout` deletes its stuck
  job and fails with `GangAdmissionTimeout` (saying no gang was used); the report fails the run.

How it runs (as `gang_vs_deadlock`): `submit` creates the six TrainJobs *suspended*, `release`
resumes them all at once, `train` waits for each with a deferrable `TrainJobSensor`, `report`
logs a timeline table and writes `timeline.html`, and the `cleanup` teardown deletes whatever is
left. `make demo ARGS="--kind trainjob"` runs it on the embedded cluster.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue`, `gang_image` and `gang_report_dir`; the defaults suit the embedded cluster
(`airflow-gang sim`, 2 nodes x 2 GPUs, which serves both runtimes). On its script runtime a node
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
from airflow_gang.job_kinds import TRAINJOB
from airflow_gang.operators.train_job import TrainJobOperator
from airflow_gang.sensors.gang import TrainJobSensor

DEFAULT_IMAGE = "ghcr.io/kubeflow/training-v1/pytorch-dist-mnist:latest"
# The runtime each gang_scheduling mode names: with and without podGroupPolicy.volcano.
RUNTIMES = {"trainer": "torch-distributed", "disabled": "torch-distributed-no-gang"}


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


CONN_ID = setting("kubernetes_conn_id", "kubernetes_default")
NAMESPACE = setting("namespace", "default")

with DAG(
    dag_id="gang_vs_deadlock_trainjob",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["airflow-gang", "example", "trainjob"],
    params={
        "gang_scheduling": Param(
            "trainer",
            enum=["trainer", "disabled"],
            description="trainer: runtime torch-distributed (Volcano PodGroups made by Trainer); "
            "disabled: runtime torch-distributed-no-gang (watch the deadlock)",
        ),
        "jobs": Param(6, type="integer", minimum=1, maximum=20, description="jobs submitted together"),
        "num_nodes": Param(4, type="integer", minimum=1, description="training nodes (pods) per job"),
        "gpus_per_node": Param(1, type="integer", minimum=0),
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

    submit = TrainJobOperator.partial(
        task_id="submit",
        image=setting("image", DEFAULT_IMAGE),
        command=["python", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
        num_nodes="{{ params.num_nodes }}",
        resources_per_node={"nvidia.com/gpu": "{{ params.gpus_per_node }}"},
        runtime=f"{{{{ {RUNTIMES!r}[params.gang_scheduling] }}}}",
        queue=setting("queue", "default"),
        namespace=NAMESPACE,
        kubernetes_conn_id=CONN_ID,
        # Held at the start line until `release`: creation order must not decide the race.
        suspend=True,
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
            hook.set_job_suspended(TRAINJOB, job["name"], job["namespace"], False)
        return [job["name"] for job in jobs]

    released = release(submit.output, CONN_ID)

    train = TrainJobSensor.partial(
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
            found = hook.get_job(TRAINJOB, job["name"], job["namespace"])
            if found is None:  # deleted by its admission timeout
                queued = dt.datetime.fromisoformat(job["submitted_at"])
                timelines.append(timed_out(job["name"], job["namespace"], job["queue"], queued))
            else:
                pods = hook.list_job_pods(job["name"], job["namespace"], TRAINJOB)
                timelines.append(job_timeline(found, pods, job_kind=TRAINJOB))
        mode = (params or {})["gang_scheduling"]
        table = format_table(timelines)
        folder = (
            Path(report_dir or tempfile.gettempdir()) / "airflow-gang" / re.sub(r"[^\w.-]", "_", str(run_id))
        )
        folder.mkdir(parents=True, exist_ok=True)
        chart = write_html(
            folder / "timeline.html",
            timelines,
            title=f"{len(timelines)} TrainJobs, gang_scheduling={mode}",
            gave_up_after=float((params or {})["admission_timeout"]),
        )
        (folder / "timeline.txt").write_text(table + "\n")
        (folder / "timeline.json").write_text(json.dumps([t.to_json() for t in timelines], indent=2))
        print(f"kind=trainjob gang_scheduling={mode}\n{table}\ntimeline chart: {chart}", flush=True)
        stuck = [t.name for t in timelines if t.state != "succeeded"]
        if stuck:
            raise RuntimeError(
                f"{len(stuck)} of {len(timelines)} TrainJobs did not succeed with gang_scheduling={mode} "
                f"({', '.join(stuck)}): see the table above and {chart}"
            )
        return {"table": table, "chart": str(chart), "jobs": [t.to_json() for t in timelines]}

    @task
    def cleanup(submitted: list[dict[str, Any]], conn_id: str) -> None:
        """Delete every TrainJob of this run that is still there (finished or not): its JobSet,
        Jobs, pods and PodGroup go with it. In the background: Kubeflow Trainer re-applies the
        children of a TrainJob that lingers in a foreground deletion (docs/trainer-v2.md)."""
        hook = GangJobHook(conn_id=conn_id)
        jobs = submitted[:]
        for job in jobs:
            background = TRAINJOB.deletion_propagation
            hook.delete_job(TRAINJOB, job["name"], job["namespace"], propagation=background)
        for job in jobs:
            hook.wait_gone("trainjob", job["name"], job["namespace"], timeout=60)

    summary = report(submit.output, CONN_ID, setting("report_dir", ""))
    train >> summary >> cleanup(submit.output, CONN_ID).as_teardown()
