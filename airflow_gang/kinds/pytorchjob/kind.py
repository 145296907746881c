"""Kubeflow's PyTorchJob (``kubeflow.org/v1``), as the training-operator runs it: `PYTORCHJOB`.

A PyTorchJob lists its replicas (``spec.pytorchReplicaSpecs``), its pods are named
``<job>-master-0``/``<job>-worker-N`` and labelled ``training.kubeflow.org/*``, and its conditions
``Created``/``Running``/``Restarting``/``Succeeded``/``Failed``/``Suspended`` are appended in
order. Its PodGroup is named after the job: the provider's own in ``provider`` mode, the
training-operator's when it runs with ``--gang-scheduler-name=volcano``
(the README's gang modes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_gang.kinds.base import GROUP_NAME_ANNOTATION, VOLCANO_SCHEDULER, ApiFacts, JobKind

JsonDict = dict[str, Any]
GROUP, PLURAL = "kubeflow.org", "pytorchjobs"


@dataclass(frozen=True)
class PyTorchJobKind(JobKind):
    """The training-operator's conventions are `JobKind`'s defaults; what only a PyTorchJob's
    template says is how it is gang-scheduled."""

    def observed_gang_mode(
        self, job: JsonDict, podgroup: JsonDict | None, pods: Iterable[JsonDict] = ()
    ) -> str:
        """A PodGroup, or pods bound for Volcano (the PodGroup may still be on its way), mean a
        gang; otherwise the replicas are placed one by one (``disabled``). ``provider`` and
        ``training-operator`` are told apart by the annotation the provider's pods carry naming
        their PodGroup, and by the job's ``schedulingPolicy``."""
        templates = [spec.get("template") or {} for spec in self.replica_specs(job).values()]
        annotations = [(t.get("metadata") or {}).get("annotations") or {} for t in templates]
        if any(GROUP_NAME_ANNOTATION in named for named in annotations):
            return "provider"
        policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")
        volcano_pods = any((t.get("spec") or {}).get("schedulerName") == VOLCANO_SCHEDULER for t in templates)
        if podgroup is not None or volcano_pods:
            return "training-operator" if policy else "provider"
        return "disabled"


PYTORCHJOB = PyTorchJobKind(
    kind="PyTorchJob",
    group=GROUP,
    version="v1",
    plural=PLURAL,
    pod_job_label="training.kubeflow.org/job-name",
    replica_type_label="training.kubeflow.org/replica-type",
    replica_index_label="training.kubeflow.org/replica-index",
    container="pytorch",
    replica_specs_field="pytorchReplicaSpecs",
    leader="Master",
    leader_title="master replica",
    api=ApiFacts((PLURAL,), "PyTorchJob CRD", "install the Kubeflow training-operator"),
    permissions=(
        (GROUP, PLURAL, "create"),
        (GROUP, PLURAL, "get"),
        (GROUP, PLURAL, "list"),
        (GROUP, PLURAL, "watch"),
        (GROUP, PLURAL, "delete"),
        # Only suspend/resume (`GangJobHook.set_job_suspended`) patches jobs.
        (GROUP, PLURAL, "patch"),
        # Setting blockOwnerDeletion=true on the PodGroup's ownerReference to the job needs
        # `update` on the owner's finalizers where the OwnerReferencesPermissionEnforcement
        # admission plugin runs (OpenShift enables it by default).
        (GROUP, f"{PLURAL}/finalizers", "update"),
    ),
    suspend_field="spec.runPolicy.suspend",
    task_decorator="pytorchjob",
    decorator_class="airflow_gang.decorators.pytorch_job.pytorchjob_task",
)
