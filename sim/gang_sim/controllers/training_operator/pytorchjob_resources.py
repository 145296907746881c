"""What the training-operator creates for a PyTorchJob, as pure builders: pods, headless
services and the Volcano PodGroup, with the names, labels, annotations, ownerReferences and
environment of training-operator v1.9 (``docs/architecture.md#pytorchjob`` and
``#training-operator-gang``).

Workers do not get the ``init-pytorch`` init container (``alpine`` looping ``nslookup
<job>-master-0``): the simulated kubelet has no DNS, so that container could only be faked, and
what it guards — nobody trains before the master is reachable — is modelled by the kubelet's
rendezvous (a replica makes progress only once every replica of its job runs). Elastic
training variables (``PET_RDZV_*``) are not set either; ``PET_NNODES`` does use the elastic
``min:max`` form.
"""

from __future__ import annotations

import copy
from typing import Any

from gang_sim.controllers.training_operator.pytorchjob_status import (
    MASTER,
    REPLICA_TYPES,
    WORKER,
    format_selector,
)
from gang_sim.quantity import sum_resources

JsonDict = dict[str, Any]

API_VERSION = "kubeflow.org/v1"
OPERATOR_NAME = "pytorchjob-controller"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
VOLCANO = "volcano"
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
DEFAULT_RESTART_POLICY = "OnFailure"


def replica_specs(job: JsonDict) -> dict[str, JsonDict]:
    """The replica specs with the operator's defaults (1 replica, OnFailure), Master first."""
    raw = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    specs: dict[str, JsonDict] = {}
    for rtype in REPLICA_TYPES:
        spec = raw.get(rtype)
        if isinstance(spec, dict):
            replicas = spec.get("replicas")
            specs[rtype] = {
                **spec,
                "replicas": replicas if isinstance(replicas, int) else 1,
                "restartPolicy": spec.get("restartPolicy") or DEFAULT_RESTART_POLICY,
            }
    return specs


def pod_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{rtype.lower()}-{index}"


def job_labels(job_name: str) -> dict[str, str]:
    return {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: job_name}


def replica_labels(job_name: str, rtype: str, index: int | None = None) -> dict[str, str]:
    labels = {**job_labels(job_name), REPLICA_TYPE_LABEL: rtype.lower()}
    if index is not None:
        labels[REPLICA_INDEX_LABEL] = str(index)
    return labels


def replica_selector(job_name: str, rtype: str) -> str:
    return format_selector(replica_labels(job_name, rtype))


def owner_reference(owner: JsonDict) -> JsonDict:
    metadata = owner.get("metadata") or {}
    return {
        "apiVersion": owner.get("apiVersion") or API_VERSION,
        "kind": owner.get("kind") or "PyTorchJob",
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _containers(template: JsonDict) -> list[JsonDict]:
    return [c for c in (template.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]


def master_port(specs: dict[str, JsonDict]) -> int:
    for container in _containers((specs.get(MASTER) or {}).get("template") or {}):
        if container.get("name") == CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == PORT_NAME and isinstance(port.get("containerPort"), int):
                    return int(port["containerPort"])
    return DEFAULT_PORT


def _nproc_per_node(job: JsonDict) -> str:
    return str((job.get("spec") or {}).get("nprocPerNode") or "auto")


def _nnodes(job: JsonDict, total: int) -> str:
    elastic = (job.get("spec") or {}).get("elasticPolicy") or {}
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if isinstance(low, int) and isinstance(high, int):
        return f"{low}:{high}"
    return str(total)


def pytorch_env(job: JsonDict, rtype: str, index: int) -> list[JsonDict]:
    """``setPodEnv``: what torch.distributed / torchrun read, appended to every container."""
    specs = replica_specs(job)
    name = (job.get("metadata") or {}).get("name") or ""
    total = sum(spec["replicas"] for spec in specs.values())
    nproc = _nproc_per_node(job)
    # WORLD_SIZE multiplies by an integer nprocPerNode; "auto"/"cpu"/"gpu" count as 1.
    world_size = total * (int(nproc) if nproc.isdigit() else 1)
    rank = index + 1 if rtype == WORKER and MASTER in specs else index
    env: list[JsonDict] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if MASTER in specs:
        port = str(master_port(specs))
        address = pod_name(name, MASTER, 0)
        env += [
            {"name": "MASTER_PORT", "value": port},
            {"name": "PET_MASTER_PORT", "value": port},
            {"name": "MASTER_ADDR", "value": address},
            {"name": "PET_MASTER_ADDR", "value": address},
            {"name": "WORLD_SIZE", "value": str(world_size)},
            {"name": "RANK", "value": str(rank)},
        ]
    env += [
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {"name": "PET_NODE_RANK", "value": str(rank)},
        {"name": "PET_NNODES", "value": _nnodes(job, total)},
    ]
    return env


def build_pod(job: JsonDict, rtype: str, index: int, *, gang_scheduler: str | None) -> JsonDict:
    """``createNewPod``: the replica's template with the operator's labels, restart policy, env,
    ownerReference and (with a gang scheduler) the Volcano decoration."""
    specs = replica_specs(job)
    spec = specs[rtype]
    job_meta = job.get("metadata") or {}
    name = str(job_meta.get("name") or "")
    template = copy.deepcopy(spec.get("template") or {})
    metadata: JsonDict = dict(template.get("metadata") or {})
    labels = {**(metadata.get("labels") or {}), **replica_labels(name, rtype, index)}
    is_master_role = rtype == MASTER or (MASTER not in specs and index == 0)
    if is_master_role:
        labels[JOB_ROLE_LABEL] = "master"
    metadata.update(
        name=pod_name(name, rtype, index),
        namespace=job_meta.get("namespace"),
        labels=labels,
        ownerReferences=[owner_reference(job)],
    )
    metadata.pop("generateName", None)
    pod_spec: JsonDict = dict(template.get("spec") or {})
    # ExitCode is the operator's own policy; the kubelet must never restart such a container.
    policy = spec["restartPolicy"]
    pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
    env = pytorch_env(job, rtype, index)
    pod_spec["containers"] = [
        {**container, "env": [*(container.get("env") or []), *env]} for container in _containers(template)
    ]
    if gang_scheduler:
        pod_spec.setdefault("schedulerName", gang_scheduler)
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            GROUP_NAME_ANNOTATION: name,
            TASK_SPEC_ANNOTATION: rtype.lower(),
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def build_service(job: JsonDict, rtype: str, index: int) -> JsonDict:
    """``CreateNewService``: headless, same name as the pod, the pytorch container's ports."""
    spec = replica_specs(job)[rtype]
    job_meta = job.get("metadata") or {}
    name = str(job_meta.get("name") or "")
    labels = replica_labels(name, rtype, index)
    ports: list[JsonDict] = []
    for container in _containers(spec.get("template") or {}):
        if container.get("name") == CONTAINER:
            for port in container.get("ports") or []:
                if isinstance(port.get("containerPort"), int):
                    entry: JsonDict = {"port": port["containerPort"]}
                    if port.get("name"):
                        entry = {"name": port["name"], **entry}
                    ports.append(entry)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": pod_name(name, rtype, index),
            "namespace": job_meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"clusterIP": "None", "selector": dict(labels), "ports": ports},
    }


def _container_resources(template: JsonDict) -> list[dict[str, Any]]:
    lists = []
    for container in _containers(template):
        resources = container.get("resources") or {}
        # A container's limits stand in for its requests only when requests are absent.
        chosen = (
            resources.get("requests") if resources.get("requests") is not None else resources.get("limits")
        )
        lists.append(dict(chosen or {}))
    return lists


def min_resources(specs: dict[str, JsonDict], min_member: int, priorities: dict[str, int]) -> dict[str, str]:
    """``CalcPGMinResources``: the first ``minMember`` pods' container requests, replica types
    taken by their PriorityClass value, highest first (ties: Master before Worker)."""
    ordered = sorted(
        specs.items(),
        key=lambda item: (
            -priorities.get(
                str(((item[1].get("template") or {}).get("spec") or {}).get("priorityClassName") or ""), 0
            )
        ),
    )
    chosen: list[dict[str, Any]] = []
    count = 0
    for _, spec in ordered:
        for _ in range(spec["replicas"]):
            if count >= min_member:
                break
            count += 1
            chosen.extend(_container_resources(spec.get("template") or {}))
    return sum_resources(chosen)


def podgroup_spec(job: JsonDict, priorities: dict[str, int], existing_queue: str | None) -> JsonDict:
    """The PodGroup spec the operator keeps in sync; an existing group's queue wins."""
    specs = replica_specs(job)
    policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
    min_member = policy.get("minAvailable")
    if not isinstance(min_member, int):
        min_member = sum(spec["replicas"] for spec in specs.values())
    resources = policy.get("minResources")
    spec: JsonDict = {
        "minMember": min_member,
        "queue": existing_queue or policy.get("queue") or "default",
        "minResources": dict(resources)
        if resources is not None
        else min_resources(specs, min_member, priorities),
    }
    if policy.get("priorityClass"):
        spec["priorityClassName"] = policy["priorityClass"]
    return spec


def build_podgroup(job: JsonDict, spec: JsonDict) -> JsonDict:
    job_meta = job.get("metadata") or {}
    metadata: JsonDict = {
        "name": job_meta.get("name"),
        "namespace": job_meta.get("namespace"),
        "ownerReferences": [owner_reference(job)],
    }
    if job_meta.get("annotations"):
        metadata["annotations"] = dict(job_meta["annotations"])
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }
