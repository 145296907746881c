"""The resource kinds the controllers read and write, as data (group, version, plural, scope).

Controllers address the API by these rows only; nothing here knows how any server stores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path: ``/api/v1/namespaces/ns/pods/x/binding`` and the like."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource is not None:
                parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Kind("", "v1", "namespaces", False, "Namespace")
NODES = Kind("", "v1", "nodes", False, "Node")
PODS = Kind("", "v1", "pods", True, "Pod")
SERVICES = Kind("", "v1", "services", True, "Service")
CONFIGMAPS = Kind("", "v1", "configmaps", True, "ConfigMap")
EVENTS = Kind("", "v1", "events", True, "Event")
PRIORITY_CLASSES = Kind("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass")
PYTORCHJOBS = Kind("kubeflow.org", "v1", "pytorchjobs", True, "PyTorchJob")
PODGROUPS = Kind("scheduling.volcano.sh", "v1beta1", "podgroups", True, "PodGroup")
QUEUES = Kind("scheduling.volcano.sh", "v1beta1", "queues", False, "Queue")
VCJOBS = Kind("batch.volcano.sh", "v1alpha1", "jobs", True, "Job")
LEASES = Kind("coordination.k8s.io", "v1", "leases", True, "Lease")
# Where each node's heartbeat Lease lives: kubelets renew them, the node lifecycle controller reads them.
NODE_LEASE_NAMESPACE = "kube-node-lease"
JOBS = Kind("batch", "v1", "jobs", True, "Job")
PODDISRUPTIONBUDGETS = Kind("policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget")
JOBSETS = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet")
TRAINJOBS = Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs", True, "TrainJob")
TRAINING_RUNTIMES = Kind("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", True, "TrainingRuntime")
CLUSTER_TRAINING_RUNTIMES = Kind(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", False, "ClusterTrainingRuntime"
)


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object; cluster-scoped objects have namespace ``""``."""
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
