"""The provider's sensors, at their public import path.

`GangAdmissionSensor` waits for any kind's admission (`airflow_gang.sensors.base`); each kind's
completion sensor lives in its package (`airflow_gang.kinds.pytorchjob.sensor`,
`airflow_gang.kinds.trainjob.sensor`, `airflow_gang.kinds.vcjob.sensor`).
"""

from airflow_gang.kinds.pytorchjob.sensor import PyTorchJobSensor
from airflow_gang.kinds.trainjob.sensor import TrainJobSensor
from airflow_gang.kinds.vcjob.sensor import VolcanoJobSensor
from airflow_gang.sensors.base import GangAdmissionSensor, GangCompletionSensor

__all__ = [
    "GangAdmissionSensor",
    "GangCompletionSensor",
    "PyTorchJobSensor",
    "TrainJobSensor",
    "VolcanoJobSensor",
]
