"""Moved to `airflow_gang.kinds.pytorchjob.templates`; this path keeps working."""

from airflow_gang.kinds.pytorchjob.templates import (
    check_pod_template,
    check_pod_template_field,
    load_job_template,
    strip_nulls,
)

__all__ = ["check_pod_template", "check_pod_template_field", "load_job_template", "strip_nulls"]
