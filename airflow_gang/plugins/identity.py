"""Which Airflow task instance a gang job belongs to, from its identity labels (pure).

The operator labels every job with ``airflow-gang.io/dag-id``, ``task-id``, ``run-id``,
``map-index`` and ``try-number`` (`airflow_gang.model.naming.identity_labels`). A label value can
only hold 63 characters of ``[A-Za-z0-9._-]``, so an id that does not fit (most run ids:
``manual__2026-01-01T00:00:00+00:00``) is stored as a readable prefix plus a hash. The real
id is then recovered by matching candidates from the metadata DB (`metadata`), with
`label_of` telling whether a candidate is the one that was labelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow_gang.model.naming import (
    DAG_ID_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MAP_INDEX_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
    safe_label_value,
)


def label_of(airflow_id: str) -> str:
    """The label value an Airflow id is stored as (the id itself when it is a valid value)."""
    return safe_label_value(airflow_id)


@dataclass(frozen=True)
class LabelIdentity:
    """The identity as the labels spell it: values possibly hashed, numbers parsed."""

    dag_label: str
    task_label: str
    run_label: str
    map_index: int
    try_number: int | None

    @classmethod
    def from_labels(cls, labels: dict[str, Any] | None) -> LabelIdentity | None:
        """The identity of an object labelled by the operator, or None for anyone else's."""
        labels = labels or {}
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return None
        dag, task, run = (labels.get(key) for key in (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL))
        if not (dag and task and run):
            return None
        return cls(
            dag_label=str(dag),
            task_label=str(task),
            run_label=str(run),
            map_index=_int(labels.get(MAP_INDEX_LABEL), -1),
            try_number=_int(labels.get(TRY_NUMBER_LABEL), None),
        )


def _int(value: Any, default: int | None) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class TaskIdentity:
    """The task instance try a job belongs to.

    :param resolved: True when dag, task and run ids are the real ones (matched in the
        metadata DB); False when some are label values that could not be matched, which may
        be hashes.
    :param dag_resolved: the dag id alone is real (its run may be gone from the DB).
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int | None
    resolved: bool
    dag_resolved: bool = False

    @classmethod
    def unresolved(cls, labels: LabelIdentity, dag_id: str | None = None) -> TaskIdentity:
        return cls(
            dag_id or labels.dag_label,
            labels.task_label,
            labels.run_label,
            labels.map_index,
            labels.try_number,
            resolved=False,
            dag_resolved=dag_id is not None,
        )


def task_instance_path(identity: TaskIdentity, base_path: str = "") -> str:
    """The Airflow 3 UI route of the task instance (``.../mapped/<i>`` for a mapped one)."""
    path = (
        f"{base_path}/dags/{quote(identity.dag_id, safe='')}/runs/{quote(identity.run_id, safe='')}"
        f"/tasks/{quote(identity.task_id, safe='')}"
    )
    return f"{path}/mapped/{identity.map_index}" if identity.map_index >= 0 else path


def dag_path(dag_id: str, base_path: str = "") -> str:
    """The Airflow 3 UI route of a DAG."""
    return f"{base_path}/dags/{quote(dag_id, safe='')}"


def identity_view(
    labels: LabelIdentity | None, identity: TaskIdentity | None, base_path: str = ""
) -> dict[str, Any] | None:
    """The ``airflow`` block of a job in the JSON API: ids, whether they are real, UI links."""
    if labels is None:
        return None
    return task_view(identity or TaskIdentity.unresolved(labels), base_path)


def task_view(identity: TaskIdentity, base_path: str = "") -> dict[str, Any]:
    """An identity's ids, whether they are real, and its UI links (None where not real)."""
    return {
        "dag_id": identity.dag_id,
        "task_id": identity.task_id,
        "run_id": identity.run_id,
        "map_index": identity.map_index,
        "try_number": identity.try_number,
        "resolved": identity.resolved,
        "task_instance_url": task_instance_path(identity, base_path) if identity.resolved else None,
        "dag_url": dag_path(identity.dag_id, base_path)
        if identity.resolved or identity.dag_resolved
        else None,
    }
