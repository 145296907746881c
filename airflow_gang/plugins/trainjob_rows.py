"""What the page tells about a Kubeflow Trainer v2 TrainJob that a PyTorchJob says itself (pure).

A PyTorchJob's template says whether it is gang-scheduled and its status counts its replicas;
a TrainJob says neither:

- its gang mode is its runtime's (``podGroupPolicy.volcano``: ``trainer``, none: ``disabled``),
  as `TrainJobOperator` decides it; the reader reads each runtime once per refresh
  (`runtime_mode`), and where it cannot, the objects tell (`inferred_mode`);
- its one replica type is ``Node``, counted from its pods (`node_rows`): its ``jobsStatus``
  counts Jobs, not pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from airflow_gang.job_kinds import JobKind
from airflow_gang.trainjob_spec import runtime_policy_mode

JsonDict = dict[str, Any]
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
VOLCANO_SCHEDULER = "volcano"
NODE = "Node"


def runtime_ref(job: JsonDict) -> tuple[str, str] | None:
    """``(kind, name)`` of the runtime the TrainJob names, or None if it names none."""
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    if not ref.get("name"):
        return None
    return str(ref.get("kind") or CLUSTER_RUNTIME), str(ref["name"])


def runtime_mode(runtime: JsonDict | None) -> str | None:
    """``trainer`` for a runtime with Volcano's podGroupPolicy, ``disabled`` for one without
    any (as `TrainJobOperator` decides); None when the runtime is unknown or gang-schedules
    otherwise (then `inferred_mode`)."""
    return None if runtime is None else runtime_policy_mode(runtime)


def inferred_mode(podgroup: JsonDict | None, pods: Sequence[JsonDict]) -> str:
    """The gang mode as the objects show it: a PodGroup, or pods bound for Volcano, mean
    Trainer's Volcano plugin gang-schedules the job; pods for the default scheduler mean no gang.
    Before there is either, the gang runtime is assumed (the PodGroup is on its way)."""
    if podgroup is not None:
        return "trainer"
    schedulers = {(pod.get("spec") or {}).get("schedulerName") for pod in pods}
    if pods and VOLCANO_SCHEDULER not in schedulers:
        return "disabled"
    return "trainer"


def pods_by_label(pods: Iterable[JsonDict], label: str) -> dict[str, list[JsonDict]]:
    """Pods grouped by the value of ``label`` (a TrainJob's pods by their JobSet's name)."""
    grouped: dict[str, list[JsonDict]] = {}
    for pod in pods:
        value = ((pod.get("metadata") or {}).get("labels") or {}).get(label)
        if value:
            grouped.setdefault(str(value), []).append(pod)
    return grouped


def node_rows(job_kind: JobKind, job: JsonDict, pods: Sequence[JsonDict], replicas: int) -> list[JsonDict]:
    """The ``Node`` replica row: desired nodes, and the pods active, succeeded and failed."""
    phases = [
        (pod.get("status") or {}).get("phase")
        for pod in pods
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    desired = job_kind.replica_counts(job).get(NODE, replicas)
    return [
        {
            "type": NODE,
            "desired": desired,
            "active": sum(1 for phase in phases if phase in ("Pending", "Running")),
            "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"),
        }
    ]
