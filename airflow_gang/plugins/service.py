"""The JSON answers of the API, put together from the cluster (`cluster_reader`), the metadata DB
(`metadata`, and `history`: the jobs cleanup deleted) and the viewer's rights (`access`). No HTTP
here: `api` maps these onto routes.

A job is one row whether it is live or recorded: while its objects exist the cluster says where
it stands; once they are gone its task's record says how it ended. Rows are newest first (by
submission), filtered, then paged; the timeline draws the rows of the same page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from airflow_gang.kinds import ANY_JOB_KIND
from airflow_gang.model.naming import LABEL_PREFIX
from airflow_gang.plugins import actions
from airflow_gang.plugins.access import Access
from airflow_gang.plugins.capacity_reader import read_capacity
from airflow_gang.plugins.cluster_reader import ClusterReader, JobRecord
from airflow_gang.plugins.errors import PageError
from airflow_gang.plugins.history import HistoryReader
from airflow_gang.plugins.history_record import HistoryRecord
from airflow_gang.plugins.identity import (
    LabelIdentity,
    TaskIdentity,
    identity_view,
    task_instance_path,
    task_view,
)
from airflow_gang.plugins.job_filter import NO_QUEUE, JobFilter, matches, parse_kind
from airflow_gang.plugins.metadata import MetadataReader
from airflow_gang.plugins.object_rows import condition_rows, event_rows, pod_rows
from airflow_gang.plugins.summaries import STATES, podgroup_view, queue_row, replica_rows, timeline_of

JsonDict = dict[str, Any]
Identities = tuple[LabelIdentity | None, TaskIdentity | None]


@dataclass
class Row:
    """One job of the table, live or recorded.

    ``facts`` are what the filters, the order and the answer's lists read (``uid``, ``name``,
    ``state``, ``queue``, ``created_at``, ``live``, ``reason``, ``airflow.dag_id``); the whole
    row (`summary`) and its timeline are built only for the page shown: with thousands of
    recorded jobs, building every row's links costs more than all the rest.
    """

    facts: JsonDict
    build: Callable[[], JsonDict] = field(repr=False)
    timeline: Callable[[], JsonDict | None] = field(repr=False)

    def summary(self) -> JsonDict:
        return self.build()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class GangPageService:
    """Answers of the JSON API for one request.

    :param reader: reads the cluster.
    :param metadata: reads Airflow's metadata DB.
    :param access: the viewer's rights.
    :param airflow_base_path: path prefix of Airflow's UI, for links to task instances.
    :param conn_id: the Kubernetes connection read, for error messages.
    """

    def __init__(
        self,
        reader: ClusterReader,
        metadata: MetadataReader,
        access: Access,
        airflow_base_path: str = "",
        conn_id: str = "kubernetes_default",
        *,
        history: HistoryReader | None = None,
    ) -> None:
        self.conn_id = conn_id
        self.reader = reader
        self.metadata = metadata
        self.history = history or HistoryReader()
        self.access = access
        self.base_path = airflow_base_path
        self.warnings: list[str] = []

    # -- shared steps ----------------------------------------------------------------------

    def _namespaces(self, namespace: str | None) -> tuple[str, ...]:
        if namespace is None:
            return self.reader.namespaces
        self._check_namespace(namespace)
        return (namespace,)

    def _check_namespace(self, namespace: str) -> None:
        if namespace not in self.reader.namespaces:
            raise PageError(
                404,
                "namespace_not_shown",
                f"namespace {namespace!r} is not shown by this page (it shows "
                f"{', '.join(self.reader.namespaces)}); add it to [gang] ui_namespaces",
            )

    def _identities(self, records: Sequence[JobRecord]) -> dict[str, Identities]:
        labels = {record.job["metadata"].get("uid") or record.name: _labels(record) for record in records}
        resolved, problem = self.metadata.resolve(label for label in labels.values() if label is not None)
        if problem:
            self.warnings.append(f"links to task instances are unavailable: {problem}")
        return {key: (label, resolved.get(label) if label else None) for key, label in labels.items()}

    def _visible(self, identity: TaskIdentity | None) -> bool:
        return identity is None or self.access.can_see_dag(identity)

    def _live_rows(self, job_filter: JobFilter) -> list[Row]:
        snapshot = self.reader.snapshot(
            include_unmanaged=job_filter.include_unmanaged, namespaces=self._namespaces(job_filter.namespace)
        )
        self.warnings.extend(snapshot.warnings)
        identities = self._identities(snapshot.jobs)
        now = _now()
        rows = []
        for record in snapshot.jobs:
            label, identity = identities[record.job["metadata"].get("uid") or record.name]
            if not self._visible(identity):
                continue
            row = record.summary(now)
            row["managed"] = label is not None
            row["airflow"] = identity_view(label, identity, self.base_path)
            rows.append(Row(row, partial(dict, row), _live_timeline(record, row)))
        return rows

    def _recorded_rows(self, job_filter: JobFilter, live_uids: set[str]) -> list[Row]:
        records, problem = self.history.records(job_filter.dag_id)
        if problem:
            self.warnings.append(problem)
        namespaces = set(self._namespaces(job_filter.namespace))
        rows = []
        for record in records:
            if record.uid in live_uids or record.namespace not in namespaces:
                continue
            if not self._visible(record.identity):
                continue
            rows.append(Row(record.facts, partial(self._recorded_summary, record), record.timeline))
        return rows

    def _waiters(self, namespace: str, name: str) -> list[JsonDict]:
        """The sensors waiting for the job (another task submitted it), as links."""
        return [
            {
                "dag_id": identity.dag_id,
                "task_id": identity.task_id,
                "run_id": identity.run_id,
                "map_index": identity.map_index,
                "state": state,
                "task_instance_url": task_instance_path(identity, self.base_path),
            }
            for identity, state in self.history.waiters(namespace, name)
            if self._visible(identity)
        ]

    def _recorded_summary(self, record: HistoryRecord) -> JsonDict:
        row = record.summary()
        row["managed"] = True
        row["airflow"] = _recorded_identity(record, self.base_path)
        return row

    def _rows(self, job_filter: JobFilter) -> list[Row]:
        """Live and recorded jobs matching the filters, newest first (not yet paged)."""
        live = self._live_rows(job_filter)
        live_uids = {str(row.facts["uid"]) for row in live if row.facts["uid"]}
        rows = [
            row for row in live + self._recorded_rows(job_filter, live_uids) if matches(row.facts, job_filter)
        ]
        rows.sort(key=lambda row: (str(row.facts["created_at"] or ""), str(row.facts["name"])), reverse=True)
        return rows

    # -- answers ---------------------------------------------------------------------------

    def jobs(self, job_filter: JobFilter) -> JsonDict:
        """The jobs table: newest first, with the values the filters can take."""
        everything = self._rows(job_filter)
        rows = [row.facts for row in everything]
        start = job_filter.offset
        return {
            "jobs": [row.summary() for row in everything[start : start + job_filter.limit]],
            "total": len(rows),
            "offset": start,
            "limit": job_filter.limit,
            "live": sum(1 for row in rows if row["live"]),
            "namespaces": list(self.reader.namespaces),
            "queues": sorted({row["queue"] for row in rows if row["queue"]}),
            "dag_ids": sorted({row["airflow"]["dag_id"] for row in rows if row["airflow"]}),
            "states": list(STATES),
            "warnings": self.warnings,
            "generated_at": _now().isoformat(),
        }

    def timeline(self, job_filter: JobFilter) -> JsonDict:
        """Per queue, each job's queued -> admitted -> running -> finished moments, for the jobs of
        the table's page (the same filters, order and paging)."""
        by_queue: dict[str, list[JsonDict]] = {}
        start = job_filter.offset
        for row in self._rows(job_filter)[start : start + job_filter.limit]:
            entry = row.timeline()
            if entry is None:
                continue
            entry["gang_state"] = row.facts["state"]
            entry["reason"] = row.facts["reason"]
            by_queue.setdefault(row.facts["queue"] or NO_QUEUE, []).append(entry)
        queues: list[JsonDict] = [
            {"queue": queue, "jobs": sorted(entries, key=_timeline_order)}
            for queue, entries in sorted(by_queue.items())
        ]
        return {"queues": queues, "now": _now().isoformat(), "warnings": self.warnings}

    def job(self, namespace: str, name: str, kind: str | None = None) -> JsonDict:
        """Everything about one job: conditions, PodGroup, replicas, pods, events, progress.

        :param kind: a kind's name (``VolcanoJob``...); None: the first kind with a job of that name.
        """
        self._check_namespace(namespace)
        job_kind = parse_kind(kind)
        record = self.reader.job(namespace, name, job_kind)
        what = f"{job_kind.kind if job_kind else ANY_JOB_KIND} {namespace}/{name}"
        not_found = PageError(404, "not_found", f"{what} does not exist, and no Airflow task recorded it")
        if record is None:
            return self._recorded_job(namespace, name, not_found)
        label, identity = self._identities([record])[record.job["metadata"].get("uid") or record.name]
        if not self._visible(identity):
            raise not_found  # do not tell who cannot read the DAG that the job exists
        now = _now()
        events = self.reader.events(record)
        summary = record.summary(now, events)
        summary["managed"] = label is not None
        airflow = identity_view(label, identity, self.base_path)
        if airflow is not None and identity is not None:
            airflow["task_instance"] = self.metadata.task_instance(identity)
            airflow["waited_by"] = self._waiters(namespace, name)
        timeline = timeline_of(record.job, record.pods, record.job_kind)
        metadata = record.job.get("metadata") or {}
        if summary["state"] == "queued" and record.podgroup is not None and not summary["suspended"]:
            capacity = read_capacity(self.reader.hook, self.reader.namespaces)
            waiting = capacity.gang(namespace, str(record.podgroup["metadata"]["name"]))
            summary["position"] = waiting.to_json() if waiting is not None else None
        return {
            "job": summary,
            "conditions": condition_rows(record.job),
            "podgroup": podgroup_view(record.podgroup),
            "replicas": replica_rows(record.job, record.job_kind, record.pods, summary["replicas_total"]),
            "pods": pod_rows(record.pods, record.job_kind),
            "events": event_rows(events),
            "labels": {k: v for k, v in (metadata.get("labels") or {}).items() if k.startswith(LABEL_PREFIX)},
            "airflow": airflow,
            "progress": self.metadata.progress(identity)
            if label is not None
            else {"value": None, "reason": "the job was not submitted by airflow-gang's operator"},
            "timeline": timeline.to_json() if timeline else None,
            "recorded": None,
            "warnings": self.warnings,
            "generated_at": now.isoformat(),
        }

    def act(self, namespace: str, name: str, action: str, kind: str | None = None) -> JsonDict:
        """Delete, suspend or resume a live job (`actions`), if the viewer may change its DAG."""
        self._check_namespace(namespace)
        job_kind = parse_kind(kind)
        record = self.reader.job(namespace, name, job_kind)
        what = f"{job_kind.kind if job_kind else ANY_JOB_KIND} {namespace}/{name}"
        gone = PageError(404, "not_found", f"{what} does not exist (any more)")
        if record is None:
            raise gone
        label, identity = self._identities([record])[record.job["metadata"].get("uid") or record.name]
        if label is None or identity is None:
            raise PageError(
                403,
                "not_airflows",
                f"{record.kind} {namespace}/{name} was not submitted by an Airflow task, so no DAG's "
                "permissions cover it: change it with kubectl",
            )
        if not self._visible(identity):
            raise gone
        if not self.access.can_edit_dag(identity):
            raise PageError(
                403,
                "not_permitted",
                f"{self.access.user_name} may not {action} jobs of DAG {identity.dag_id!r}: that needs "
                "permission to change its task instances (as clearing or marking them does); ask an "
                "Airflow admin for it",
            )
        summary = record.summary(_now(), [])
        actions.check_allowed(action, record, summary)
        outcome = actions.perform(action, record, summary, self.reader.hook, self.access.user_name)
        actions.audit(action, identity, record, self.access.user_name, outcome)
        return {
            "action": action,
            "kind": record.kind,
            "name": name,
            "namespace": namespace,
            "message": outcome,
        }

    def _recorded_job(self, namespace: str, name: str, not_found: PageError) -> JsonDict:
        """A job whose objects are gone, as its task recorded it (404 if none did)."""
        found, log_tail = self.history.find(namespace, name)
        if found is None or not self._visible(found.identity):
            raise not_found
        summary = self._recorded_summary(found)
        airflow = summary["airflow"]
        airflow["task_instance"] = self.metadata.task_instance(found.identity)
        airflow["waited_by"] = self._waiters(namespace, name)
        replicas = [
            {"type": kind, "desired": count, "active": 0, "succeeded": 0, "failed": 0}
            for kind, count in summary["replicas"].items()
        ]
        return {
            "job": summary,
            "conditions": [],
            "podgroup": None,
            "replicas": replicas,
            "pods": [],
            "events": [],
            "labels": {},
            "airflow": airflow,
            "progress": self.metadata.progress(found.identity),
            "timeline": found.timeline(),
            "recorded": {
                "recorded_at": found.record.get("recorded_at"),
                "log_tail": log_tail,
                "message": "the job's objects were deleted (cleanup, an admission timeout or a kill); "
                "this is what its Airflow task recorded",
            },
            "warnings": self.warnings,
            "generated_at": _now().isoformat(),
        }

    def queues(self) -> JsonDict:
        """Every Volcano queue (state, capability, deserved share, what it holds, what its waiting
        gangs ask for, what is free to it, PodGroup counts), the cluster's totals, and each
        waiting gang's place in Volcano's admission order (`airflow_gang.model.capacity`)."""
        queues, podgroups = self.reader.queues()
        capacity = read_capacity(self.reader.hook, self.reader.namespaces).to_json()
        self.warnings.extend(capacity["warnings"])
        by_name = {entry["name"]: entry for entry in capacity["queues"]}
        rows = []
        for queue in queues:
            row = queue_row(queue, podgroups)
            row["volcano_allocated"] = row["allocated"]
            measured = by_name.get(row["name"]) or {}
            for key in ("deserved", "guarantee", "allocated", "pending", "free", "waiting_gangs"):
                if key in measured:
                    row[key] = measured[key]
            rows.append(row)
        rows.sort(key=lambda row: str(row["name"]))
        return {
            "queues": rows,
            "cluster": capacity["resources"],
            "waiting": capacity["waiting"],
            "namespaces": list(self.reader.namespaces),
            "warnings": self.warnings,
            "generated_at": _now().isoformat(),
        }


def _timeline_order(entry: JsonDict) -> tuple[str, str]:
    return (str(entry["queued_at"]), str(entry["name"]))


def _live_timeline(record: JobRecord, row: JsonDict) -> Callable[[], JsonDict | None]:
    def draw() -> JsonDict | None:
        timeline = timeline_of(record.job, record.pods, record.job_kind)
        return timeline.to_json() if timeline is not None else None

    return draw


def _recorded_identity(record: HistoryRecord, base_path: str) -> JsonDict:
    return task_view(record.identity, base_path)


def _labels(record: JobRecord) -> LabelIdentity | None:
    return LabelIdentity.from_labels((record.job.get("metadata") or {}).get("labels"))
