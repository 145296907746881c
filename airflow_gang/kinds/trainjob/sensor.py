"""`TrainJobSensor`: wait for a TrainJob submitted with ``wait_for_completion=False``."""

from __future__ import annotations

from typing import Any, ClassVar

from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.trainjob.kind import TRAINJOB
from airflow_gang.sensors.base import SENSOR_PARAMETERS, GangCompletionSensor


class TrainJobSensor(GangCompletionSensor):
    __doc__ = (
        """Succeeds when a Kubeflow Trainer v2 TrainJob succeeds (``Complete``); raises
    `TrainJobFailed` naming the failing node when it fails. For a TrainJob submitted with
    ``TrainJobOperator(wait_for_completion=False)``; `GangAdmissionSensor` takes
    ``job_kind="TrainJob"`` for its admission.

    :param job_kind: leave unset (``TrainJob``).
    :param gang_scheduling: ``trainer`` (default: its runtime's Volcano plugin made the
        PodGroup) or ``disabled`` (a runtime without a podGroupPolicy).
    """
        + SENSOR_PARAMETERS
    )

    default_kind: ClassVar[JobKind] = TRAINJOB

    def __init__(self, *, gang_scheduling: str = "trainer", **kwargs: Any) -> None:
        super().__init__(gang_scheduling=gang_scheduling, **kwargs)
