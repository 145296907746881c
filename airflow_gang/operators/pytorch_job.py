"""`PyTorchJobOperator` (defined in `airflow_gang.kinds.pytorchjob.operator`); the public import path."""

from airflow_gang.jobs.outcome import ON_FINISH_ACTIONS
from airflow_gang.kinds.pytorchjob.operator import PyTorchJobOperator
from airflow_gang.state.state_store import STATE_STORE_JOB_KEY, STATE_STORE_PROGRESS_KEY

__all__ = ["ON_FINISH_ACTIONS", "STATE_STORE_JOB_KEY", "STATE_STORE_PROGRESS_KEY", "PyTorchJobOperator"]
