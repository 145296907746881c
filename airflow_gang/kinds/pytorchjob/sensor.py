"""`PyTorchJobSensor`: wait for a PyTorchJob submitted with ``wait_for_completion=False``."""

from __future__ import annotations

from typing import ClassVar

from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.pytorchjob.kind import PYTORCHJOB
from airflow_gang.sensors.base import SENSOR_PARAMETERS, GangCompletionSensor


class PyTorchJobSensor(GangCompletionSensor):
    __doc__ = (
        """Succeeds when the PyTorchJob succeeds; raises `PyTorchJobFailed` when it fails.

    :param job_kind: leave unset (``PyTorchJob``).
    :param gang_scheduling: how the job was submitted: ``provider`` (default),
        ``training-operator`` or ``disabled`` (which counts bound replicas).
    """
        + SENSOR_PARAMETERS
    )

    default_kind: ClassVar[JobKind] = PYTORCHJOB
