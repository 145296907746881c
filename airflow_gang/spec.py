"""Moved to `airflow_gang.kinds.pytorchjob.spec`; this public path keeps working."""

from airflow_gang.kinds.base import GROUP_NAME_ANNOTATION, VOLCANO_SCHEDULER
from airflow_gang.kinds.pytorchjob.spec import (
    CONTAINER_NAME,
    DEFAULT_MASTER_PORT,
    PODGROUP_API_VERSION,
    PYTORCHJOB_API_VERSION,
    REPLICA_TYPES,
    GangJobSpec,
)
from airflow_gang.model.k8s_objects import pod_requests
from airflow_gang.model.spec_choices import CleanPodPolicy, GangScheduling, RestartPolicy, RunPolicy

__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_MASTER_PORT",
    "GROUP_NAME_ANNOTATION",
    "PODGROUP_API_VERSION",
    "PYTORCHJOB_API_VERSION",
    "REPLICA_TYPES",
    "VOLCANO_SCHEDULER",
    "CleanPodPolicy",
    "GangJobSpec",
    "GangScheduling",
    "RestartPolicy",
    "RunPolicy",
    "pod_requests",
]
