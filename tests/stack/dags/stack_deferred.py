"""A task that defers to the standard provider's DateTimeTrigger, then resumes on a worker."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import DAG, BaseOperator, task

# Long enough that the scheduler has handled the deferring try's exit before the trigger fires
# (apache/airflow#72716: a resumed try that runs before that is failed by the scheduler).
DEFER_SECONDS = 8


class WaitInTriggerer(BaseOperator):
    def execute(self, context: Any) -> None:
        moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=DEFER_SECONDS)
        print(f"deferring until {moment.isoformat()}")
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="resume")

    def resume(self, context: Any, event: Any = None) -> str:
        print(f"resumed after the trigger fired: {event}")
        return "resumed"


with DAG("stack_deferred", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False, tags=["stack"]):

    @task
    def after(value: str) -> str:
        print(f"after the deferred task: {value}")
        return value

    after(WaitInTriggerer(task_id="wait").output)
