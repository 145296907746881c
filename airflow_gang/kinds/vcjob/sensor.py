"""`VolcanoJobSensor`: wait for a Volcano Job submitted with ``wait_for_completion=False``."""

from __future__ import annotations

from typing import Any, ClassVar

from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.vcjob.kind import VCJOB
from airflow_gang.sensors.base import SENSOR_PARAMETERS, GangCompletionSensor


class VolcanoJobSensor(GangCompletionSensor):
    __doc__ = (
        """Succeeds when a Volcano Job completes (``Completed``); raises `VolcanoJobFailed` naming
    the failing task and index when Volcano fails, aborts or terminates it. A restart by the job's
    own policy is not a failure: the sensor keeps waiting. For a Volcano Job submitted with
    ``VolcanoJobOperator(wait_for_completion=False)``; `GangAdmissionSensor` takes
    ``job_kind="VolcanoJob"`` for its admission.

    :param job_kind: leave unset (``VolcanoJob``).
    :param gang_scheduling: ``volcano`` (default: the job is one gang) or ``disabled`` (its
        ``minAvailable`` is smaller than the job: every pod bound counts as admitted).
    """
        + SENSOR_PARAMETERS
    )

    default_kind: ClassVar[JobKind] = VCJOB

    def __init__(self, *, gang_scheduling: str = "volcano", **kwargs: Any) -> None:
        super().__init__(gang_scheduling=gang_scheduling, **kwargs)
