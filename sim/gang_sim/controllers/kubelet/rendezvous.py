"""Rendezvous: a replica makes progress only once every replica of its job has started.

This is what ``torch.distributed`` does (``init_process_group`` blocks until WORLD_SIZE ranks
joined), and what turns a partially placed job into a deadlock. Kubelets on different nodes
share nothing but the API, so each decides from its cache's view of the job's pods:

- a PyTorchJob's replicas are the pods labelled ``training.kubeflow.org/job-name`` in the same
  namespace, the expected count is the sum of ``replicas`` in its ``pytorchReplicaSpecs``;
- a TrainJob's nodes (Trainer v2) are the pods of one replicated job of its JobSet (labels
  ``jobset.sigs.k8s.io/jobset-name`` and ``replicatedjob-name``), the expected count their
  ``PET_NNODES``, as torchrun's rendezvous waits for that many nodes; such a pod without
  ``PET_NNODES`` (not a torch node) does not wait;
- a Volcano Job's pods are those labelled ``volcano.sh/job-name``, the expected count the
  ``WORLD_SIZE`` its ``pytorch`` plugin gives every pod (docs/volcano-job.md), as
  ``init_process_group`` waits for that many ranks; such a pod without ``WORLD_SIZE`` (no
  ``pytorch`` plugin) does not wait.

Any other pod is a job of one. Peers are grouped by `group_of` (``pytorchjob/<name>``,
``jobset/<name>/<replicated job>``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

JsonDict = dict[str, Any]
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
TORCH_NODES_ENV = "PET_NNODES"
VCJOB_NAME_LABEL = "volcano.sh/job-name"
WORLD_SIZE_ENV = "WORLD_SIZE"
# Succeeded counts as arrived: a fast replica may finish before a slow node's kubelet even looks.
ARRIVED_PHASES = frozenset({"Running", "Succeeded"})


def job_name(pod: JsonDict) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    name = labels.get(JOB_NAME_LABEL)
    return str(name) if name else None


def pytorchjob_group(name: str) -> str:
    return f"pytorchjob/{name}"


def group_of(pod: JsonDict) -> str | None:
    """The rendezvous group ``pod`` belongs to, or None for a job of one."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(JOB_NAME_LABEL):
        return pytorchjob_group(str(labels[JOB_NAME_LABEL]))
    if labels.get(JOBSET_NAME_LABEL):
        return f"jobset/{labels[JOBSET_NAME_LABEL]}/{labels.get(REPLICATED_JOB_LABEL, '')}"
    if labels.get(VCJOB_NAME_LABEL):
        return f"vcjob/{labels[VCJOB_NAME_LABEL]}"
    return None


def torch_nodes(pod: JsonDict, variable: str = TORCH_NODES_ENV) -> int | None:
    """``PET_NNODES`` of the pod's containers (the lower bound of an elastic ``min:max``), or
    another such count (``WORLD_SIZE``)."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for item in container.get("env") or []:
            if item.get("name") == variable:
                try:
                    return int(str(item.get("value") or "").partition(":")[0])
                except ValueError:
                    return None
    return None


def _arrived(peers: Iterable[JsonDict]) -> tuple[int, set[Any]]:
    """Peers that started (Running or Succeeded), and the names of every peer not being deleted."""
    arrived, names = 0, set()
    for other in peers:
        meta = other.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        names.add(meta.get("name"))
        if (other.get("status") or {}).get("phase") in ARRIVED_PHASES:
            arrived += 1
    return arrived, names


def owned_by_job(pod: JsonDict) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == "PyTorchJob" for ref in refs)


def expected_replicas(job: JsonDict) -> int:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return sum(int((spec or {}).get("replicas", 1)) for spec in specs.values())


def progress(pod: JsonDict, job: JsonDict | None, job_pods: Iterable[JsonDict]) -> tuple[int, int] | None:
    """``(arrived, expected)`` for ``pod``'s job, or None while the count cannot be known.

    :param job: the owning PyTorchJob from the cache, if any.
    :param job_pods: the pods of the same namespace in the same group (`group_of`).
    """
    group = group_of(pod)
    if group is None:
        return (1, 1)
    if group.startswith("jobset/"):
        nodes = torch_nodes(pod)
        return (1, 1) if nodes is None else (_arrived(job_pods)[0], nodes)
    if group.startswith("vcjob/"):
        world = torch_nodes(pod, WORLD_SIZE_ENV)
        return (1, 1) if world is None else (_arrived(job_pods)[0], world)
    if job is not None:
        expected = expected_replicas(job)
    elif owned_by_job(pod):
        return None  # the job is not in our cache yet (or is being deleted): keep waiting
    else:
        expected = 0  # hand-made pods sharing a label: every such pod is a replica
    arrived, names = _arrived(job_pods)
    return arrived, max(expected, len(names)) if job is None else expected


def ready(pod: JsonDict, job: JsonDict | None, job_pods: Iterable[JsonDict]) -> bool:
    counts = progress(pod, job, job_pods)
    return counts is not None and counts[0] >= counts[1]
