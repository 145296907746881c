"""Which events wake which PyTorchJob, and how a job's dependents are found: the operator's watches.

Which events wake which job follows v1.9's ``SetupWithManager`` and its predicates
(``pkg/controller.v1/pytorch/pytorchjob_controller.go``, ``pkg/common/util/reconciler.go``):

- every PyTorchJob event wakes that job (including the status writes of this controller);
- a pod, service or PodGroup wakes only the job named by its *controller* ownerReference
  (``EnqueueRequestForOwner(..., OnlyControllerOwner())``) — a create or delete only when it
  carries the ``training.kubeflow.org/replica-type`` label (so never a PodGroup), an update
  only when that reference resolves to the cached job of the same uid;
- PriorityClasses are only read, never watched for;
- a re-list wakes what it found changed (`informer.Change`); nothing else comes back on its
  own: controller-runtime's default resync is ten hours (``RESYNC_SECONDS`` of the controller).

So a PodGroup someone else made without a controller reference to the job never wakes it:
with the gang flag, such a job sees its group ``Pending`` once and never learns it was
admitted — the hang of a provider-made PodGroup owned with ``controller: false``.

A job's pods and services are the ones whose controller reference carries its uid, read from the
cache's `CONTROLLER_INDEX` (`controller_uids`).
"""

from __future__ import annotations

from gang_sim.controllers.client import JsonDict
from gang_sim.controllers.informer import Cache, Change, deep_get
from gang_sim.controllers.kinds import PYTORCHJOBS, Kind, object_key
from gang_sim.controllers.training_operator.pytorchjob_resources import JOB_NAME_LABEL, REPLICA_TYPE_LABEL

CONTROLLER_INDEX = "training-operator/controller"
JobKey = tuple[str, str]


def job_uid(job: JsonDict) -> str:
    return str(deep_get(job, "metadata", "uid", default=""))


def controller_ref(obj: JsonDict | None) -> JsonDict | None:
    """The controller ownerReference of ``obj`` if it points at a PyTorchJob."""
    for ref in deep_get(obj, "metadata", "ownerReferences", default=None) or []:
        if ref.get("controller") and ref.get("kind") == PYTORCHJOBS.kind:
            group = str(ref.get("apiVersion") or "").partition("/")[0]
            return dict(ref) if group == PYTORCHJOBS.group else None
    return None


def controller_uids(obj: JsonDict) -> list[str]:
    """`CONTROLLER_INDEX`: the uid of the PyTorchJob controlling ``obj``, if any."""
    ref = controller_ref(obj)
    return [str(ref.get("uid"))] if ref is not None else []


def job_of_child(child: JsonDict) -> JobKey:
    """The job a pod or service built by `plan_job` belongs to (before it has a uid)."""
    namespace, _ = object_key(child)
    return namespace, str(deep_get(child, "metadata", "labels", JOB_NAME_LABEL, default=""))


def jobs_woken(cache: Cache, kind: Kind, change: Change) -> set[JobKey]:
    """The jobs one event of ``kind`` wakes (see the module docstring)."""
    if kind == PYTORCHJOBS:
        return set() if change.type == "DELETED" else {object_key(change.obj)}
    namespace, _ = object_key(change.obj)
    if change.type != "MODIFIED":
        # OnDependentCreate/DeleteFunc: only objects with a replica type get through.
        labels = deep_get(change.obj, "metadata", "labels", default=None) or {}
        ref = controller_ref(change.obj)
        if REPLICA_TYPE_LABEL not in labels or ref is None:
            return set()
        return {(namespace, str(ref.get("name")))}
    # OnDependentUpdateFunc: the controller, resolved to the cached job of that uid, and the
    # previous controller if the reference changed.
    woken = set()
    new, old = controller_ref(change.obj), controller_ref(change.old)
    for ref in (new, old if old != new else None):
        if ref is not None and _resolves(cache, namespace, ref):
            woken.add((namespace, str(ref.get("name"))))
    return woken


def _resolves(cache: Cache, namespace: str, ref: JsonDict) -> bool:
    job = cache.get(PYTORCHJOBS, namespace, str(ref.get("name")))
    return job is not None and job_uid(job) == str(ref.get("uid"))
