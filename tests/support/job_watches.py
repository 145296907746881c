"""Watches that record the PyTorchJobs created (and deleted) while a test runs, in a thread.

`JobEvents`: every ADDED and DELETED in the namespace (the e2e tests). `created_jobs`: every job
of one DAG created, with its task and try (the real-stack tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch

from airflow_gang.model.naming import DAG_ID_LABEL, TASK_ID_LABEL, TRY_NUMBER_LABEL, safe_label_value
from gang_sim.cluster import SimCluster
from tests.support.cluster import PYTORCHJOBS


@dataclass(frozen=True)
class JobEvent:
    type: str
    name: str
    uid: str
    labels: dict[str, str]


@dataclass
class JobEvents:
    """Every PyTorchJob ADDED or DELETED in the namespace while it runs (a watch in a thread).

    A deleted job cannot be seen afterwards; this is how a test proves that a job existed, that it
    was deleted, and that no second one was ever created.
    """

    cluster: SimCluster
    events: list[JobEvent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> JobEvents:
        self._thread = threading.Thread(target=self._run, name="job-events", daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the PyTorchJob watch did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        with self.cluster.api_client() as api:
            # A user agent of its own, which injected faults spare by default filters.
            api.user_agent = "e2e-job-events"
            custom = k8s.CustomObjectsApi(api)
            seen: set[str] = set()
            version = self._relist(custom, seen)
            self._ready.set()
            while not self._stop.is_set():
                try:
                    stream = watch.Watch().stream(
                        custom.list_namespaced_custom_object,
                        *PYTORCHJOBS,
                        resource_version=version,
                        timeout_seconds=1,
                        allow_watch_bookmarks=True,
                    )
                    for event in stream:
                        metadata = event["object"]["metadata"]
                        version = metadata.get("resourceVersion", version)
                        if event["type"] in ("ADDED", "DELETED"):
                            self._record(event["type"], metadata, seen)
                except Exception:  # an outage test closed the listener: list again once it is back
                    time.sleep(0.2)
                    try:
                        version = self._relist(custom, seen)
                    except Exception:
                        continue

    def _relist(self, custom: k8s.CustomObjectsApi, seen: set[str]) -> str:
        """Record jobs that appeared while not watching; the version to watch from."""
        listed = custom.list_namespaced_custom_object(*PYTORCHJOBS, _request_timeout=5)
        for item in listed["items"]:
            if item["metadata"]["uid"] not in seen:
                self._record("ADDED", item["metadata"], seen)
        return str(listed["metadata"]["resourceVersion"])

    def _record(self, kind: str, metadata: dict[str, Any], seen: set[str]) -> None:
        if kind == "ADDED" and metadata["uid"] in seen:
            return
        seen.add(metadata["uid"])
        self.events.append(JobEvent(kind, metadata["name"], metadata["uid"], metadata.get("labels") or {}))

    def of_dag(self, dag_id: str) -> list[JobEvent]:
        return [event for event in self.events if event.labels.get(DAG_ID_LABEL) == dag_id]

    def added(self, dag_id: str) -> list[JobEvent]:
        return [event for event in self.of_dag(dag_id) if event.type == "ADDED"]


@dataclass
class CreatedJobs:
    """PyTorchJobs seen created (ADDED) by a watch: (task id, try number, uid), in order."""

    seen: list[tuple[str, str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def uids(self, task_id: str) -> list[str]:
        return [uid for task, _, uid in self.seen if task == task_id]


@contextmanager
def created_jobs(api: k8s.ApiClient, dag_id: str) -> Iterator[CreatedJobs]:
    """Watch every PyTorchJob of ``dag_id`` created while the block runs.

    A list gives the starting resourceVersion, so nothing created after it is missed, however
    briefly it lives; an interrupted watch resumes from the last version it saw.
    """
    custom = k8s.CustomObjectsApi(api)
    selector = f"{DAG_ID_LABEL}={safe_label_value(dag_id)}"
    listed = custom.list_namespaced_custom_object(*PYTORCHJOBS, label_selector=selector)
    found = CreatedJobs()
    for job in listed["items"]:
        found.errors.append(f"job {job['metadata']['name']} existed before the test")
    version = listed["metadata"]["resourceVersion"]
    stop = threading.Event()

    def follow() -> None:
        nonlocal version
        while not stop.is_set():
            try:
                for event in watch.Watch().stream(
                    custom.list_namespaced_custom_object,
                    *PYTORCHJOBS,
                    label_selector=selector,
                    resource_version=version,
                    timeout_seconds=2,
                ):
                    metadata = event["object"]["metadata"]
                    version = metadata.get("resourceVersion", version)
                    if event["type"] == "ADDED":
                        labels = metadata.get("labels") or {}
                        found.seen.append(
                            (
                                labels.get(TASK_ID_LABEL, "?"),
                                labels.get(TRY_NUMBER_LABEL, "?"),
                                metadata["uid"],
                            )
                        )
            except Exception as error:  # a 410 would mean lost events: the test must not pass on it
                found.errors.append(repr(error))
                return

    watcher = threading.Thread(target=follow, name=f"watch-{dag_id}", daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        stop.set()
        watcher.join(timeout=10)
