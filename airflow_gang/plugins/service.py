"""The JSON answers of the API, put together from the cluster (`cluster_reader`), the metadata DB
(`metadata`) and the viewer's rights (`access`). No HTTP here: `api` maps these onto routes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_gang.naming import LABEL_PREFIX
from airflow_gang.plugins.access import Access
from airflow_gang.plugins.cluster_reader import ClusterReader, JobRecord
from airflow_gang.plugins.errors import PageError
from airflow_gang.plugins.identity import LabelIdentity, TaskIdentity, identity_view, label_of
from airflow_gang.plugins.metadata import MetadataReader
from airflow_gang.plugins.summaries import (
    STATES,
    condition_rows,
    event_rows,
    job_summary,
    pod_rows,
    podgroup_view,
    queue_row,
    replica_rows,
    timeline_of,
)

JsonDict = dict[str, Any]
NO_QUEUE = "(no queue)"
Identities = tuple[LabelIdentity | None, TaskIdentity | None]


@dataclass(frozen=True)
class JobFilter:
    """The jobs table's filters; None or empty matches everything."""

    namespace: str | None = None
    queue: str | None = None
    dag_id: str | None = None
    states: tuple[str, ...] = ()
    include_unmanaged: bool = False

    @classmethod
    def parse(
        cls,
        namespace: str | None,
        queue: str | None,
        dag_id: str | None,
        state: str | None,
        include_unmanaged: bool,
    ) -> JobFilter:
        states = tuple(s.strip().lower() for s in (state or "").split(",") if s.strip())
        unknown = [s for s in states if s not in STATES]
        if unknown:
            raise PageError(
                400, "bad_request", f"unknown state(s) {', '.join(unknown)}: choose from {', '.join(STATES)}"
            )
        return cls(namespace or None, queue or None, dag_id or None, states, include_unmanaged)


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
    ) -> None:
        self.conn_id = conn_id
        self.reader = reader
        self.metadata = metadata
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

    def _rows(self, job_filter: JobFilter) -> list[tuple[JobRecord, JsonDict]]:
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
            row = job_summary(record.job, record.podgroup, record.pods, now, record.events)
            row["managed"] = label is not None
            row["airflow"] = identity_view(label, identity, self.base_path)
            if _matches(row, job_filter):
                rows.append((record, row))
        return rows

    # -- answers ---------------------------------------------------------------------------

    def jobs(self, job_filter: JobFilter) -> JsonDict:
        """The jobs table: newest first, with the values the filters can take."""
        rows = self._rows(job_filter)
        rows.sort(key=lambda item: str(item[1]["created_at"] or ""), reverse=True)
        jobs = [row for _, row in rows]
        return {
            "jobs": jobs,
            "total": len(jobs),
            "namespaces": list(self.reader.namespaces),
            "queues": sorted({row["queue"] for row in jobs if row["queue"]}),
            "dag_ids": sorted({row["airflow"]["dag_id"] for row in jobs if row["airflow"]}),
            "states": list(STATES),
            "warnings": self.warnings,
            "generated_at": _now().isoformat(),
        }

    def timeline(self, job_filter: JobFilter) -> JsonDict:
        """Per queue, each job's queued -> admitted -> running -> finished moments."""
        by_queue: dict[str, list[JsonDict]] = {}
        for record, row in self._rows(job_filter):
            timeline = timeline_of(record.job, record.pods)
            if timeline is None:
                continue
            entry = timeline.to_json()
            entry["gang_state"] = row["state"]
            entry["reason"] = row["reason"]
            by_queue.setdefault(row["queue"] or NO_QUEUE, []).append(entry)
        queues: list[JsonDict] = [
            {"queue": queue, "jobs": sorted(entries, key=_timeline_order)}
            for queue, entries in sorted(by_queue.items())
        ]
        return {"queues": queues, "now": _now().isoformat(), "warnings": self.warnings}

    def job(self, namespace: str, name: str) -> JsonDict:
        """Everything about one job: conditions, PodGroup, replicas, pods, events, progress."""
        self._check_namespace(namespace)
        record = self.reader.job(namespace, name)
        not_found = PageError(404, "not_found", f"PyTorchJob {namespace}/{name} does not exist (any more)")
        if record is None:
            raise not_found
        label, identity = self._identities([record])[record.job["metadata"].get("uid") or record.name]
        if not self._visible(identity):
            raise not_found  # do not tell who cannot read the DAG that the job exists
        now = _now()
        events = self.reader.events(record)
        summary = job_summary(record.job, record.podgroup, record.pods, now, events)
        summary["managed"] = label is not None
        airflow = identity_view(label, identity, self.base_path)
        if airflow is not None and identity is not None:
            airflow["task_instance"] = self.metadata.task_instance(identity)
        timeline = timeline_of(record.job, record.pods)
        metadata = record.job.get("metadata") or {}
        return {
            "job": summary,
            "conditions": condition_rows(record.job),
            "podgroup": podgroup_view(record.podgroup),
            "replicas": replica_rows(record.job),
            "pods": pod_rows(record.pods),
            "events": event_rows(events),
            "labels": {k: v for k, v in (metadata.get("labels") or {}).items() if k.startswith(LABEL_PREFIX)},
            "airflow": airflow,
            "progress": self.metadata.progress(identity)
            if label is not None
            else {"value": None, "reason": "the job was not submitted by airflow-gang's operator"},
            "timeline": timeline.to_json() if timeline else None,
            "warnings": self.warnings,
            "generated_at": now.isoformat(),
        }

    def queues(self) -> JsonDict:
        """Every Volcano queue with its state, capability, allocation and PodGroup counts."""
        queues, podgroups = self.reader.queues()
        rows = [queue_row(queue, podgroups) for queue in queues]
        rows.sort(key=lambda row: str(row["name"]))
        return {
            "queues": rows,
            "namespaces": list(self.reader.namespaces),
            "warnings": self.warnings,
            "generated_at": _now().isoformat(),
        }


def _timeline_order(entry: JsonDict) -> tuple[str, str]:
    return (str(entry["queued_at"]), str(entry["name"]))


def _labels(record: JobRecord) -> LabelIdentity | None:
    return LabelIdentity.from_labels((record.job.get("metadata") or {}).get("labels"))


def _matches(row: JsonDict, job_filter: JobFilter) -> bool:
    if job_filter.queue is not None and (row["queue"] or NO_QUEUE) != job_filter.queue:
        return False
    if job_filter.states and row["state"] not in job_filter.states:
        return False
    if job_filter.dag_id is not None:
        airflow = row["airflow"]
        # An unresolved dag id is the label value, which may be the hash of the wanted id.
        return airflow is not None and airflow["dag_id"] in (job_filter.dag_id, label_of(job_filter.dag_id))
    return True
