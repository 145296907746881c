"""The admission webhooks a real cluster runs for these kinds, as in-process hooks.

- PyTorchJob (training-operator ``validator.pytorchjob.training-operator.kubeflow.org``, CREATE
  and UPDATE): DNS-1035 name; replica types only ``Master``/``Worker``; each replica has
  containers, every container an image, one container named ``pytorch``; ``Master`` replicas
  exactly 1, ``Worker`` at least 1; ``Worker`` required with an elastic policy. Denials are 403
  ``Forbidden`` because controller-runtime answers ``Denied`` for a plain error list, and
  kube-apiserver prefixes the webhook name. Before it, defaulting (the operator's
  ``SetDefaults_PyTorchJob`` as the simulator persists it): replica keys case-normalised
  (``worker`` -> ``Worker``) and the ``pytorchjob-port`` 23456 port added to ``pytorch``.
- PodGroup (Volcano ``validatepodgroup.volcano.sh``, CREATE only): the queue must exist and be
  ``Open`` (a queue without ``status.state`` counts as Open). Denials are 400 with no reason,
  because Volcano answers with a bare message. Volcano's mutating hook is mirrored too: a
  PodGroup in queue ``default`` moves to the queue named by its namespace's
  ``scheduling.volcano.sh/queue-name`` annotation.
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.errors import (
    Cause,
    WebhookDenied,
    aggregate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from gang_sim.apiserver.registry import ClusterView, Operation
from gang_sim.apiserver.validation import dns1035_label_errors

JsonDict = dict[str, Any]

PYTORCHJOB_WEBHOOK = "validator.pytorchjob.training-operator.kubeflow.org"
PODGROUP_WEBHOOK = "validatepodgroup.volcano.sh"
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_PORT = 23456
REPLICA_TYPES = ["Master", "Worker"]
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def default_pytorchjob(op: Operation, job: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs")
    if not isinstance(specs, dict):
        return
    normalised: JsonDict = {}
    for key, replica in specs.items():
        canonical = next((t for t in REPLICA_TYPES if t.lower() == str(key).lower()), key)
        normalised[canonical] = replica
    job["spec"]["pytorchReplicaSpecs"] = normalised
    for replica in normalised.values():
        containers = (((replica or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        for container in containers:
            if isinstance(container, dict) and container.get("name") == PYTORCH_CONTAINER:
                ports = container.setdefault("ports", [])
                if not any(isinstance(p, dict) and p.get("name") == PYTORCH_PORT_NAME for p in ports):
                    ports.append({"name": PYTORCH_PORT_NAME, "containerPort": PYTORCH_PORT})


def pytorchjob_causes(job: JsonDict) -> list[Cause]:
    """The training-operator webhook's checks; paths use Go's ``[key]`` form for map keys."""
    causes: list[Cause] = []
    name = (job.get("metadata") or {}).get("name") or ""
    errors = dns1035_label_errors(name)
    if errors:
        causes.append(invalid("metadata.name", name, f"should match: {','.join(errors)}"))
    spec = job.get("spec") or {}
    specs = spec.get("pytorchReplicaSpecs")
    base = "spec.pytorchReplicaSpecs"
    if spec.get("elasticPolicy") is not None and "Worker" not in (specs or {}):
        causes.append(required(f"{base}[Worker]", "must be configured if elastic policy is used"))
    if not specs:
        causes.append(required(base, "must be required"))
        return causes
    for rtype, replica in specs.items():
        role = f"{base}[{rtype}]"
        containers_path = f"{role}.template.spec.containers"
        if rtype not in REPLICA_TYPES:
            causes.append(not_supported(role, rtype, REPLICA_TYPES))
        containers = (((replica or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            causes.append(required(containers_path, "must be specified"))
        for index, container in enumerate(containers):
            if not (container or {}).get("image"):
                causes.append(required(f"{containers_path}[{index}].image", "must be required"))
        if not any((c or {}).get("name") == PYTORCH_CONTAINER for c in containers):
            causes.append(
                required(containers_path, f"must have at least one container with name {PYTORCH_CONTAINER}")
            )
        replicas = (replica or {}).get("replicas")
        if rtype == "Master" and replicas != 1:
            causes.append(forbidden(f"{role}.replicas", "must be 1"))
        elif rtype != "Master" and isinstance(replicas, int) and replicas < 1:
            causes.append(forbidden(f"{role}.replicas", "must be at least 1"))
    return causes


def admit_pytorchjob(op: Operation, job: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    causes = pytorchjob_causes(job)
    if causes:
        raise WebhookDenied(PYTORCHJOB_WEBHOOK, aggregate(causes), code=403, reason="Forbidden")


def default_podgroup_queue(op: Operation, pg: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    if op != "CREATE":
        return
    spec = pg.setdefault("spec", {})
    if spec.get("queue", "default") != "default":
        return
    namespace = view.lookup("", "namespaces", "", (pg.get("metadata") or {}).get("namespace", ""))
    annotated = ((namespace or {}).get("metadata") or {}).get("annotations", {}).get(QUEUE_ANNOTATION)
    if annotated:
        spec["queue"] = annotated


def admit_podgroup(op: Operation, pg: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    if op != "CREATE":
        return
    queue_name = (pg.get("spec") or {}).get("queue") or ""
    if not queue_name:
        return
    queue = view.lookup("scheduling.volcano.sh", "queues", "", queue_name)
    if queue is None:
        raise WebhookDenied(
            PODGROUP_WEBHOOK, f'unable to find queue: queues.scheduling.volcano.sh "{queue_name}" not found'
        )
    state = (queue.get("status") or {}).get("state") or "Open"
    if state != "Open":
        raise WebhookDenied(
            PODGROUP_WEBHOOK,
            f"can only submit PodGroup to queue with state `Open`, queue `{queue_name}` status is `{state}`.",
        )
