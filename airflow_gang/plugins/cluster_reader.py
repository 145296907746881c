"""Everything the page reads from Kubernetes, through `GangJobHook`, and only reads.

Per namespace a jobs page costs a list call per kind of gang job (PyTorchJobs, Kubeflow
Trainer v2 TrainJobs), one for PodGroups and one per kind for its pods (only when there are
such jobs), whatever the number of jobs; a TrainJob's runtime is read once per refresh (it
decides the gang mode); one job adds its events; the queue overview lists the cluster-scoped
queues. A list that answers 404 is checked against discovery: a kind that is not served is
left out (a cluster without Trainer shows its PyTorchJobs, and the other way round), and only
a cluster serving neither gives `GangCRDNotInstalled` (with the fix) instead of a bare 404.
Without Volcano the jobs are still listed, with a warning, since a cluster may run jobs
without gang scheduling.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from airflow_gang.exceptions import GangApiError, GangCRDNotInstalled
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import RetryPolicy
from airflow_gang.kinds import DEFAULT_JOB_KIND, JOB_KINDS, JobKind
from airflow_gang.model.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_gang.plugins.object_rows import pods_by_label
from airflow_gang.plugins.settings import UiSettings
from airflow_gang.plugins.summaries import job_summary, podgroup_for

JsonDict = dict[str, Any]
T = TypeVar("T")

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
# A page refreshes every few seconds and someone is looking at it: fail fast and say why,
# rather than ride out an outage the way a waiting task does.
UI_RETRY_POLICY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5)
MAX_EVENT_PODS = 16


@dataclass
class JobRecord:
    """A gang job (PyTorchJob, TrainJob) with its PodGroup (if any) and its replica pods.

    ``gang_scheduling`` is the job's gang mode when something else than its objects tells it (a
    TrainJob's runtime), else None.
    """

    job: JsonDict
    podgroup: JsonDict | None
    pods: list[JsonDict]
    events: list[JsonDict] = field(default_factory=list)
    job_kind: JobKind = DEFAULT_JOB_KIND
    gang_scheduling: str | None = None

    @property
    def kind(self) -> str:
        return self.job_kind.kind

    def summary(self, now: dt.datetime, events: list[JsonDict] | None = None) -> JsonDict:
        """The job's row of the table (`summaries.job_summary`)."""
        return job_summary(
            self.job,
            self.podgroup,
            self.pods,
            now,
            self.events if events is None else events,
            job_kind=self.job_kind,
            gang_scheduling=self.gang_scheduling,
        )

    @property
    def namespace(self) -> str:
        return str(self.job["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])


@dataclass
class Snapshot:
    """The jobs of the namespaces shown, plus what could not be read but did not stop the page."""

    jobs: list[JobRecord] = field(default_factory=list)
    podgroups: list[JsonDict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _waiting_to_enqueue(podgroup: JsonDict | None) -> bool:
    return podgroup is not None and ((podgroup.get("status") or {}).get("phase") or "Pending") == "Pending"


class ClusterReader:
    """Reads jobs, PodGroups, pods, events and queues for the page (never writes).

    :param hook: the hook to read with.
    :param namespaces: the namespaces the page shows.
    """

    def __init__(self, hook: GangJobHook, namespaces: Sequence[str]) -> None:
        self.hook = hook
        self.namespaces = tuple(namespaces)
        # Kinds of gang job the cluster does not serve (their list answered 404), and runtimes
        # read: a reader lives for one request, so neither is asked twice in it.
        self.unserved: dict[str, GangCRDNotInstalled] = {}
        self._runtime_modes: dict[tuple[str, str, str], str | None] = {}

    @classmethod
    def from_settings(cls, settings: UiSettings) -> ClusterReader:
        """A reader on ``[gang] ui_kubernetes_conn_id`` for ``[gang] ui_namespaces``.

        Without configured namespaces: the connection's namespace, else ``default``.
        """
        hook = GangJobHook(conn_id=settings.conn_id)
        hook.retry_policy = UI_RETRY_POLICY
        namespaces = settings.namespaces or (hook.get_namespace() or "default",)
        return cls(hook, namespaces)

    # -- reads that know about missing CRDs -------------------------------------------------

    def _checked(self, call: Callable[[], T], *, volcano: bool, job_kind: JobKind = DEFAULT_JOB_KIND) -> T:
        try:
            return call()
        except GangApiError as error:
            if error.status == 404 and not isinstance(error, GangCRDNotInstalled):
                # raises GangCRDNotInstalled with the fix
                self.hook.check_api(require_volcano=volcano, job_kind=job_kind)
            raise

    def _jobs(self, namespace: str, selector: str | None) -> list[tuple[JobKind, JsonDict]]:
        """Every gang job of the namespace, of each kind the cluster serves."""
        found: list[tuple[JobKind, JsonDict]] = []
        for job_kind in JOB_KINDS.values():
            if job_kind.kind in self.unserved:
                continue
            try:
                jobs = self._checked(
                    partial(self.hook.list_jobs, job_kind, namespace, selector),
                    volcano=False,
                    job_kind=job_kind,
                )
            except GangCRDNotInstalled as error:
                self.unserved[job_kind.kind] = error
                continue
            for job in jobs:
                job.setdefault("kind", job_kind.kind)  # what `jobs.history` reads a job's kind from
                found.append((job_kind, job))
        if len(self.unserved) == len(JOB_KINDS):  # no kind of gang job is served
            raise self.unserved[DEFAULT_JOB_KIND.kind]
        return found

    def _pods(self, namespace: str, kinds: set[JobKind]) -> dict[tuple[str, str], list[JsonDict]]:
        """The pods of the namespace's jobs of ``kinds``, by (kind, job name): one list per kind."""
        pods: dict[tuple[str, str], list[JsonDict]] = {}
        for job_kind in sorted(kinds, key=lambda kind: kind.kind):
            listed = self.hook.list_pods(namespace, job_kind.pod_job_label)
            for job_name, owned in pods_by_label(listed, job_kind.pod_job_label).items():
                pods[(job_kind.kind, job_name)] = owned
        return pods

    def gang_mode(self, job_kind: JobKind, job: JsonDict) -> str | None:
        """The job's gang mode as the object `JobKind.runtime_ref` names says it (a TrainJob's
        runtime; read once per runtime and request); None for a kind whose own objects tell, or
        when that object cannot be read (then they tell)."""
        ref = job_kind.runtime_ref(job)
        if ref is None:
            return None
        namespace = str(job["metadata"].get("namespace") or "") if ref[0] != "ClusterTrainingRuntime" else ""
        key = (*ref, namespace)
        if key not in self._runtime_modes:
            try:
                runtime = self.hook.get_training_runtime(ref[1], ref[0], namespace)
            except GangApiError:  # no right to read runtimes: the objects tell
                runtime = None
            self._runtime_modes[key] = job_kind.runtime_gang_mode(runtime)
        return self._runtime_modes[key]

    def _podgroups(self, namespace: str) -> list[JsonDict]:
        return self._checked(lambda: self.hook.list_podgroups(namespace), volcano=True)

    # -- what the pages need ---------------------------------------------------------------

    def snapshot(
        self, *, include_unmanaged: bool = False, namespaces: Sequence[str] | None = None
    ) -> Snapshot:
        """Every gang job the provider submitted (or every PyTorchJob and TrainJob) of the
        namespaces, with PodGroups and pods.

        :param include_unmanaged: also jobs the provider did not submit.
        :param namespaces: a subset of the reader's namespaces (default: all of them).
        """
        snapshot = Snapshot()
        volcano_missing: GangCRDNotInstalled | None = None
        for namespace in namespaces or self.namespaces:
            jobs = self._jobs(namespace, None if include_unmanaged else MANAGED_SELECTOR)
            podgroups: list[JsonDict] = []
            if volcano_missing is None:
                try:
                    podgroups = self._podgroups(namespace)
                except GangCRDNotInstalled as error:
                    volcano_missing = error
            pods = self._pods(namespace, {job_kind for job_kind, _ in jobs})
            snapshot.podgroups.extend(podgroups)
            records = [
                JobRecord(
                    job,
                    podgroup_for(job, podgroups),
                    pods.get((job_kind.kind, str(job["metadata"]["name"])), []),
                    job_kind=job_kind,
                    gang_scheduling=self.gang_mode(job_kind, job),
                )
                for job_kind, job in jobs
            ]
            # One events list per namespace, only when a gang waits to be enqueued: that is
            # the one state Volcano explains with events alone.
            if any(_waiting_to_enqueue(record.podgroup) for record in records):
                about: dict[str, list[JsonDict]] = {}
                for event in self.hook.list_namespace_events(namespace):
                    involved = event.get("involvedObject") or {}
                    if involved.get("kind") == "PodGroup":
                        about.setdefault(str(involved.get("name")), []).append(event)
                for record in records:
                    if record.podgroup is not None:
                        record.events = about.get(str(record.podgroup["metadata"]["name"]), [])
            snapshot.jobs.extend(records)
        if volcano_missing is not None:
            snapshot.warnings.append(f"{volcano_missing} (PodGroup phases and queues are not shown)")
        return snapshot

    def job(self, namespace: str, name: str, job_kind: JobKind | None = None) -> JobRecord | None:
        """One gang job with its PodGroup and pods, or None if it does not exist.

        :param job_kind: its kind; None: the first kind of `JOB_KINDS` with a job of that name (a
            kind the cluster does not serve answers 404, so None).
        """
        job: JsonDict | None = None
        for kind in (job_kind,) if job_kind is not None else tuple(JOB_KINDS.values()):
            job = self.hook.get_job(kind, name, namespace)
            if job is not None:
                job_kind = kind
                job.setdefault("kind", kind.kind)
                break
        if job is None or job_kind is None:
            return None
        podgroup: JsonDict | None = None
        try:
            named = job_kind.podgroup_name(name, job["metadata"].get("uid"))
            podgroup = self._checked(lambda: self.hook.get_podgroup(named, namespace), volcano=True)
            if podgroup is None:  # a training-operator PodGroup owned by the job, under another name
                podgroup = podgroup_for(job, self._podgroups(namespace))
        except GangCRDNotInstalled:
            podgroup = None
        pods = self.hook.list_job_pods(name, namespace, job_kind)
        return JobRecord(
            job, podgroup, pods, job_kind=job_kind, gang_scheduling=self.gang_mode(job_kind, job)
        )

    def events(self, record: JobRecord) -> list[JsonDict]:
        """Events about the job, its PodGroup (same name) and its first `MAX_EVENT_PODS` pods."""
        names = [record.name]
        if record.podgroup is not None and record.podgroup["metadata"]["name"] != record.name:
            names.append(str(record.podgroup["metadata"]["name"]))
        names += [str(pod["metadata"]["name"]) for pod in record.pods[:MAX_EVENT_PODS]]
        events: list[JsonDict] = []
        for involved in names:
            events.extend(self.hook.list_events(record.namespace, involved))
        return events

    def queues(self) -> tuple[list[JsonDict], list[JsonDict]]:
        """Every Volcano queue, and the PodGroups of the namespaces shown (to count them)."""
        queues = self._checked(self.hook.list_queues, volcano=True)
        podgroups: list[JsonDict] = []
        for namespace in self.namespaces:
            podgroups.extend(self._podgroups(namespace))
        return queues, podgroups
