"""`JobWatch`: one job's PyTorchJob, PodGroup and pods followed by list + watch, in the worker.

A sync-mode task (``deferrable=False``) waits in its worker. Reading the three objects every
``poll_interval`` noticed a finished job up to that late; the triggerer's wait notices it in
milliseconds. `JobWatch` gives the worker the same: a thread per kind lists, then watches from
the list's version (`GangJobHook.open_watch`), keeps the objects, and sets `changed` on every
event. While all three watch, the wait reads the gang from memory (`look`): no request of its
own. While one fails it polls as before (`look` says None), so the outage rules are the
wait's, unchanged. Failures follow `airflow_gang.model.watch_rules`, as the triggerer's watches do.

Requests per job: three lists and three watches (reopened every `WATCH_SECONDS`), against three
reads per ``poll_interval`` when polling.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.kinds import WatchKind
from airflow_gang.hooks.watches import WatchStream
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.model.outage import OutageLog
from airflow_gang.model.watch_rules import WatchTrouble, relist_delay, retry_delay

JsonDict = dict[str, Any]
WATCH_SECONDS = 300


class _Follower:
    """List + watch of one kind, narrowed to the job, into ``objects``; never raises."""

    def __init__(self, owner: JobWatch, kind: WatchKind, field: str | None, label: str | None) -> None:
        self.owner = owner
        self.kind = kind
        self.field = field
        self.label = label
        self.objects: dict[str, JsonDict] = {}
        self.watching = False
        self.failures = 0
        self.stream: WatchStream | None = None
        self.trouble = WatchTrouble(
            owner.log, f"watch of {kind} for {owner.namespace}/{owner.name}", "polling until it is back"
        )
        self.thread = threading.Thread(
            target=self._run, name=f"airflow-gang watch {kind} {owner.name}", daemon=True
        )

    def _run(self) -> None:
        owner, hook = self.owner, self.owner.hook
        version, gone = "", 0
        while not owner.stopping.is_set():
            try:
                if not version:
                    items, version = hook.list_with_version(
                        self.kind, owner.namespace, field_selector=self.field, label_selector=self.label
                    )
                    self.objects = {item["metadata"]["name"]: item for item in items}
                    owner.changed.set()
                self.stream = hook.open_watch(
                    self.kind,
                    owner.namespace,
                    resource_version=version,
                    field_selector=self.field,
                    label_selector=self.label,
                    timeout_seconds=WATCH_SECONDS,
                )
                if owner.stopping.is_set():
                    break
                self._opened()
                for event in self.stream.events():
                    gone = 0
                    obj = event["object"] or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event["type"] != "BOOKMARK":
                        self._apply(event["type"], obj)
            except Exception as error:  # GangApiError mostly; nothing may end the loop but stop()
                if owner.stopping.is_set():
                    break
                if isinstance(error, GangApiError) and error.status == 410:
                    version, gone = "", gone + 1  # compacted: list again
                    owner.stopping.wait(relist_delay(gone))
                    continue
                self._failed(error)
                version = ""  # a few objects: list afresh rather than resume
                owner.stopping.wait(retry_delay(self.failures))
            finally:
                self.stream = None

    def _opened(self) -> None:
        if self.failures:
            self.trouble.back()
        self.failures = 0
        if not self.watching:
            self.watching = True
            self.owner.changed.set()  # the wait may now read from memory

    def _failed(self, error: Exception) -> None:
        self.failures += 1
        self.watching = False
        self.trouble.failed(error)
        self.owner.changed.set()  # a look now (a GET): the watch may have missed a change

    def _apply(self, kind_of_event: str, obj: JsonDict) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        # A new dict, swapped in whole: the wait reads ``objects`` from another thread.
        objects = dict(self.objects)
        if kind_of_event == "DELETED":
            objects.pop(name, None)
        else:
            objects[name] = obj
        self.objects = objects
        self.owner.changed.set()


class JobWatch:
    """Follow one job (see the module docstring); a context manager that starts and stops it.

    :param hook: the worker's hook (its client is shared by the three threads).
    :param name: the job's name (its PodGroup's too).
    :param namespace: their namespace.
    :param with_podgroup: also follow the PodGroup (not with ``gang_scheduling="disabled"``).
    :param log: where watch failures are reported (the task log).
    """

    def __init__(
        self,
        hook: GangJobHook,
        name: str,
        namespace: str,
        *,
        with_podgroup: bool,
        log: OutageLog,
        job_kind: JobKind = DEFAULT_JOB_KIND,
    ) -> None:
        self.hook = hook
        self.job_kind = job_kind
        self.name = name
        self.namespace = namespace
        self.log = log
        self.changed = threading.Event()
        self.stopping = threading.Event()
        by_name = f"metadata.name={name}"
        self.followers: dict[WatchKind, _Follower] = {
            job_kind.watch_name: _Follower(self, job_kind.watch_name, by_name, None),
            "pod": _Follower(self, "pod", None, job_kind.pod_selector(name)),
        }
        if with_podgroup:
            self.followers["podgroup"] = _Follower(self, "podgroup", by_name, None)

    def __enter__(self) -> JobWatch:
        for follower in self.followers.values():
            follower.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def healthy(self) -> bool:
        """Every follower has listed and is watching: what it holds is current."""
        return all(follower.watching for follower in self.followers.values())

    def ready(self, timeout: float) -> bool:
        """Wait until `healthy`; False after ``timeout`` s or once a follower failed (poll then)."""
        deadline = time.monotonic() + timeout
        while not self.healthy and time.monotonic() < deadline:
            if any(follower.failures for follower in self.followers.values()):
                return False
            time.sleep(0.02)
        return self.healthy

    def look(self, uid: str | None, gang_scheduling: str) -> GangSnapshot | None:
        """The gang as the watches hold it; None while one is not watching, or when the job is not
        there (gone, or not this uid): a missing job is confirmed by a GET, never assumed."""
        if not self.healthy:
            return None
        job = self.followers[self.job_kind.watch_name].objects.get(self.name)
        if job is None or (uid is not None and job["metadata"].get("uid") != uid):
            return None
        podgroup_follower = self.followers.get("podgroup")
        podgroup = podgroup_follower.objects.get(self.name) if podgroup_follower else None
        pods = list(self.followers["pod"].objects.values())
        return GangSnapshot.of(job, podgroup, pods, gang_scheduling, self.job_kind)

    def stop(self, timeout: float = 5.0) -> None:
        """End every watch now and let the threads finish (they are daemons: never waited on long)."""
        self.stopping.set()
        for follower in self.followers.values():
            stream = follower.stream
            if stream is not None:
                stream.stop()
        deadline = time.monotonic() + timeout
        for follower in self.followers.values():
            if follower.thread.is_alive():
                follower.thread.join(max(0.0, deadline - time.monotonic()))
