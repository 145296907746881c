"""`TrainJobOperator` (defined in `airflow_gang.kinds.trainjob.operator`); the public import path."""

from airflow_gang.kinds.trainjob.operator import NO_GANG_WARNING, TrainJobOperator
from airflow_gang.kinds.trainjob.recipe import runtime_gang_mode

__all__ = ["NO_GANG_WARNING", "TrainJobOperator", "runtime_gang_mode"]
