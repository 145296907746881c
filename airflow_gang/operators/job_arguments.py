"""Old home of the job-argument bases, kept importable.

`GangJobArguments` and `TrainJobArguments` were the job-description halves of a mixin diamond;
each kind's operator now takes its arguments itself (`PyTorchJobOperator`, `TrainJobOperator`)
and `GangJobOperator` the ones every kind shares, so the old names are those operators.
"""

from airflow_gang.kinds.pytorchjob.operator import PyTorchJobOperator as GangJobArguments
from airflow_gang.operators.gang_job import (
    NOT_SET,
    admission_timeout_seconds,
    raise_for_choice,
    task_identity,
)

__all__ = ["NOT_SET", "GangJobArguments", "admission_timeout_seconds", "raise_for_choice", "task_identity"]
