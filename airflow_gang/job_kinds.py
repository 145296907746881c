"""Moved: job kinds live in `airflow_gang.kinds` (one package per kind); this path keeps working."""

from airflow_gang.kinds import JOB_KINDS, PYTORCHJOB, TRAINJOB, ChildResource, JobKind, job_kind_named
from airflow_gang.kinds.base import FAILED, QUEUE_ANNOTATION, SUCCEEDED, SUSPENDED
from airflow_gang.kinds.trainjob.kind import (
    JOBSET_NAME_LABEL,
    RANK_LABEL,
    REPLICATED_JOB_LABEL,
    TrainJobKind,
    patches_queue,
)

__all__ = [
    "FAILED",
    "JOBSET_NAME_LABEL",
    "JOB_KINDS",
    "PYTORCHJOB",
    "QUEUE_ANNOTATION",
    "RANK_LABEL",
    "REPLICATED_JOB_LABEL",
    "SUCCEEDED",
    "SUSPENDED",
    "TRAINJOB",
    "ChildResource",
    "JobKind",
    "TrainJobKind",
    "job_kind_named",
    "patches_queue",
]
