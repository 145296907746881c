"""A task that runs for ten minutes unless it is marked failed or the stack stops."""

from __future__ import annotations

import datetime as dt
import time

from airflow.sdk import DAG, task

with DAG("stack_sleep", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False, tags=["stack"]):

    @task(retries=0)
    def sleep_long() -> None:
        print("sleeping for ten minutes", flush=True)
        time.sleep(600)

    sleep_long()
