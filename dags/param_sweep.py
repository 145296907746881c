"""
### Hyperparameter sweep: one gang-scheduled PyTorchJob per combination, then pick the best

`combinations` crosses the `learning_rates` and `batch_sizes` params (4 x 2 = 8 runs by
default); `train` maps `PyTorchJobOperator` over them with `.expand_kwargs()`, one PyTorchJob
(Master + Worker, DDP) per combination, all in the same Volcano queue, which admits as many
whole gangs as fit and keeps the rest waiting: no run ever holds half a gang. Each run's task
result carries the metrics its master printed (`accuracy=...`, Katib's format);
`pick_best` ranks them and returns the winner.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue` and `gang_image`; the defaults suit the embedded cluster (`airflow-gang sim`).
With its process runtime the replicas really run `examples/train_digits.py`. With the default
script runtime they only follow `sim.airflow-gang.io/*` annotations (ignored by real clusters):
there `simulated_log` makes each master print a made-up but plausible accuracy for its
hyperparameters, so `pick_best` has numbers to compare.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_gang.operators.pytorch_job import PyTorchJobOperator

DEFAULT_IMAGE = "ghcr.io/acme/train-digits:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


def simulated_log(learning_rate: float, batch_size: int) -> str:
    """What a script-runtime master prints: best near lr=0.1, a little better with small batches."""
    accuracy = 0.97 - 0.08 * math.log10(learning_rate / 0.1) ** 2 - 0.004 * math.log2(batch_size / 16)
    return f"epoch 1/1 loss={1 - accuracy:.4f}\naccuracy={accuracy:.4f}"


with DAG(
    dag_id="param_sweep",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["airflow-gang", "example"],
    params={
        "learning_rates": Param([0.01, 0.03, 0.1, 0.3], type="array", items={"type": "number"}),
        "batch_sizes": Param([16, 64], type="array", items={"type": "integer"}),
        "epochs": Param(20, type="integer", minimum=1),
        "metric": Param("accuracy", type="string", description="the metric to maximise"),
        "python": Param("python", type="string", description="interpreter in the image"),
        "script": Param("examples/train_digits.py", type="string", description="path in the image"),
        "kubernetes_conn_id": Param(None, type=["null", "string"]),
        "namespace": Param(None, type=["null", "string"]),
        "queue": Param(None, type=["null", "string"], description="Volcano queue"),
        "image": Param(None, type=["null", "string"]),
    },
) as dag:

    @task
    def combinations(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One set of ``PyTorchJobOperator`` arguments per (learning rate, batch size)."""
        settings = params or {}
        runs = []
        for learning_rate, batch_size in itertools.product(
            settings["learning_rates"], settings["batch_sizes"]
        ):
            runs.append(
                {
                    "args": [
                        "--lr",
                        str(learning_rate),
                        "--batch-size",
                        str(batch_size),
                        "--epochs",
                        str(settings["epochs"]),
                    ],
                    "labels": {
                        "sweep/lr": str(learning_rate).replace(".", "_"),
                        "sweep/batch-size": str(batch_size),
                    },
                    "pod_template": {
                        "metadata": {
                            "annotations": {
                                "sim.airflow-gang.io/duration": "1",
                                "sim.airflow-gang.io/log": simulated_log(learning_rate, batch_size),
                            }
                        }
                    },
                }
            )
        return runs

    train = PyTorchJobOperator.partial(
        task_id="train",
        image=setting("image", DEFAULT_IMAGE),
        command=["{{ params.python }}", "{{ params.script }}"],
        workers=1,
        resources={"cpu": "1", "memory": "1Gi"},
        volcano_queue=setting("queue", "default"),
        namespace=setting("namespace", "default"),
        kubernetes_conn_id=setting("kubernetes_conn_id", "kubernetes_default"),
        deferrable=True,
        admission_timeout=dt.timedelta(hours=1),
        map_index_template="lr={{ task.args[1] }} batch={{ task.args[3] }}",
    )
    runs = combinations()
    trained = train.expand_kwargs(runs)

    @task
    def pick_best(
        results: list[dict[str, Any]], runs: list[dict[str, Any]], params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The run with the highest metric; fails if no run reported it."""
        metric = (params or {})["metric"]
        # Both sequences are in map-index order; slicing fetches each in one request.
        scored = [
            {"job": result["name"], "args": run["args"], metric: result["metrics"][metric]}
            for result, run in zip(results[:], runs[:], strict=True)
            if metric in (result.get("metrics") or {})
        ]
        if not scored:
            raise ValueError(f"no run printed '{metric}=<value>': the training script must report it")
        ranked = sorted(scored, key=lambda run: run[metric], reverse=True)
        for place, run in enumerate(ranked, start=1):
            print(f"{place:>2}. {metric}={run[metric]:.4f}  {' '.join(run['args'])}  ({run['job']})")
        return {**ranked[0], "runs": len(ranked)}

    pick_best(trained.output, runs)
