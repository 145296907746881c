"""Moved to `airflow_gang.kinds.trainjob.spec`; this public path keeps working."""

from airflow_gang.kinds.trainjob.kind import runtime_policy_mode
from airflow_gang.kinds.trainjob.spec import (
    DEFAULT_RUNTIME,
    PATCH_MANAGER,
    TRAINER_NODE,
    TRAINJOB_API_VERSION,
    TrainJobSpec,
    check_trainjob_name,
    runtime_queue,
)

__all__ = [
    "DEFAULT_RUNTIME",
    "PATCH_MANAGER",
    "TRAINER_NODE",
    "TRAINJOB_API_VERSION",
    "TrainJobSpec",
    "check_trainjob_name",
    "runtime_policy_mode",
    "runtime_queue",
]
