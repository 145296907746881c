"""The jobs the page still shows after cleanup deleted them: the operator's ``gang_history`` records.

Each task instance that ran a gang job keeps a record per job in Airflow 3.3's task state store
(`airflow_gang.jobs.history`). The page reads them straight from the metastore backend's
``task_state_store`` table, in one query joined with the task instances' states, so a page of
10,000 historical jobs costs one round trip to the metadata DB. A deployment whose state
backend is not the metastore (``[state_store] backend``) keeps values where the API server
cannot list them: the page then shows live jobs only and says why.

Nothing here raises: a DB that cannot be read gives no history and the reason.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from airflow_gang.jobs.history import ENDED_STATES, GPU, HISTORY_KEY, LOG_TAIL_KEY, SUBMITTED, WAITS_FOR_KEY
from airflow_gang.plugins.identity import TaskIdentity

log = logging.getLogger(__name__)
JsonDict = dict[str, Any]
METASTORE_BACKEND = "airflow.state.metastore.MetastoreBackend"
# Parsed ``gang_history`` entries by store row id, with the ``updated_at`` they were parsed at:
# an entry is fetched and parsed again only when its task wrote it since (records are read
# only, never changed in place).
_cache: dict[int, tuple[Any, list[tuple[dict[str, Any], TaskIdentity]]]] = {}
# The merged rows of the last read per DAG filter, with the fingerprint of what they came from.
_merged_cache: dict[str | None, tuple[int, list[HistoryRecord]]] = {}
MERGED_CACHE_SIZE = 64
_cache_lock = threading.Lock()
# A record whose job is gone and whose end no try wrote: killed, cleared, or its worker died.
GONE = "gone"
_EXTERNAL_REF_KEY = "__airflow_state_ref__"


@dataclass(frozen=True)
class HistoryRecord:
    """One job as its task instance recorded it, with the task instance it belongs to."""

    record: JsonDict
    identity: TaskIdentity
    task_state: str | None

    @property
    def uid(self) -> str:
        return str(self.record.get("uid") or "")

    @property
    def name(self) -> str:
        return str(self.record.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.record.get("namespace") or "")

    @property
    def kind(self) -> str:
        """``PyTorchJob`` or ``TrainJob`` (records written before kinds existed: PyTorchJob)."""
        return str(self.record.get("kind") or "PyTorchJob")

    def outcome(self) -> tuple[str, str | None]:
        """The row's state and reason: as recorded, or ``gone`` for a job whose end nobody wrote."""
        record = self.record
        state = str(record.get("state") or SUBMITTED)
        if state in ENDED_STATES:
            return state, record.get("reason")
        waits_for = record.get("waits_for") or "completion"
        if waits_for != "completion":
            return GONE, (
                f"its task stopped waiting at {waits_for} (wait_for_completion=False), so no end "
                "was recorded; the job has been deleted since"
            )
        return GONE, (
            "the job was deleted before its task recorded how it ended (the task was killed or "
            f"cleared, or its worker died); task instance state: {self.task_state or 'unknown'}"
        )

    @cached_property
    def facts(self) -> JsonDict:
        """What the table's filters and order read (`service.Row`), without building the row
        (computed once: a record is kept across reads while its entry does not change)."""
        state, reason = self.outcome()
        return {
            "kind": self.kind,
            "uid": self.uid,
            "name": self.name,
            "state": state,
            "reason": reason,
            "queue": self.record.get("queue"),
            "created_at": self.record.get("submitted_at"),
            "live": False,
            "airflow": {"dag_id": self.identity.dag_id},
        }

    def summary(self) -> JsonDict:
        """A row of the jobs table, in the shape of a live job's (`summaries.job_summary`)."""
        record = self.record
        state, reason = self.outcome()
        replicas = {str(k): int(v) for k, v in (record.get("replicas") or {}).items()}
        resources = record.get("resources") or {}
        return {
            "kind": self.kind,
            "name": record.get("name"),
            "namespace": record.get("namespace"),
            "uid": record.get("uid"),
            "created_at": record.get("submitted_at"),
            "deleting": False,
            "queue": record.get("queue"),
            "state": state,
            "job_condition": None,
            "gang_scheduling": record.get("gang_scheduling"),
            "podgroup": None,
            "podgroup_phase": None,
            "min_member": None,
            "replicas": replicas,
            "replicas_total": sum(replicas.values()),
            "replicas_bound": 0,
            "replicas_running": 0,
            "reason": reason,
            "warning": None,
            "queued_at": record.get("submitted_at"),
            "admitted_at": record.get("admitted_at"),
            "finished_at": record.get("finished_at"),
            "queued_seconds": record.get("queued_seconds"),
            "run_seconds": record.get("run_seconds"),
            "gpus": float(resources.get(GPU) or 0),
            "gpu_seconds": record.get("gpu_seconds"),
            "failed_replica": record.get("failed_replica"),
            "exit_code": record.get("exit_code"),
            "recorded_at": record.get("recorded_at"),
            "disruptions": [d for d in record.get("disruptions") or [] if isinstance(d, dict)],
            "live": False,
        }

    def timeline(self) -> JsonDict | None:
        """The job's moments for the charts (`timeline.JobTimeline.to_json`'s shape)."""
        row = self.summary()
        if not row["queued_at"]:
            return None
        return {
            "name": row["name"],
            "namespace": row["namespace"],
            "queue": row["queue"],
            "state": row["state"],
            "queued_at": row["queued_at"],
            "admitted_at": row["admitted_at"],
            "running_at": None,
            "finished_at": row["finished_at"],
            "queue_wait_seconds": row["queued_seconds"],
            "run_seconds": row["run_seconds"],
        }


class HistoryReader:
    """Reads the recorded jobs from the metadata DB (see the module docstring)."""

    def records(self, dag_id: str | None = None) -> tuple[list[HistoryRecord], str | None]:
        """Every recorded job (of ``dag_id`` only, if given), and why none could be read."""
        problem = _unsupported_backend()
        if problem:
            return [], problem
        try:
            heads = _store_rows(HISTORY_KEY, dag_id=dag_id, with_values=False)
            # Unchanged entries and task states since the last read: the same rows (a page's
            # calls and refreshes read the same history again and again).
            fingerprint = hash(tuple((row.id, row.updated_at, row.state) for row in heads))
            with _cache_lock:
                hit = _merged_cache.get(dag_id)
            if hit is not None and hit[0] == fingerprint:
                return hit[1], _cleared_on_success()
            rows = merged(self._query(heads, dag_id=dag_id))
            with _cache_lock:
                if len(_merged_cache) >= MERGED_CACHE_SIZE:
                    _merged_cache.clear()
                _merged_cache[dag_id] = (fingerprint, rows)
            return rows, _cleared_on_success()
        except Exception as error:  # the page still shows the cluster
            log.warning("gang UI: cannot read the job history from the metadata DB: %s", error)
            return [], f"the job history could not be read from the Airflow metadata DB: {error}"

    def find(self, namespace: str, name: str) -> tuple[HistoryRecord | None, str | None]:
        """The newest record of job ``namespace/name``, and the master's log tail it kept."""
        if _unsupported_backend():
            return None, None
        try:
            found_jobs = merged(self._query_one(name))
            matches = [r for r in found_jobs if r.name == name and r.namespace == namespace]
            if not matches:
                return None, None
            found = max(matches, key=lambda r: str(r.record.get("submitted_at") or ""))
            return found, self._log_tail(found)
        except Exception as error:
            log.warning("gang UI: cannot read the job history from the metadata DB: %s", error)
            return None, None

    def waiters(self, namespace: str, name: str) -> list[tuple[TaskIdentity, str | None]]:
        """The sensors' task instances that wait for job ``namespace/name``, with their states."""
        if _unsupported_backend():
            return []
        try:
            rows = _store_rows(WAITS_FOR_KEY, name=name)
        except Exception as error:
            log.warning("gang UI: cannot read which tasks wait for %s: %s", name, error)
            return []
        found = []
        for row in rows:
            entry = _json(row.value)
            if isinstance(entry, dict) and (entry.get("name"), entry.get("namespace")) == (name, namespace):
                found.append((_identity(row, None), str(row.state) if row.state else None))
        return found

    def _query_one(self, name: str) -> Iterator[HistoryRecord]:
        """The records that name job ``name``: a narrow query, nothing kept."""
        for row in _store_rows(HISTORY_KEY, name=name):
            for record, identity in _parse(row):
                yield HistoryRecord(record, identity, str(row.state) if row.state else None)

    def _query(self, heads: list[Any], *, dag_id: str | None) -> Iterator[HistoryRecord]:
        """The records of the entries ``heads`` (ids and ``updated_at``): only the entries that
        changed since the last read are fetched and parsed again (JSON is most of the cost)."""
        with _cache_lock:
            stale = [row.id for row in heads if _cache.get(row.id, (None, []))[0] != row.updated_at]
        fresh = {row.id: (row.updated_at, _parse(row)) for row in _store_rows_by_id(stale)}
        with _cache_lock:
            _cache.update(fresh)
            if dag_id is None:  # a full read: forget entries gone from the table
                for gone in set(_cache) - {row.id for row in heads}:
                    del _cache[gone]
            parsed = {row.id: _cache.get(row.id, (None, []))[1] for row in heads}
        for row in heads:
            for record, identity in parsed[row.id]:
                yield HistoryRecord(record, identity, str(row.state) if row.state else None)

    def _log_tail(self, found: HistoryRecord) -> str | None:
        """The log tail kept for the job, by whichever task saw its end (operator or sensor)."""
        for row in _store_rows(LOG_TAIL_KEY, name=found.uid):
            tails = _json(row.value)
            tail = tails.get(found.uid) if isinstance(tails, dict) else None
            if isinstance(tail, str):
                return tail
        return None


def _store_rows(
    key: str, *, dag_id: str | None = None, name: str | None = None, with_values: bool = True
) -> list[Any]:
    """The state store's ``key`` entries (of ``dag_id``; whose value holds the string ``name``,
    a job name or uid) with their task instances' states, in one query (without the values:
    ids and ``updated_at`` only, for `_query`'s cache)."""
    from airflow.models.task_state_store import TaskStateStoreModel as Store
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    same_task = and_(
        TI.dag_id == Store.dag_id,
        TI.run_id == Store.run_id,
        TI.task_id == Store.task_id,
        TI.map_index == Store.map_index,
    )
    columns = [Store.id, Store.dag_id, Store.run_id, Store.task_id, Store.map_index, Store.updated_at]
    if with_values:
        columns.append(Store.value)
    query = select(*columns, TI.state).outerjoin(TI, same_task).where(Store.key == key)
    if dag_id is not None:
        query = query.where(Store.dag_id == dag_id)
    if name is not None:  # names and uids hold no LIKE wildcard (DNS labels, UUIDs)
        query = query.where(Store.value.like(f'%"{name}"%'))
    with create_session() as session:
        return list(session.execute(query).all())


def _store_rows_by_id(ids: list[int], chunk: int = 5000) -> list[Any]:
    """The entries of ``ids`` with their values (in chunks: a database caps an IN list)."""
    from airflow.models.task_state_store import TaskStateStoreModel as Store
    from airflow.utils.session import create_session
    from sqlalchemy import select

    columns = (
        Store.id,
        Store.dag_id,
        Store.run_id,
        Store.task_id,
        Store.map_index,
        Store.updated_at,
        Store.value,
    )
    found: list[Any] = []
    with create_session() as session:
        for start in range(0, len(ids), chunk):
            found += session.execute(select(*columns).where(Store.id.in_(ids[start : start + chunk]))).all()
    return found


def _parse(row: Any) -> list[tuple[JsonDict, TaskIdentity]]:
    """The records of one entry, each with the task instance (and try) it belongs to."""
    return [(record, _identity(row, _int(record.get("try_number")))) for record in _records(row.value)]


def _identity(row: Any, try_number: int | None) -> TaskIdentity:
    return TaskIdentity(
        row.dag_id, row.task_id, row.run_id, int(row.map_index), try_number, resolved=True, dag_resolved=True
    )


def merged(records: Iterable[HistoryRecord]) -> list[HistoryRecord]:
    """One record per job: a job submitted by one task and waited for by a sensor is recorded by
    both. The row belongs to the task that recorded it first (the submitter); its outcome is
    the newest ended record's, whoever saw the end."""
    by_uid: dict[str, list[HistoryRecord]] = {}
    for record in records:
        by_uid.setdefault(record.uid, []).append(record)
    rows = []
    for group in by_uid.values():
        owner = min(group, key=lambda r: str(r.record.get("recorded_at") or ""))
        ends = [r for r in group if r.record.get("state") in ENDED_STATES]
        if not ends or len(group) == 1:
            rows.append(owner)
            continue
        end = max(ends, key=lambda r: str(r.record.get("recorded_at") or ""))
        outcome = {k: v for k, v in end.record.items() if k not in ("try_number", "waits_for")}
        rows.append(HistoryRecord({**owner.record, **outcome}, owner.identity, owner.task_state))
    return rows


def _unsupported_backend() -> str | None:
    try:
        from airflow.configuration import conf

        backend = conf.get("state_store", "backend", fallback=METASTORE_BACKEND) or METASTORE_BACKEND
    except Exception:  # no Airflow config: nothing to read from
        return "the Airflow configuration could not be read"
    if backend != METASTORE_BACKEND:
        return (
            f"jobs deleted by cleanup are not listed: [state_store] backend is {backend}, whose values "
            "the API server cannot list (the page reads the metastore backend's table)"
        )
    return None


def _cleared_on_success() -> str | None:
    """A warning when Airflow deletes a task's store entries as it succeeds (and so its records)."""
    try:
        from airflow.configuration import conf

        cleared = conf.getboolean("state_store", "clear_on_success", fallback=False)
    except Exception:
        return None
    if not cleared:
        return None
    return (
        "[state_store] clear_on_success is on: a succeeded task's job records are deleted with its "
        "state, so its jobs leave this page once cleanup deletes them"
    )


def _json(value: Any) -> Any:
    if not isinstance(value, str | bytes):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def _records(value: Any) -> Iterable[JsonDict]:
    stored = _json(value)
    if not isinstance(stored, list):  # not ours, or an external backend's reference
        return ()
    return (r for r in stored if isinstance(r, dict) and r.get("uid") and _EXTERNAL_REF_KEY not in r)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
