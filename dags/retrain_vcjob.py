"""
### Daily retraining with Volcano's own Job: a gang of pods, Volcano's restart policies, a quality gate

`retrain_daily` with a Volcano Job (`batch.volcano.sh/v1alpha1`, no Kubeflow): every day
`prepare_data` picks the day's training arguments, `train` runs them as a Volcano Job of a
`master` and `workers` workers (Volcano's `pytorch` plugin wires `MASTER_ADDR`, `WORLD_SIZE` and
`RANK`; its job controller makes the PodGroup: all pods start together or none does), waiting in
the triggerer, and `evaluate` reads the accuracy rank 0 printed (`accuracy=...`, collected into
the task's return value under `metrics`). `promote` records the model in a small file registry
only when it beats `min_accuracy`.

Two kinds of retry, each where it belongs:

- **inside the job, Volcano's**: a pod evicted (preempted, its node drained) or failed restarts
  the whole job (`PodEvicted`/`PodFailed` -> `RestartJob`) up to `max_retry` times; the task
  reports it as restarting and keeps waiting;
- **around the job, Airflow's**: the job may wait `admission_timeout` for its whole gang; then
  it is deleted and `gang_retry_policy()` retries the task after `admission_retry_delay` with a
  fresh job, up to `retries` times. A job Volcano gave up on (`Failed`) fails the task at once.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue` (the Volcano queue, default `default`), `gang_image` and `gang_registry_dir`; the
defaults suit the embedded cluster (`airflow-gang sim`), on whose script runtime each pod
follows the `sim.airflow-gang.io/*` annotations below (real clusters ignore them).
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_gang.operators.volcano_job import VolcanoJobOperator
from airflow_gang.retry import gang_retry_policy

DEFAULT_IMAGE = "ghcr.io/acme/train-digits:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


with DAG(
    dag_id="retrain_vcjob",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["airflow-gang", "example", "vcjob"],
    params={
        "workers": Param(
            1, type="integer", minimum=0, description="worker pods besides the master (one gang)"
        ),
        "max_retry": Param(2, type="integer", minimum=0, description="restarts Volcano may make"),
        "epochs": Param(30, type="integer", minimum=1),
        "min_accuracy": Param(0.9, type="number", minimum=0, maximum=1),
        "script": Param("examples/train_digits.py", type="string", description="path in the image"),
        "kubernetes_conn_id": Param(None, type=["null", "string"]),
        "namespace": Param(None, type=["null", "string"]),
        "queue": Param(None, type=["null", "string"], description="Volcano queue"),
        "image": Param(None, type=["null", "string"]),
        "registry_dir": Param(None, type=["null", "string"], description="where promoted models go"),
    },
) as dag:

    @task
    def prepare_data(params: dict[str, Any] | None = None, ds_nodash: str | None = None) -> list[str]:
        """The day's training arguments: the day picks the seed of the train/test split,
        standing in for the day's data snapshot."""
        settings = params or {}
        return ["--epochs", str(settings["epochs"]), "--seed", str(int(ds_nodash or "0") % 10_000)]

    train = VolcanoJobOperator(
        task_id="train",
        image=setting("image", DEFAULT_IMAGE),
        command=["python", "{{ params.script }}"],
        args=prepare_data(),
        workers="{{ params.workers }}",
        resources={"cpu": "1", "memory": "1Gi"},
        policies=[
            {"event": "PodEvicted", "action": "RestartJob"},
            {"event": "PodFailed", "action": "RestartJob"},
        ],
        max_retry="{{ params.max_retry }}",
        queue=setting("queue", "default"),
        namespace=setting("namespace", "default"),
        kubernetes_conn_id=setting("kubernetes_conn_id", "kubernetes_default"),
        deferrable=True,
        admission_timeout=dt.timedelta(minutes=10),
        retries=3,
        retry_delay=dt.timedelta(minutes=2),
        retry_policy=gang_retry_policy(admission_retry_delay=dt.timedelta(minutes=5)),
        pod_template={
            "metadata": {
                "annotations": {
                    "sim.airflow-gang.io/duration": "2",
                    "sim.airflow-gang.io/log": "epoch 1/2 loss=0.61\nepoch 2/2 loss=0.18\naccuracy=0.957",
                }
            }
        },
    )

    @task
    def evaluate(result: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Compare the job's accuracy with the bar; fail if the job printed none."""
        accuracy = (result.get("metrics") or {}).get("accuracy")
        if accuracy is None:
            raise ValueError(
                f"Volcano Job {result['name']} printed no 'accuracy=<value>' line: "
                "the training script must report its test accuracy on rank 0"
            )
        bar = float((params or {})["min_accuracy"])
        verdict = {
            "job": result["name"],
            "pods": sum(result["replicas"].values()),
            "accuracy": accuracy,
            "min_accuracy": bar,
            "promote": accuracy >= bar,
        }
        decision = "promote" if verdict["promote"] else "keep the old model"
        print(f"accuracy={accuracy:.4f} (bar {bar:.4f}): {decision}")
        return verdict

    @task.short_circuit
    def good_enough(verdict: dict[str, Any]) -> bool:
        return bool(verdict["promote"])

    @task
    def promote(verdict: dict[str, Any], registry_dir: str, ds: str | None = None) -> str:
        """Record the model as the current one (a JSON file per day plus ``latest.json``)."""
        folder = (
            Path(registry_dir or Path(tempfile.gettempdir()) / "airflow-gang" / "registry") / "digits-vcjob"
        )
        folder.mkdir(parents=True, exist_ok=True)
        entry = {**verdict, "version": ds, "promoted_at": dt.datetime.now(dt.UTC).isoformat()}
        (folder / f"{ds}.json").write_text(json.dumps(entry, indent=2))
        (folder / "latest.json").write_text(json.dumps(entry, indent=2))
        return str(folder / "latest.json")

    verdict = evaluate(train.output)
    good_enough(verdict) >> promote(verdict, setting("registry_dir", ""))
