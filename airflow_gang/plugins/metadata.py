"""What the page reads from Airflow's metadata DB: real task-instance ids and ``progress``.

The plugin runs inside the API server, which has the metadata DB. Two reads:

- `MetadataReader.resolve`: the real dag, run and task ids behind a job's identity labels
  (label values may be hashes, see `identity`), by matching candidates from ``dag``,
  ``dag_run`` and ``task_instance``. Ids never change, so a match is cached process-wide.
- `MetadataReader.progress`: the task state store entry ``progress`` (written by the operator,
  Airflow 3.3) of the job's task instance, through the configured ``[state_store] backend``
  (`airflow.state.get_state_backend`, the metastore's ``task_state_store`` table by
  default), the same read the REST API's state-store route makes.

Nothing here raises: a DB that cannot be read gives unresolved ids and a ``progress`` of None
with the reason, so the page still shows what the cluster says.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_gang.plugins.identity import LabelIdentity, TaskIdentity, label_of

log = logging.getLogger(__name__)

PROGRESS_KEY = "progress"  # the operator's STATE_STORE_PROGRESS_KEY
RUN_SCAN_LIMIT = 5000
_EXTERNAL_REF_KEY = "__airflow_state_ref__"
_CACHE_LIMIT = 4096
_cache: dict[tuple[str, str, str], tuple[str, str, str]] = {}
_cache_lock = threading.Lock()


@dataclass
class _Lookups:
    """Per-call memo of label -> id tables, so a page of many jobs scans each table once."""

    dags: dict[str, str] = field(default_factory=dict)
    scanned_dags: bool = False
    runs: dict[str, dict[str, str]] = field(default_factory=dict)
    tasks: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)


def _match(candidates: Iterable[str]) -> dict[str, str]:
    """label value -> id for every candidate id (the first id wins a, vanishingly rare, tie)."""
    table: dict[str, str] = {}
    for candidate in candidates:
        table.setdefault(label_of(candidate), candidate)
    return table


class MetadataReader:
    """Reads Airflow's metadata DB for the page; never raises (see the module docstring)."""

    def resolve(
        self, labels: Iterable[LabelIdentity]
    ) -> tuple[dict[LabelIdentity, TaskIdentity], str | None]:
        """The identity of each label set, and why some could not be resolved (or None).

        :param labels: identities as the labels spell them.
        """
        wanted = list(dict.fromkeys(labels))
        resolved: dict[LabelIdentity, TaskIdentity] = {}
        missing = []
        for item in wanted:
            key = (item.dag_label, item.run_label, item.task_label)
            with _cache_lock:
                hit = _cache.get(key)
            if hit is not None:
                resolved[item] = _identity(item, *hit)
            else:
                missing.append(item)
        if not missing:
            return resolved, None
        try:
            from airflow.utils.session import create_session

            lookups = _Lookups()
            with create_session() as session:
                for item in missing:
                    resolved[item] = self._resolve_one(session, item, lookups)
        except Exception as error:  # the DB is optional for the page: say why and go on
            log.warning("gang UI: cannot read the metadata DB to resolve task instances: %s", error)
            for item in missing:
                resolved.setdefault(item, TaskIdentity.unresolved(item))
            return resolved, f"the Airflow metadata DB could not be read: {type(error).__name__}: {error}"
        return resolved, None

    def _resolve_one(self, session: Any, item: LabelIdentity, lookups: _Lookups) -> TaskIdentity:
        from airflow.models.dag import DagModel
        from airflow.models.dagrun import DagRun
        from airflow.models.taskinstance import TaskInstance
        from sqlalchemy import select

        dags = lookups.dags
        if item.dag_label not in dags:
            exact = session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == item.dag_label))
            if exact is not None:
                dags[item.dag_label] = exact
            elif not lookups.scanned_dags:
                for label, candidate in _match(session.scalars(select(DagModel.dag_id))).items():
                    dags.setdefault(label, candidate)
                lookups.scanned_dags = True
        dag_id = dags.get(item.dag_label)
        if dag_id is None:
            return TaskIdentity.unresolved(item)

        runs = lookups.runs.setdefault(dag_id, {})
        if item.run_label not in runs:
            exact = session.scalar(
                select(DagRun.run_id).where(DagRun.dag_id == dag_id, DagRun.run_id == item.run_label)
            )
            if exact is not None:
                runs[item.run_label] = exact
            else:
                recent = session.scalars(
                    select(DagRun.run_id)
                    .where(DagRun.dag_id == dag_id)
                    .order_by(DagRun.id.desc())
                    .limit(RUN_SCAN_LIMIT)
                )
                for label, run in _match(recent).items():
                    runs.setdefault(label, run)
        run_id = runs.get(item.run_label)
        if run_id is None:
            return TaskIdentity.unresolved(item, dag_id)

        tasks = lookups.tasks.setdefault((dag_id, run_id), {})
        if item.task_label not in tasks:
            task_ids = session.scalars(
                select(TaskInstance.task_id)
                .where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
                .distinct()
            )
            tasks.update(_match(task_ids))
        task_id = tasks.get(item.task_label)
        if task_id is None:
            return TaskIdentity.unresolved(item, dag_id)
        with _cache_lock:
            if len(_cache) >= _CACHE_LIMIT:
                _cache.clear()
            _cache[(item.dag_label, item.run_label, item.task_label)] = (dag_id, run_id, task_id)
        return _identity(item, dag_id, run_id, task_id)

    def task_instance(self, identity: TaskIdentity) -> dict[str, Any] | None:
        """The task instance's Airflow state and current try, or None if it cannot be read."""
        if not identity.resolved:
            return None
        try:
            from airflow.models.taskinstance import TaskInstance
            from airflow.utils.session import create_session
            from sqlalchemy import select

            with create_session() as session:
                row = session.execute(
                    select(TaskInstance.state, TaskInstance.try_number).where(
                        TaskInstance.dag_id == identity.dag_id,
                        TaskInstance.run_id == identity.run_id,
                        TaskInstance.task_id == identity.task_id,
                        TaskInstance.map_index == identity.map_index,
                    )
                ).first()
        except Exception as error:
            log.warning("gang UI: cannot read the task instance: %s", error)
            return None
        if row is None:
            return None
        return {"state": str(row.state) if row.state else None, "try_number": row.try_number}

    def progress(self, identity: TaskIdentity | None) -> dict[str, Any]:
        """``{"value": <the progress entry> | None, "reason": <why None> | None}``."""
        if identity is None:
            return _no_progress("the job carries no Airflow identity labels")
        if not identity.resolved:
            return _no_progress(
                "the job's task instance was not found in the Airflow metadata DB (its run may have "
                "been deleted, or the labels hold hashed ids that match no current run)"
            )
        try:
            from airflow.state import TaskScope, get_state_backend

            scope = TaskScope(
                dag_id=identity.dag_id,
                run_id=identity.run_id,
                task_id=identity.task_id,
                map_index=identity.map_index,
            )
            raw = get_state_backend().get(scope, PROGRESS_KEY)
        except Exception as error:
            log.warning("gang UI: cannot read the task state store: %s", error)
            return _no_progress(f"the task state store could not be read: {type(error).__name__}: {error}")
        if raw is None:
            return _no_progress(
                "no progress entry: the task has not reported one yet, or it was cleared or expired"
            )
        try:
            value = json.loads(raw) if isinstance(raw, str | bytes) else raw
        except ValueError:
            return _no_progress("the progress entry is not JSON")
        if isinstance(value, dict) and _EXTERNAL_REF_KEY in value:
            return _no_progress(
                "the progress entry lives in the workers' external state store backend, which the "
                "API server does not read"
            )
        return {"value": value, "reason": None}


def _identity(item: LabelIdentity, dag_id: str, run_id: str, task_id: str) -> TaskIdentity:
    return TaskIdentity(
        dag_id, task_id, run_id, item.map_index, item.try_number, resolved=True, dag_resolved=True
    )


def _no_progress(reason: str) -> dict[str, Any]:
    return {"value": None, "reason": reason}


def clear_cache() -> None:
    """Forget resolved identities (tests)."""
    with _cache_lock:
        _cache.clear()
