"""`VolcanoJobOperator` (defined in `airflow_gang.kinds.vcjob.operator`); the public import path."""

from airflow_gang.kinds.vcjob.operator import NO_GANG_WARNING, VolcanoJobOperator
from airflow_gang.kinds.vcjob.spec import LifecyclePolicy, VolcanoJobSpec, VolcanoTask

__all__ = ["NO_GANG_WARNING", "LifecyclePolicy", "VolcanoJobOperator", "VolcanoJobSpec", "VolcanoTask"]
