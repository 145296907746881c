"""Rendezvous: a replica makes progress only once every replica of its job has started.

This is what ``torch.distributed`` does (``init_process_group`` blocks until WORLD_SIZE ranks
joined), and what turns a partially placed job into a deadlock. Kubelets on different nodes
share nothing but the API, so each decides from its cache's view of the job's pods: the job's
replicas are the pods labelled ``training.kubeflow.org/job-name`` in the same namespace, the
expected count is the sum of ``replicas`` in the PyTorchJob's ``pytorchReplicaSpecs``. A pod
without that label is a job of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

JsonDict = dict[str, Any]
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
# Succeeded counts as arrived: a fast replica may finish before a slow node's kubelet even looks.
ARRIVED_PHASES = frozenset({"Running", "Succeeded"})


def job_name(pod: JsonDict) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    name = labels.get(JOB_NAME_LABEL)
    return str(name) if name else None


def owned_by_job(pod: JsonDict) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == "PyTorchJob" for ref in refs)


def expected_replicas(job: JsonDict) -> int:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return sum(int((spec or {}).get("replicas", 1)) for spec in specs.values())


def progress(pod: JsonDict, job: JsonDict | None, job_pods: Iterable[JsonDict]) -> tuple[int, int] | None:
    """``(arrived, expected)`` for ``pod``'s job, or None while the count cannot be known.

    :param job: the owning PyTorchJob from the cache, if any.
    :param job_pods: the pods of the same namespace carrying the same job-name label.
    """
    if job_name(pod) is None:
        return (1, 1)
    if job is not None:
        expected = expected_replicas(job)
    elif owned_by_job(pod):
        return None  # the job is not in our cache yet (or is being deleted): keep waiting
    else:
        expected = 0  # hand-made pods sharing a label: every such pod is a replica
    arrived = 0
    names = set()
    for other in job_pods:
        meta = other.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        names.add(meta.get("name"))
        if (other.get("status") or {}).get("phase") in ARRIVED_PHASES:
            arrived += 1
    return arrived, max(expected, len(names)) if job is None else expected


def ready(pod: JsonDict, job: JsonDict | None, job_pods: Iterable[JsonDict]) -> bool:
    counts = progress(pod, job, job_pods)
    return counts is not None and counts[0] >= counts[1]
