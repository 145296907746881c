"""TrainJobs and runtimes as the tests submit them, and reads of what the controllers made.

Everything goes through the official ``kubernetes`` client (``CustomObjectsApi`` for the Trainer
and JobSet kinds, ``BatchV1Api`` for Jobs), the way the provider will.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

JsonDict = dict[str, Any]

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
GPU = "nvidia.com/gpu"
TRAINJOB_LABEL = "trainer.kubeflow.org/trainjob-name"
DURATION = "sim.airflow-gang.io/duration"
EXIT_CODE = "sim.airflow-gang.io/exit-code"


def trainjob(
    name: str,
    *,
    nodes: int = 2,
    runtime: str = "torch-distributed",
    runtime_kind: str | None = None,
    gpus: int | None = 1,
    annotations: dict[str, str] | None = None,
    suspend: bool | None = None,
) -> JsonDict:
    ref: JsonDict = {"name": runtime}
    if runtime_kind is not None:
        ref["kind"] = runtime_kind
    trainer: JsonDict = {
        "image": "ghcr.io/acme/train:1",
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "1"],
        "env": [{"name": "LEARNING_RATE", "value": "0.1"}],
        "numNodes": nodes,
    }
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {GPU: gpus}, "requests": {"cpu": "1", GPU: gpus}}
    spec: JsonDict = {"runtimeRef": ref, "trainer": trainer}
    if suspend is not None:
        spec["suspend"] = suspend
    metadata: JsonDict = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "/".join(TRAINER), "kind": "TrainJob", "metadata": metadata, "spec": spec}


def create_trainjob(custom: k8s.CustomObjectsApi, namespace: str, body: JsonDict) -> JsonDict:
    created: JsonDict = custom.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", body)
    return created


def get_trainjob(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict:
    found: JsonDict = custom.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", name)
    return found


def conditions(obj: JsonDict) -> dict[str, JsonDict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def finished(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> str | None:
    """``Complete`` or ``Failed`` once the TrainJob says so, else None."""
    current = conditions(get_trainjob(custom, namespace, name))
    for ctype in ("Complete", "Failed"):
        if current.get(ctype, {}).get("status") == "True":
            return ctype
    return None


def items(
    custom: k8s.CustomObjectsApi, group: tuple[str, str], namespace: str, plural: str
) -> list[JsonDict]:
    listed: list[JsonDict] = custom.list_namespaced_custom_object(*group, namespace, plural)["items"]
    return listed


def controller_of(obj: Any) -> dict[str, Any]:
    """The controller ownerReference of a model object or a dict, as a wire-form dict."""
    if isinstance(obj, dict):
        refs = [dict(ref) for ref in obj["metadata"].get("ownerReferences") or []]
    else:
        refs = [
            {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "name": ref.name,
                "uid": ref.uid,
                "controller": ref.controller,
                "blockOwnerDeletion": ref.block_owner_deletion,
            }
            for ref in obj.metadata.owner_references or []
        ]
    controllers = [ref for ref in refs if ref.get("controller")]
    assert len(controllers) == 1, f"expected one controller reference, got {refs}"
    return controllers[0]


def env_of(container: k8s.V1Container) -> dict[str, str]:
    """Container env: plain values, and ``fieldRef:<path>`` for downward-API ones."""
    result = {}
    for item in container.env or []:
        if item.value_from is not None and item.value_from.field_ref is not None:
            result[item.name] = f"fieldRef:{item.value_from.field_ref.field_path}"
        else:
            result[item.name] = item.value
    return result


def pod_log(core: k8s.CoreV1Api, name: str, namespace: str) -> str:
    """A pod's log as text (the client's own decoding hands back ``str(bytes)``)."""
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False)
    return str(response.data.decode())


# The label Trainer puts on the replicated Job of the trainer step (its ancestor step).
ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def runtime_without_retries(name: str, max_restarts: int) -> dict[str, Any]:
    """A namespaced torch runtime whose pods never restart (``Never``, ``backoffLimit: 0``) and
    whose JobSet restarts ``max_restarts`` times."""
    pod_spec = {
        "restartPolicy": "Never",
        "schedulerName": "volcano",
        "containers": [{"name": "node", "image": "ghcr.io/acme/train:1"}],
    }
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": ANCESTOR},
            "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}},
        },
    }
    return {
        "apiVersion": "/".join(TRAINER),
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"volcano": {}},
            "template": {"spec": {"failurePolicy": {"maxRestarts": max_restarts}, "replicatedJobs": [node]}},
        },
    }
