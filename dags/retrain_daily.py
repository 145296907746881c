"""
### Daily retraining: prepare data, train with DDP on a gang, promote if good enough

Every day: `prepare_data` picks the day's training arguments, `train` runs
`examples/train_digits.py` as a PyTorchJob (a Master and `workers` Workers) gang-scheduled by
Volcano, and `evaluate` reads the accuracy the job printed (`accuracy=...`, collected into the
task's return value under `metrics`). `promote` records the model in a small file registry only
when it beats `min_accuracy`.

Queue waits are expected on a shared pool: the job may wait `admission_timeout` seconds for its
whole gang; then it is deleted and `gang_retry_policy()` retries the task after
`retry_delay_seconds`, with a fresh job, up to `retries` times. A bad spec fails at once. A replica
that exits non-zero is restarted in place by the training-operator (`restart_policy="OnFailure"`,
the default): `restart_policy="ExitCode"` or `run_policy={"backoff_limit": N}` lets such a failure
end the job, and then the task (`PyTorchJobFailed`).

A shared pool also takes GPUs back (docs/disruptions.md): with `on_disruption="wait"` a gang
that loses pods to preemption, reclaim or a lost node is brought back by its own restart and
re-admitted; past `max_disruptions` (or `admission_timeout` after a disruption) the job is
given up and retried. Every try is told the same `GANG_CHECKPOINT_DIR` (the `checkpoint_dir`
param, or `[gang] checkpoint_root`): the script saves each epoch there and a new try's job
prints `resumed from epoch N/E` and goes on from there.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue`, `gang_image` and `gang_registry_dir`; the defaults suit the embedded cluster
(`airflow-gang sim`). With its *process* runtime (`make demo-train`) the replicas really run the
script with PyTorch; with the default *script* runtime they follow the `sim.airflow-gang.io/*`
annotations below, which real clusters ignore.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.retry import gang_retry_policy

DEFAULT_IMAGE = "ghcr.io/acme/train-digits:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


with DAG(
    dag_id="retrain_daily",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["airflow-gang", "example"],
    params={
        "workers": Param(1, type="integer", minimum=0, description="Workers besides the Master"),
        "epochs": Param(30, type="integer", minimum=1),
        "min_accuracy": Param(0.9, type="number", minimum=0, maximum=1),
        "admission_timeout": Param(600, type="integer", minimum=1, description="seconds"),
        "python": Param("python", type="string", description="interpreter in the image"),
        "script": Param("examples/train_digits.py", type="string", description="path in the image"),
        "kubernetes_conn_id": Param(None, type=["null", "string"]),
        "namespace": Param(None, type=["null", "string"]),
        "queue": Param(None, type=["null", "string"], description="Volcano queue"),
        "image": Param(None, type=["null", "string"]),
        "registry_dir": Param(None, type=["null", "string"], description="where promoted models go"),
        "checkpoint_dir": Param(
            None, type=["null", "string"], description="shared storage for checkpoints, kept across tries"
        ),
    },
) as dag:

    @task
    def prepare_data(params: dict[str, Any] | None = None, ds_nodash: str | None = None) -> list[str]:
        """The day's training arguments.

        The bundled digits data set does not change, so the day picks the seed of the
        train/test split, standing in for the day's data snapshot.
        """
        settings = params or {}
        return ["--epochs", str(settings["epochs"]), "--seed", str(int(ds_nodash or "0") % 10_000)]

    train = PyTorchJobOperator(
        task_id="train",
        image=setting("image", DEFAULT_IMAGE),
        command=["{{ params.python }}", "{{ params.script }}"],
        args=prepare_data(),
        workers="{{ params.workers }}",
        resources={"cpu": "1", "memory": "1Gi"},
        volcano_queue=setting("queue", "default"),
        namespace=setting("namespace", "default"),
        kubernetes_conn_id=setting("kubernetes_conn_id", "kubernetes_default"),
        deferrable=True,
        admission_timeout=dt.timedelta(minutes=10),
        on_disruption="wait",
        max_disruptions=3,
        # Empty when unset: then [gang] checkpoint_root, if configured, gives the location.
        checkpoint_dir="{{ params.checkpoint_dir or '' }}",
        retries=3,
        retry_delay=dt.timedelta(minutes=2),
        retry_policy=gang_retry_policy(admission_retry_delay=dt.timedelta(minutes=5)),
        pod_template={
            "metadata": {
                "annotations": {
                    "sim.airflow-gang.io/duration": "2",
                    "sim.airflow-gang.io/log": "epoch 1/2 loss=0.61\nepoch 2/2 loss=0.18\naccuracy=0.953",
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
                f"PyTorchJob {result['name']} printed no 'accuracy=<value>' line: "
                "the training script must report its test accuracy"
            )
        bar = float((params or {})["min_accuracy"])
        verdict = {
            "job": result["name"],
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
        folder = Path(registry_dir or Path(tempfile.gettempdir()) / "airflow-gang" / "registry") / "digits"
        folder.mkdir(parents=True, exist_ok=True)
        entry = {**verdict, "version": ds, "promoted_at": dt.datetime.now(dt.UTC).isoformat()}
        (folder / f"{ds}.json").write_text(json.dumps(entry, indent=2))
        (folder / "latest.json").write_text(json.dumps(entry, indent=2))
        return str(folder / "latest.json")

    verdict = evaluate(train.output)
    good_enough(verdict) >> promote(verdict, setting("registry_dir", ""))
