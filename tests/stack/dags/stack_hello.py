"""A task that prints and returns: the smallest run through scheduler, executor and api-server."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, task

with DAG("stack_hello", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False, tags=["stack"]):

    @task
    def greet(params: dict[str, Any] | None = None) -> int:
        print(f"hello from the task, greeting={(params or {}).get('greeting')}")
        return 42

    greet()
