"""Everything the page reads from Kubernetes, through `GangJobHook`, and only reads.

Per namespace a jobs page costs three list calls (PyTorchJobs, PodGroups, the
training-operator's pods), whatever the number of jobs; one job adds its events; the queue
overview lists the cluster-scoped queues. A list that answers 404 is checked against
discovery, so a cluster without the training-operator or Volcano gives `GangCRDNotInstalled`
(with the fix) instead of a bare 404. Without Volcano the jobs are still listed, with a
warning, since a cluster may run PyTorchJobs with ``gang_scheduling="disabled"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_gang.exceptions import GangApiError, GangCRDNotInstalled
from airflow_gang.gang_state import JOB_NAME_LABEL
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import RetryPolicy
from airflow_gang.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_gang.plugins.settings import UiSettings
from airflow_gang.plugins.summaries import podgroup_for, pods_by_job

JsonDict = dict[str, Any]
T = TypeVar("T")

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
# A page refreshes every few seconds and someone is looking at it: fail fast and say why,
# rather than ride out an outage the way a waiting task does.
UI_RETRY_POLICY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5)
MAX_EVENT_PODS = 16


@dataclass
class JobRecord:
    """A PyTorchJob with its PodGroup (if any) and its replica pods."""

    job: JsonDict
    podgroup: JsonDict | None
    pods: list[JsonDict]
    events: list[JsonDict] = field(default_factory=list)

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

    def _checked(self, call: Callable[[], T], *, volcano: bool) -> T:
        try:
            return call()
        except GangApiError as error:
            if error.status == 404 and not isinstance(error, GangCRDNotInstalled):
                self.hook.check_api(require_volcano=volcano)  # raises GangCRDNotInstalled with the fix
            raise

    def _jobs(self, namespace: str, selector: str | None) -> list[JsonDict]:
        return self._checked(lambda: self.hook.list_pytorchjobs(namespace, selector), volcano=False)

    def _podgroups(self, namespace: str) -> list[JsonDict]:
        return self._checked(lambda: self.hook.list_podgroups(namespace), volcano=True)

    # -- what the pages need ---------------------------------------------------------------

    def snapshot(
        self, *, include_unmanaged: bool = False, namespaces: Sequence[str] | None = None
    ) -> Snapshot:
        """Every gang job (or every PyTorchJob) of the namespaces, with PodGroups and pods.

        :param include_unmanaged: also PyTorchJobs the provider did not submit.
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
            pods = pods_by_job(self.hook.list_pods(namespace, JOB_NAME_LABEL)) if jobs else {}
            snapshot.podgroups.extend(podgroups)
            records = [
                JobRecord(job, podgroup_for(job, podgroups), pods.get(str(job["metadata"]["name"]), []))
                for job in jobs
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

    def job(self, namespace: str, name: str) -> JobRecord | None:
        """One PyTorchJob with its PodGroup and pods, or None if it does not exist."""
        job = self._checked(lambda: self.hook.get_pytorchjob(name, namespace), volcano=False)
        if job is None:
            return None
        podgroup: JsonDict | None = None
        try:
            podgroup = self._checked(lambda: self.hook.get_podgroup(name, namespace), volcano=True)
            if podgroup is None:  # a training-operator PodGroup owned by the job, under another name
                podgroup = podgroup_for(job, self._podgroups(namespace))
        except GangCRDNotInstalled:
            podgroup = None
        return JobRecord(job, podgroup, self.hook.list_job_pods(name, namespace))

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
