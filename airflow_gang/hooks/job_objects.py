"""`JobObjectsHook`: the synchronous calls on a gang job of any kind, and on Trainer v2 runtimes.

The base of `GangJobHook`: its ``create_job``/``get_job``/``list_jobs``/``delete_job`` take a
`airflow_gang.job_kinds.JobKind`, so the lifecycle submits, reads and deletes PyTorchJobs and
TrainJobs through the same calls (`GangJobHook`'s ``*_pytorchjob`` methods remain for
PyTorchJobs). Same contract as every hook method: wire dicts, retries, 404 as None/False,
`GangApiError` for the rest.
"""

from __future__ import annotations

from typing import Any

from airflow_gang.hooks.calls import CallingHook
from airflow_gang.hooks.errors import ApiRequest
from airflow_gang.hooks.kinds import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES, Kind
from airflow_gang.kinds import JobKind

JsonDict = dict[str, Any]


class JobObjectsHook(CallingHook):
    """Gang jobs of any kind, and Trainer v2 runtimes (see the module docstring)."""

    # -- any kind of gang job (PyTorchJob, TrainJob) ------------------------------------------

    def create_job(self, job_kind: JobKind, body: JsonDict, namespace: str) -> JsonDict:
        """Create a gang job of ``job_kind``; as `create_pytorchjob` (retries, 409 for the caller)."""
        return self._create(Kind.of(job_kind), body, namespace)

    def get_job(self, job_kind: JobKind, name: str, namespace: str) -> JsonDict | None:
        """The gang job of ``job_kind``, or None if it does not exist."""
        return self._get(Kind.of(job_kind), name, namespace)

    def list_jobs(
        self, job_kind: JobKind, namespace: str, label_selector: str | None = None
    ) -> list[JsonDict]:
        """Gang jobs of ``job_kind`` in a namespace, optionally matching ``label_selector``."""
        return self._list(Kind.of(job_kind), namespace, label_selector)

    def delete_job(
        self,
        job_kind: JobKind,
        name: str,
        namespace: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete a gang job of ``job_kind``; False if it was already gone (as `delete_pytorchjob`)."""
        return self._delete(Kind.of(job_kind), name, namespace, propagation, uid)

    def list_job_children(self, job_kind: JobKind, name: str, namespace: str) -> list[str]:
        """What is left of the job's `JobKind.children` (a TrainJob's JobSet and batch Jobs), as
        ``"JobSet ns/name"``; empty for a kind without children or when all are gone."""
        left: list[str] = []
        for child in job_kind.children:
            kind = Kind.child(child)
            # Listed also when named, so RBAC needs `list` alone.
            labels = job_kind.pod_selector(name) if child.labelled else None
            fields = None if child.labelled else f"metadata.name={name}"
            found = [str(item["metadata"]["name"]) for item in self._list(kind, namespace, labels, fields)]
            left.extend(f"{child.kind} {namespace}/{found_name}" for found_name in found)
        return left

    def set_job_suspended(self, job_kind: JobKind, name: str, namespace: str, suspended: bool) -> JsonDict:
        """Suspend or resume a gang job: a PyTorchJob's ``spec.runPolicy.suspend``, a TrainJob's
        ``spec.suspend`` (the Trainer then suspends its JobSet, whose Jobs delete their pods)."""
        return self._merge_patch(Kind.of(job_kind), name, namespace, job_kind.suspend_patch(suspended))

    def get_training_runtime(self, name: str, kind: str, namespace: str) -> JsonDict | None:
        """A Trainer v2 runtime, or None if it does not exist.

        :param name: its name.
        :param kind: ``ClusterTrainingRuntime`` (cluster-scoped) or ``TrainingRuntime``.
        :param namespace: where a ``TrainingRuntime`` lives (the TrainJob's namespace).
        """
        if kind == TRAINING_RUNTIMES.kind:
            return self._get(TRAINING_RUNTIMES, name, namespace)
        runtimes = CLUSTER_TRAINING_RUNTIMES
        return self._call_or_none(
            ApiRequest("get", runtimes.resource, name, None),
            lambda: self.custom_object_client.get_cluster_custom_object(
                runtimes.group, runtimes.version, runtimes.plural, name, _request_timeout=self._timeout()
            ),
        )
