"""What the Volcano job controller creates for a Job: its PodGroup and its pods, as pure builders.

As volcano-sh/volcano v1.16.0-alpha.1 (commit a4b775ad) builds them:

- the PodGroup (``job_controller_actions.go`` lines 796-867 ``createOrUpdatePodGroup``):
  named ``<job>-<job uid>`` (64-66), the job's labels and annotations, a controller
  ownerReference to the job, ``minMember`` = the job's ``minAvailable``, ``minTaskMember``
  per task (869-877), ``queue``, ``priorityClassName`` and ``minResources`` (932-968
  ``calcPGMinResources``, with ``TasksPriority`` of ``job_controller_util.go`` 307-404). An
  existing group gets ``priorityClassName``, ``minMember``, ``minResources`` and
  ``minTaskMember`` written back when they differ (879-918);
- the pods (``job_controller_util.go`` lines 46-180 ``createJobPod``): ``<job>-<task>-<index>``
  (``helpers/helpers.go`` 35, 102-105), the template's labels and annotations plus the
  annotations ``volcano.sh/task-index``, ``volcano.sh/task-spec``, ``scheduling.k8s.io/group-name``
  (the PodGroup's name), ``volcano.sh/job-name``, ``volcano.sh/queue-name``,
  ``volcano.sh/job-version``, ``volcano.sh/template-uid`` (``<job>-<task>``) and
  ``volcano.sh/job-retry-count``, the labels ``volcano.sh/task-index``, ``volcano.sh/job-name``,
  ``volcano.sh/task-spec``, ``volcano.sh/job-namespace`` and ``volcano.sh/queue-name``, the
  job's ``schedulerName`` and ``priorityClassName`` when the template has none, and a
  controller ownerReference to the job; then the plugins (`plugins.on_pod_create`).

``minResources`` sums each pod's container requests (the larger of that and each init
container's). Upstream sums ``quota.PodUsageFunc``, which also carries ``pods``, ``count/pods``,
``requests.*`` and ``limits.*`` entries; those are left out, as the simulated scheduler would
take them for resources no node has. Volumes (PVCs), job forwarding, partitions and the
preemptable/cooldown/JDB annotations are not modelled.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from gang_sim.controllers import capacity
from gang_sim.controllers.kinds import VCJOBS
from gang_sim.controllers.ownership import owner_reference
from gang_sim.quantity import format_quantity

JsonDict = dict[str, Any]

# batch/v1alpha1/labels.go lines 21-45 and scheduling/v1beta1/labels.go line 32.
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
JOB_VERSION_KEY = "volcano.sh/job-version"
JOB_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
POD_TEMPLATE_KEY = "volcano.sh/template-uid"
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
DEFAULT_TASK_SPEC = "default"
# helpers/helpers.go line 40: the pods a kill is about to delete carry it; their events are ignored.
OUT_OF_SYNC_KEY = "volcano.sh/controller-out-of-sync"
_BINARY = ("memory", "ephemeral-storage")


def tasks(job: JsonDict) -> list[JsonDict]:
    return [t for t in (job.get("spec") or {}).get("tasks") or [] if isinstance(t, dict)]


def name_of(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def podgroup_name(job: JsonDict) -> str:
    """``generateRelatedPodGroupName`` (job_controller_actions.go lines 64-66)."""
    metadata = job.get("metadata") or {}
    return f"{metadata.get('name')}-{metadata.get('uid')}"


def pod_name(job_name: str, task_name: str, index: int) -> str:
    return f"{job_name}-{task_name}-{index}"


def min_task_member(task: JsonDict) -> int:
    """``getMinTaskMember`` (job_controller_actions.go lines 869-877), partitions left out."""
    low = task.get("minAvailable")
    return low if isinstance(low, int) else int(task.get("replicas") or 0)


def _pod_usage(template: JsonDict) -> dict[str, Decimal]:
    """One pod's requests: its containers' sum, raised to any init container's own."""
    spec = template.get("spec") or {}
    containers = spec.get("containers") or []
    total = capacity.total(
        capacity.parse_resources((c.get("resources") or {}).get("requests")) for c in containers
    )
    for init in spec.get("initContainers") or []:
        for name, amount in capacity.parse_resources((init.get("resources") or {}).get("requests")).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def _times(usage: dict[str, Decimal], count: int) -> dict[str, Decimal]:
    return {name: amount * count for name, amount in usage.items()}


def min_resources(job: JsonDict, priorities: dict[str, int]) -> dict[str, str]:
    """``calcPGMinResources`` (lines 932-968): tasks by PriorityClass value, highest first
    (a stable sort keeps the spec order of ties); below the tasks' total ``minAvailable``, the
    first ``minAvailable`` pods (``CalcFirstCountResources``); else each task's ``minAvailable``
    pods, topped up from the remaining replicas (``CalcPGMinResources``)."""
    job_min = int((job.get("spec") or {}).get("minAvailable") or 0)

    def priority(task: JsonDict) -> int:
        pod_spec = (task.get("template") or {}).get("spec") or {}
        return priorities.get(str(pod_spec.get("priorityClassName") or ""), 0)

    ordered = sorted(tasks(job), key=lambda task: -priority(task))
    total_min = sum(min_task_member(t) for t in ordered)
    chosen: dict[str, Decimal] = {}

    def take(task: JsonDict, count: int) -> None:
        nonlocal chosen
        chosen = capacity.add(chosen, _times(_pod_usage(task.get("template") or {}), max(count, 0)))

    if job_min < total_min:
        left = job_min
        for task in ordered:
            replicas = int(task.get("replicas") or 0)
            if left <= replicas:
                take(task, left)
                break
            take(task, replicas)
            left -= replicas
    else:
        pods = 0
        for task in ordered:
            low = task.get("minAvailable")
            if not isinstance(low, int):
                continue
            valid = min(low, job_min - pods)
            take(task, valid)
            pods += valid
            if pods >= job_min:
                break
        left = job_min - pods
        for task in ordered if left > 0 else []:
            replicas = int(task.get("replicas") or 0)
            low = task.get("minAvailable")
            if isinstance(low, int) and low == replicas:
                continue
            spare = replicas - low if isinstance(low, int) else replicas
            take(task, min(spare, left))
            left -= min(spare, left)
            if left <= 0:
                break
    return {
        name: format_quantity(amount, binary=name in _BINARY)
        for name, amount in sorted(chosen.items())
        if amount
    }


def podgroup_spec(job: JsonDict, priorities: dict[str, int]) -> JsonDict:
    spec = job.get("spec") or {}
    pg_spec: JsonDict = {
        "minMember": int(spec.get("minAvailable") or 0),
        "minTaskMember": {str(t.get("name")): min_task_member(t) for t in tasks(job)},
        "queue": spec.get("queue") or "default",
        "minResources": min_resources(job, priorities),
    }
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    return pg_spec


def build_podgroup(job: JsonDict, priorities: dict[str, int]) -> JsonDict:
    metadata = job.get("metadata") or {}
    pg_meta: JsonDict = {
        "name": podgroup_name(job),
        "namespace": metadata.get("namespace"),
        "ownerReferences": [owner_reference(job, VCJOBS)],
    }
    for key in ("labels", "annotations"):
        if metadata.get(key):
            pg_meta[key] = dict(metadata[key])
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": pg_meta,
        "spec": podgroup_spec(job, priorities),
    }


def updated_podgroup(podgroup: JsonDict, job: JsonDict, priorities: dict[str, int]) -> JsonDict | None:
    """``shouldUpdateExistingPodGroup`` (lines 879-918): the group to write back, or None."""
    desired = podgroup_spec(job, priorities)
    current = podgroup.get("spec") or {}
    spec = dict(current)
    if (current.get("priorityClassName") or "") != (desired.get("priorityClassName") or ""):
        spec["priorityClassName"] = desired.get("priorityClassName") or ""
    same_resources = _resources(current.get("minResources")) == _resources(desired["minResources"])
    if current.get("minMember") != desired["minMember"] or not same_resources:
        spec["minMember"], spec["minResources"] = desired["minMember"], desired["minResources"]
    spec["minTaskMember"] = {**(current.get("minTaskMember") or {}), **desired["minTaskMember"]}
    if spec == current:
        return None
    return {**copy.deepcopy(podgroup), "spec": spec}


def _resources(amounts: Any) -> dict[str, Decimal]:
    return {k: v for k, v in capacity.parse_resources(amounts).items() if v}


def build_pod(job: JsonDict, task: JsonDict, index: int) -> JsonDict:
    """``createJobPod`` (job_controller_util.go lines 46-180), before the plugins."""
    metadata = job.get("metadata") or {}
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    job_name = str(metadata.get("name") or "")
    template = copy.deepcopy(task.get("template") or {})
    task_name = str(task.get("name") or "") or DEFAULT_TASK_SPEC
    template_meta = template.get("metadata") or {}
    pod_spec: JsonDict = template.get("spec") or {}
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.get("schedulerName")
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    queue = str(spec.get("queue") or "")
    annotations = {
        **(template_meta.get("annotations") or {}),
        TASK_INDEX_KEY: str(index),
        TASK_SPEC_KEY: task_name,
        GROUP_NAME_KEY: podgroup_name(job),
        JOB_NAME_KEY: job_name,
        QUEUE_NAME_KEY: queue,
        JOB_VERSION_KEY: str(int(status.get("version") or 0)),
        POD_TEMPLATE_KEY: f"{job_name}-{task.get('name')}",
        JOB_RETRY_COUNT_KEY: str(int(status.get("retryCount") or 0)),
    }
    labels = {
        **(template_meta.get("labels") or {}),
        TASK_INDEX_KEY: str(index),
        JOB_NAME_KEY: job_name,
        TASK_SPEC_KEY: task_name,
        JOB_NAMESPACE_KEY: metadata.get("namespace"),
        QUEUE_NAME_KEY: queue,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job_name, str(task.get("name")), index),
            "namespace": metadata.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job, VCJOBS)],
        },
        "spec": pod_spec,
    }
