"""The jobs the page still shows after cleanup deleted them: the operator's ``gang_history`` records.

Each task instance that ran a gang job keeps a record per job in Airflow 3.3's task state store
(`airflow_gang.state.history`). The page reads them straight from the metastore backend's
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
from typing import Any

from airflow_gang.plugins.history_record import HistoryRecord, merged, to_int
from airflow_gang.plugins.identity import TaskIdentity
from airflow_gang.state.history import HISTORY_KEY, LOG_TAIL_KEY, WAITS_FOR_KEY

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
_EXTERNAL_REF_KEY = "__airflow_state_ref__"


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
            fingerprint = hash(tuple((row.id, row.updated_at, row.state, row.try_number) for row in heads))
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
                yield _history_record(record, identity, row)

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
                yield _history_record(record, identity, row)

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
    task = (TI.state, TI.try_number, TI.end_date)
    query = select(*columns, *task).outerjoin(TI, same_task).where(Store.key == key)
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


def _history_record(record: JsonDict, identity: TaskIdentity, row: Any) -> HistoryRecord:
    """A record with the state, try and end of the task instance it belongs to (``row``)."""
    ended = row.end_date.isoformat() if row.end_date is not None else None
    state = str(row.state) if row.state else None
    return HistoryRecord(record, identity, state, to_int(row.try_number), ended)


def _parse(row: Any) -> list[tuple[JsonDict, TaskIdentity]]:
    """The records of one entry, each with the task instance (and try) it belongs to."""
    return [(record, _identity(row, to_int(record.get("try_number")))) for record in _records(row.value)]


def _identity(row: Any, try_number: int | None) -> TaskIdentity:
    return TaskIdentity(
        row.dag_id, row.task_id, row.run_id, int(row.map_index), try_number, resolved=True, dag_resolved=True
    )


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
