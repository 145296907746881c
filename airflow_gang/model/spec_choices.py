"""The job arguments that are a choice among names, and the PyTorchJob ``runPolicy`` fields.

Part of the job spec (`airflow_gang.spec` re-exports them); a module of their own so the spec
module holds the model and its builders.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GangScheduling(StrEnum):
    """Who makes the job a gang."""

    PROVIDER = "provider"
    """We create the PodGroup and decorate the pods; works with any training-operator."""
    TRAINING_OPERATOR = "training-operator"
    """Only ``runPolicy.schedulingPolicy``; needs ``--gang-scheduler-name=volcano`` on the operator."""
    DISABLED = "disabled"
    """A plain PyTorchJob: the behaviour that deadlocks a shared pool."""


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(StrEnum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class RunPolicy(BaseModel):
    """The PyTorchJob ``runPolicy`` fields we expose (``schedulingPolicy`` is derived)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    clean_pod_policy: CleanPodPolicy | None = Field(default=None, alias="cleanPodPolicy")
    backoff_limit: int | None = Field(default=None, ge=0, alias="backoffLimit")
    active_deadline_seconds: int | None = Field(default=None, ge=1, alias="activeDeadlineSeconds")
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, alias="ttlSecondsAfterFinished")
    # Submit the job suspended (training-operator >= 1.7): it gets no pods until resumed.
    suspend: bool | None = Field(default=None, alias="suspend")

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
