"""Training on demand: one PyTorchJob of four replicas (a master and three workers, one GPU each),
admitted whole by Volcano in queue ``research``, then a short report of how it went."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, task

from airflow_gang.operators.pytorch_job import PyTorchJobOperator

with DAG("train_model", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train",
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=3,
        resources={"nvidia.com/gpu": 1},
        queue="research",
        deferrable=True,
        admission_timeout=dt.timedelta(hours=2),
    )

    @task
    def report(result: dict[str, Any]) -> str:
        return f"{result['name']}: {result['state']}, queued {result['queued_seconds']} s"

    report(train.output)
