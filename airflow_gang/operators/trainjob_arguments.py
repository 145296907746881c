"""Old home of `TrainJobArguments`, kept importable: `TrainJobOperator` takes its arguments itself."""

from airflow_gang.kinds.trainjob.operator import SPEC_FIELDS
from airflow_gang.kinds.trainjob.operator import TrainJobOperator as TrainJobArguments

__all__ = ["SPEC_FIELDS", "TrainJobArguments"]
