"""Old home of `GangWaitArguments`, kept importable: `GangJobOperator` takes the wait arguments itself."""

from airflow_gang.operators.gang_job import GangJobOperator as GangWaitArguments

__all__ = ["GangWaitArguments"]
