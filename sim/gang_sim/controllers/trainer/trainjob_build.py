"""What the Trainer v2 controller makes of a TrainJob and its runtime, as pure builders.

The JobSet is named after the TrainJob and owned by it (controller reference). Its spec is the
runtime's ``spec.template`` (a JobSet template), its labels and annotations the template's,
with the TrainJob applied as the trainer's plugins apply it (kubeflow/trainer
``pkg/runtime/framework/plugins/{jobset,torch,volcano}``):

- the replicated job whose template carries ``trainer.kubeflow.org/trainjob-ancestor-step:
  trainer`` runs the nodes: ``parallelism`` = ``completions`` = ``spec.trainer.numNodes`` (else
  the runtime's ``mlPolicy.numNodes``, else 1); other replicated jobs keep their parallelism;
- its container ``node`` takes the trainer's ``image``, ``command``, ``args``, ``env`` (merged by
  name) and ``resourcesPerNode`` (as the container's resources);
- with ``mlPolicy.torch``: torchrun's environment on that container — ``PET_NNODES``,
  ``PET_NPROC_PER_NODE`` (``numProcPerNode``; else ``auto``, or the CPU count for a CPU-only
  node), ``PET_NODE_RANK`` (from the pod's Job completion index annotation),
  ``PET_MASTER_ADDR`` = ``<trainjob>-node-0-0.<trainjob>`` (the first node's hostname in the
  JobSet's headless service) and ``PET_MASTER_PORT`` = 29500 — and container port 29500;
- with ``podGroupPolicy.volcano``: every pod template annotated ``scheduling.k8s.io/group-name:
  <trainjob>``, the link Volcano follows to the PodGroup `build_podgroup` makes;
- ``spec.suspend`` becomes the JobSet's ``spec.suspend``;
- ``spec.runtimePatches`` (v2.3's way to change a runtime per job) are applied for metadata
  (labels and annotations of the JobSet, its Job templates and pod templates) and the pod
  spec's ``nodeSelector`` and ``tolerations``; their other fields are ignored here.

Pod templates also get the label ``trainer.kubeflow.org/trainjob-name: <trainjob>`` (newer
Trainer releases set it too) and, a simulator convenience, the TrainJob's own
``sim.airflow-gang.io/*`` annotations, so the script runtime's duration, exit code and log can
be set per TrainJob as they are per PyTorchJob (``../kubelet/script_runtime.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gang_sim.controllers.kinds import JOBSETS, PODGROUPS, TRAINJOBS
from gang_sim.controllers.ownership import owner_reference
from gang_sim.quantity import parse_quantity, sum_resources

JsonDict = dict[str, Any]

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE = "node"
TRAINJOB_NAME_LABEL = "trainer.kubeflow.org/trainjob-name"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TRAINER_PORT = 29500
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
SIM_ANNOTATION_PREFIX = "sim.airflow-gang.io/"


@dataclass(frozen=True)
class PodSet:
    """One replicated job as a scheduler sees it: how many pods, each asking for what."""

    name: str
    pods: int
    requests: dict[str, str]
    priority_class: str | None


def _spec(obj: JsonDict | None) -> JsonDict:
    return (obj or {}).get("spec") or {}


def _meta(obj: JsonDict | None) -> JsonDict:
    return (obj or {}).get("metadata") or {}


def uses_volcano(runtime: JsonDict) -> bool:
    return (_spec(runtime).get("podGroupPolicy") or {}).get("volcano") is not None


def is_trainer_job(rjob: JsonDict) -> bool:
    return (_meta(rjob.get("template")).get("labels") or {}).get(ANCESTOR_LABEL) == ANCESTOR_TRAINER


def _containers(pod_spec: JsonDict) -> list[JsonDict]:
    return [c for c in pod_spec.get("containers") or [] if isinstance(c, dict)]


def _upsert(items: list[JsonDict], new: JsonDict, key: str) -> list[JsonDict]:
    """Replace the item with the same ``key`` value, or append (``apply.UpsertEnvVar``/``UpsertPort``)."""
    if any(item.get(key) == new.get(key) for item in items):
        return [new if item.get(key) == new.get(key) else item for item in items]
    return [*items, new]


def _merged_meta(target: JsonDict, source: JsonDict) -> None:
    for field in ("labels", "annotations"):
        if source.get(field):
            target[field] = {**(target.get(field) or {}), **source[field]}


def _patched_template(runtime: JsonDict, trainjob: JsonDict) -> JsonDict:
    """The runtime's JobSet template with the TrainJob's ``runtimePatches`` applied (see module doc)."""
    template = copy.deepcopy(_spec(runtime).get("template") or {})
    template.setdefault("metadata", {})
    rjobs = {r.get("name"): r for r in _spec(template).get("replicatedJobs") or [] if isinstance(r, dict)}
    for patch in _spec(trainjob).get("runtimePatches") or []:
        patched = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        _merged_meta(template["metadata"], _meta(patched))
        for prjob in _spec(patched).get("replicatedJobs") or []:
            rjob = rjobs.get(prjob.get("name"))
            if rjob is None:
                continue
            job_template = rjob.setdefault("template", {})
            _merged_meta(job_template.setdefault("metadata", {}), _meta(prjob.get("template")))
            pod_patch = _spec(prjob.get("template")).get("template") or {}
            pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
            _merged_meta(pod_template.setdefault("metadata", {}), _meta(pod_patch))
            pod_spec, patch_spec = pod_template.setdefault("spec", {}), _spec(pod_patch)
            if patch_spec.get("nodeSelector"):
                pod_spec["nodeSelector"] = {
                    **(pod_spec.get("nodeSelector") or {}),
                    **patch_spec["nodeSelector"],
                }
            if patch_spec.get("tolerations"):
                pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), *patch_spec["tolerations"]]
    return template


def node_count(runtime: JsonDict, trainjob: JsonDict) -> int:
    num_nodes = (_spec(trainjob).get("trainer") or {}).get("numNodes")
    if not isinstance(num_nodes, int):
        num_nodes = (_spec(runtime).get("mlPolicy") or {}).get("numNodes")
    return num_nodes if isinstance(num_nodes, int) else 1


def _nproc_per_node(trainer: JsonDict) -> str:
    """``PET_NPROC_PER_NODE``: as given, else ``auto`` — or the CPU count for a CPU-only node."""
    if isinstance(trainer.get("numProcPerNode"), int):
        return str(trainer["numProcPerNode"])
    resources = trainer.get("resourcesPerNode") or {}
    for amounts in (resources.get("limits"), resources.get("requests")):
        if not amounts:
            continue
        if any("gpu" in name.lower() for name in amounts):
            return "auto"
        if "cpu" in amounts:
            return str(max(1, int(parse_quantity(amounts["cpu"]))))
    return "auto"


def torch_env(trainjob: JsonDict, nodes: int) -> list[JsonDict]:
    name = str(_meta(trainjob).get("name") or "")
    trainer = _spec(trainjob).get("trainer") or {}
    return [
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": _nproc_per_node(trainer)},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {
                "fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}
            },
        },
        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
    ]


def _trainer_container(container: JsonDict, trainjob: JsonDict, torch: bool, nodes: int) -> JsonDict:
    """The ``node`` container with the TrainJob's trainer (and torchrun's environment) applied."""
    trainer = _spec(trainjob).get("trainer") or {}
    result = dict(container)
    for field in ("image", "command", "args"):
        if trainer.get(field):
            result[field] = copy.deepcopy(trainer[field])
    if trainer.get("resourcesPerNode"):
        result["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    env = list(result.get("env") or [])
    for item in [*(trainer.get("env") or []), *(torch_env(trainjob, nodes) if torch else [])]:
        env = _upsert(env, copy.deepcopy(item), "name")
    result["env"] = env
    if torch:
        port = {"containerPort": TRAINER_PORT, "protocol": "TCP"}
        result["ports"] = _upsert(list(result.get("ports") or []), port, "containerPort")
    return result


def _apply_trainer(pod_spec: JsonDict, trainjob: JsonDict, runtime: JsonDict, nodes: int) -> None:
    torch = (_spec(runtime).get("mlPolicy") or {}).get("torch") is not None
    pod_spec["containers"] = [
        _trainer_container(c, trainjob, torch, nodes) if c.get("name") == NODE else c
        for c in _containers(pod_spec)
    ]


def build_jobset(trainjob: JsonDict, runtime: JsonDict) -> JsonDict:
    """The JobSet the trainer applies for ``trainjob`` (see the module docstring)."""
    meta = _meta(trainjob)
    name = str(meta.get("name") or "")
    template = _patched_template(runtime, trainjob)
    spec = template.setdefault("spec", {})
    sim_annotations = {
        key: str(value)
        for key, value in (meta.get("annotations") or {}).items()
        if key.startswith(SIM_ANNOTATION_PREFIX)
    }
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        trainer_job = is_trainer_job(rjob)
        count = node_count(runtime, trainjob) if trainer_job else int(job_spec.get("parallelism") or 1)
        job_spec["parallelism"] = job_spec["completions"] = count
        pod_template = job_spec.setdefault("template", {})
        pod_meta = pod_template.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), TRAINJOB_NAME_LABEL: name}
        annotations = {**(pod_meta.get("annotations") or {}), **sim_annotations}
        if uses_volcano(runtime):
            annotations[GROUP_NAME_ANNOTATION] = name
        if annotations:
            pod_meta["annotations"] = annotations
        if trainer_job:
            _apply_trainer(pod_template.setdefault("spec", {}), trainjob, runtime, count)
    spec["suspend"] = bool(_spec(trainjob).get("suspend"))
    metadata: JsonDict = {
        "name": name,
        "namespace": meta.get("namespace"),
        "ownerReferences": [owner_reference(trainjob, TRAINJOBS)],
    }
    _merged_meta(metadata, _meta(template))
    return {"apiVersion": JOBSETS.api_version, "kind": JOBSETS.kind, "metadata": metadata, "spec": spec}


def _pod_requests(pod_spec: JsonDict) -> dict[str, str]:
    """What one pod asks for: its containers' requests (a container's limits when it gives none,
    as the API server's defaulting then copies them into its requests)."""
    lists = []
    for container in _containers(pod_spec):
        resources = container.get("resources") or {}
        requests = resources.get("requests")
        lists.append(dict(requests if requests is not None else resources.get("limits") or {}))
    return sum_resources(lists)


def pod_sets(jobset: JsonDict) -> list[PodSet]:
    sets = []
    for rjob in _spec(jobset).get("replicatedJobs") or []:
        job_spec = _spec(rjob.get("template"))
        replicas = rjob.get("replicas") if isinstance(rjob.get("replicas"), int) else 1
        pod_spec = _spec(job_spec.get("template"))
        sets.append(
            PodSet(
                name=str(rjob.get("name")),
                pods=replicas * int(job_spec.get("parallelism") or 1),
                requests=_pod_requests(pod_spec),
                priority_class=pod_spec.get("priorityClassName"),
            )
        )
    return sets


def volcano_queue(trainjob: JsonDict, runtime: JsonDict) -> str | None:
    """``scheduling.volcano.sh/queue-name`` as Trainer v2.3 reads it: from the runtime's JobSet
    template annotations (``spec.template.metadata.annotations``), overridden by the TrainJob's
    ``runtimePatches[].trainingRuntimeSpec.template.metadata.annotations`` in list order
    (kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` lines 144-161, read by the
    Volcano plugin at ``plugins/volcano/volcano.go`` line 182). The TrainJob's own
    ``metadata.annotations`` are never read: the PodGroup then has no queue and the API server's
    CRD default ``default`` applies (observed on the real Trainer: ``docs/trainer-v2.md``)."""
    queue = (_meta(_patched_template(runtime, trainjob)).get("annotations") or {}).get(QUEUE_ANNOTATION)
    return str(queue) if queue is not None else None


def build_podgroup(trainjob: JsonDict, runtime: JsonDict, jobset: JsonDict) -> JsonDict:
    """The Volcano PodGroup of a TrainJob whose runtime has ``podGroupPolicy.volcano``."""
    sets = pod_sets(jobset)
    # Each pod's requests once per pod: summing the text keeps binary units (``8Gi``) readable.
    totals = sum_resources(pod_set.requests for pod_set in sets for _ in range(pod_set.pods))
    spec: JsonDict = {"minMember": sum(pod_set.pods for pod_set in sets), "minResources": totals}
    queue = volcano_queue(trainjob, runtime)
    if queue is not None:
        spec["queue"] = queue
    priority_classes = [pod_set.priority_class for pod_set in sets if pod_set.priority_class]
    if priority_classes:
        spec["priorityClassName"] = priority_classes[-1]  # the last template's wins, as upstream
    topology = ((_spec(runtime).get("podGroupPolicy") or {}).get("volcano") or {}).get("networkTopology")
    if topology:
        spec["networkTopology"] = copy.deepcopy(topology)
    meta = _meta(trainjob)
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "ownerReferences": [owner_reference(trainjob, TRAINJOBS)],
        },
        "spec": spec,
    }
