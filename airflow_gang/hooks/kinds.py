"""The Kubernetes resources the hooks touch, and the RBAC they therefore need.

One row per kind keeps the group/version/plural spelled once; error messages name resources
the way RBAC and kubectl do (``pytorchjobs.kubeflow.org``), so a 403 reads like a Role rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds import JOB_KINDS, PYTORCHJOB, TRAINJOB, ChildResource, JobKind

# A watch or wait names what it follows by a job kind's `JobKind.watch_name`, or these.
WatchKind = str
DeletableKind = str


@dataclass(frozen=True)
class Kind:
    """One served resource: API group ("" for core), version, plural, scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def resource(self) -> str:
        """The RBAC/kubectl spelling: ``plural.group``, or just ``plural`` for core kinds."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def child(cls, resource: ChildResource) -> Kind:
        """Where a job's child resource (a TrainJob's JobSet or Job) is served."""
        return cls(resource.group, resource.version, resource.plural, resource.kind)

    @classmethod
    def of(cls, job_kind: JobKind) -> Kind:
        """Where a kind of gang job is served."""
        return cls(job_kind.group, job_kind.version, job_kind.plural, job_kind.kind)


PYTORCHJOBS = Kind.of(PYTORCHJOB)
TRAINJOBS = Kind.of(TRAINJOB)
CLUSTER_TRAINING_RUNTIMES = Kind(
    TRAINJOB.group, TRAINJOB.version, "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
TRAINING_RUNTIMES = Kind(TRAINJOB.group, TRAINJOB.version, "trainingruntimes", "TrainingRuntime")
PODGROUPS = Kind("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
QUEUES = Kind("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
PODS = Kind("", "v1", "pods", "Pod")
EVENTS = Kind("", "v1", "events", "Event")
# Not a kind but an RBAC resource of its own: reading logs needs `get` on `pods/log`.
POD_LOG_RESOURCE = "pods/log"

KINDS_BY_NAME: dict[str, Kind] = {
    **{job_kind.watch_name: Kind.of(job_kind) for job_kind in JOB_KINDS.values()},
    "podgroup": PODGROUPS,
    "pod": PODS,
}

# Every (api group, resource, verb) the hooks use, for deploy/rbac.yaml and its test.
# Discovery (GET /apis/<group>/<version>) is a non-resource URL every authenticated user may
# read through the default `system:discovery` ClusterRole, so it needs no rule here.
REQUIRED_PERMISSIONS: tuple[tuple[str, str, str], ...] = (
    # Each kind's own objects (`JobKind.permissions`).
    *(permission for job_kind in JOB_KINDS.values() for permission in job_kind.permissions),
    ("scheduling.volcano.sh", "podgroups", "create"),
    ("scheduling.volcano.sh", "podgroups", "get"),
    ("scheduling.volcano.sh", "podgroups", "list"),
    ("scheduling.volcano.sh", "podgroups", "watch"),
    ("scheduling.volcano.sh", "podgroups", "patch"),
    ("scheduling.volcano.sh", "podgroups", "delete"),
    # Queues are cluster-scoped: these rules need a ClusterRole. `list` only for the UI
    # plugin's queue overview (`GangJobHook.list_queues`).
    ("scheduling.volcano.sh", "queues", "get"),
    ("scheduling.volcano.sh", "queues", "list"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/log", "get"),
    ("", "events", "list"),
)


def delete_options(propagation: str, uid: str | None) -> dict[str, Any]:
    """The ``DeleteOptions`` body: propagation policy and, with ``uid``, a uid precondition."""
    options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
    if uid is not None:
        # The precondition turns "delete whatever now has this name" into "delete the object we
        # created": a same-named object from another try is answered 409, never deleted.
        options["preconditions"] = {"uid": uid}
    return options


def owner_reference_patch(job: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that makes ``job`` the PodGroup's controller and deletion-blocking owner.

    ``controller: true`` is what makes the group the training-operator's own when it runs with
    ``--gang-scheduler-name=volcano``: its PodGroup watch wakes a job only through the group's
    controller reference (``OnlyControllerOwner``), so with ``controller: false`` Volcano's
    admission of the group never reaches the job and its pods are never created. The operator
    then treats the group as the one it would have made (same name, same spec from
    ``schedulingPolicy``): it syncs it without changing it and deletes it when the job ends.
    Without the flag nothing reads the reference but the garbage collector.
    """
    metadata = job.get("metadata") or {}
    if not metadata.get("uid") or not metadata.get("name"):
        raise ValueError("the job must be the stored object (with metadata.name and metadata.uid)")
    reference = {
        "apiVersion": job.get("apiVersion", PYTORCHJOBS.group_version),
        "kind": job.get("kind", PYTORCHJOBS.kind),
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {"metadata": {"ownerReferences": [reference]}}
