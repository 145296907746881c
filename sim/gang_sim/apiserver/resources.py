"""The served kinds, one row each. Adding a kind is adding a row here.

Built-in kinds carry the hooks of their upstream strategies and admission plugins; custom
resources carry their schema (``kinds/schemas.py``) and their webhooks (``kinds/webhooks.py``).
Scope, subresources and short names match the real API so discovery looks like a real cluster's.
"""

from __future__ import annotations

import dataclasses
import functools

from gang_sim.apiserver import printing
from gang_sim.apiserver.kinds import (
    batch,
    core,
    policy,
    schemas,
    trainer_schemas,
    trainer_webhooks,
    volcano_job_webhooks,
    webhooks,
)
from gang_sim.apiserver.registry import PrinterColumn, Registry, ResourceInfo, ScalePaths

_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

NAMESPACES = ResourceInfo(
    group="",
    version="v1",
    kind="Namespace",
    plural="namespaces",
    namespaced=False,
    subresources=frozenset({"status"}),
    short_names=("ns",),
    name_rule="label",
    generation=False,
    field_selectors=("status.phase",),
    printer_columns=(PrinterColumn("Status", json_path=".status.phase"), printing.AGE),
    mutators=(core.default_namespace,),
)
NODES = ResourceInfo(
    group="",
    version="v1",
    kind="Node",
    plural="nodes",
    namespaced=False,
    subresources=frozenset({"status"}),
    short_names=("no",),
    generation=False,
    field_selectors=("spec.unschedulable",),
    printer_columns=(
        PrinterColumn("Status", cell=printing.node_status),
        PrinterColumn("Roles", cell=printing.node_roles),
        printing.AGE,
        PrinterColumn("Version", json_path=".status.nodeInfo.kubeletVersion"),
    ),
)
PODS = ResourceInfo(
    group="",
    version="v1",
    kind="Pod",
    plural="pods",
    namespaced=True,
    subresources=frozenset({"status", "binding", "log", "eviction"}),
    short_names=("po",),
    categories=("all",),
    field_selectors=_POD_FIELDS,
    graceful_delete=True,
    printer_columns=(
        PrinterColumn("Ready", cell=printing.pod_ready),
        PrinterColumn("Status", cell=printing.pod_status),
        PrinterColumn("Restarts", "integer", cell=printing.pod_restarts),
        printing.AGE,
        PrinterColumn("IP", json_path=".status.podIP", priority=1),
        PrinterColumn("Node", json_path=".spec.nodeName", priority=1),
    ),
    mutators=(core.default_pod, core.admit_pod_priority),
    validators=(core.validate_pod,),
)
SERVICES = ResourceInfo(
    group="",
    version="v1",
    kind="Service",
    plural="services",
    namespaced=True,
    subresources=frozenset({"status"}),
    short_names=("svc",),
    categories=("all",),
    name_rule="dns1035",
    generation=False,
    printer_columns=(
        PrinterColumn("Type", json_path=".spec.type"),
        PrinterColumn("Cluster-IP", json_path=".spec.clusterIP"),
        PrinterColumn("Port(s)", cell=printing.service_ports),
        printing.AGE,
    ),
    mutators=(core.default_service,),
    validators=(core.validate_service,),
)
# Trainer v2 keeps each TrainJob's runtime snapshot in one (``<trainjob>-runtime-snapshot``).
CONFIGMAPS = ResourceInfo(
    group="",
    version="v1",
    kind="ConfigMap",
    plural="configmaps",
    namespaced=True,
    short_names=("cm",),
    generation=False,
    printer_columns=(PrinterColumn("Data", "integer", cell=printing.data_count), printing.AGE),
)
EVENTS = ResourceInfo(
    group="",
    version="v1",
    kind="Event",
    plural="events",
    namespaced=True,
    short_names=("ev",),
    name_rule="path",
    generation=False,
    field_selectors=_EVENT_FIELDS,
    printer_columns=(
        PrinterColumn("Type", json_path=".type"),
        PrinterColumn("Reason", json_path=".reason"),
        PrinterColumn("Object", cell=printing.event_object),
        PrinterColumn("Message", json_path=".message"),
    ),
)
# Node heartbeats: each kubelet renews its Lease in ``kube-node-lease``.
LEASES = ResourceInfo(
    group="coordination.k8s.io",
    version="v1",
    kind="Lease",
    plural="leases",
    namespaced=True,
    generation=False,
    printer_columns=(PrinterColumn("Holder", json_path=".spec.holderIdentity"), printing.AGE),
)
PRIORITY_CLASSES = ResourceInfo(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    namespaced=False,
    short_names=("pc",),
    generation=False,
    printer_columns=(
        PrinterColumn("Value", "integer", json_path=".value"),
        PrinterColumn("Global-Default", "boolean", json_path=".globalDefault"),
        printing.AGE,
        PrinterColumn("PreemptionPolicy", json_path=".preemptionPolicy"),
    ),
    mutators=(core.default_priority_class,),
    validators=(core.validate_priority_class,),
    admission=(core.admit_priority_class,),
)
# What the Eviction API (``pods/eviction``) honours; the disruption controller keeps the status.
PODDISRUPTIONBUDGETS = ResourceInfo(
    group="policy",
    version="v1",
    kind="PodDisruptionBudget",
    plural="poddisruptionbudgets",
    namespaced=True,
    subresources=frozenset({"status"}),
    short_names=("pdb",),
    printer_columns=(
        PrinterColumn("Min Available", cell=policy.min_available),
        PrinterColumn("Max Unavailable", cell=policy.max_unavailable),
        PrinterColumn("Allowed Disruptions", "integer", cell=policy.allowed_disruptions),
        printing.AGE,
    ),
    mutators=(policy.default_pdb,),
    validators=(policy.validate_pdb,),
)
PYTORCHJOBS = ResourceInfo(
    group="kubeflow.org",
    version="v1",
    kind="PyTorchJob",
    plural="pytorchjobs",
    namespaced=True,
    subresources=frozenset({"status", "scale"}),
    schema=schemas.PYTORCHJOB_SCHEMA,
    # As the upstream CRD declares it: the scale of a PyTorchJob is its Worker count.
    scale=ScalePaths(
        spec_replicas=".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas=".status.replicaStatuses.Worker.active",
        label_selector=".status.replicaStatuses.Worker.selector",
    ),
    printer_columns=(
        PrinterColumn("State", json_path=".status.conditions[-1:].type"),
        PrinterColumn("Age", "date", json_path=".metadata.creationTimestamp"),
    ),
    mutators=(webhooks.default_pytorchjob,),
    admission=(webhooks.admit_pytorchjob,),
)
PODGROUPS = ResourceInfo(
    group="scheduling.volcano.sh",
    version="v1beta1",
    kind="PodGroup",
    plural="podgroups",
    namespaced=True,
    schema=schemas.PODGROUP_SCHEMA,
    short_names=("pg", "podgroup-v1beta1"),
    printer_columns=(
        PrinterColumn("STATUS", json_path=".status.phase"),
        PrinterColumn("minMember", "integer", json_path=".spec.minMember"),
        PrinterColumn("RUNNINGS", "integer", json_path=".status.running"),
        PrinterColumn("AGE", "date", json_path=".metadata.creationTimestamp"),
        PrinterColumn("QUEUE", json_path=".spec.queue", priority=1),
    ),
    mutators=(webhooks.default_podgroup_queue,),
    admission=(webhooks.admit_podgroup,),
)
QUEUES = ResourceInfo(
    group="scheduling.volcano.sh",
    version="v1beta1",
    kind="Queue",
    plural="queues",
    namespaced=False,
    subresources=frozenset({"status"}),
    schema=schemas.QUEUE_SCHEMA,
    short_names=("q", "queue-v1beta1"),
    printer_columns=(PrinterColumn("PARENT", json_path=".spec.parent"),),
)
VOLCANO_JOBS = ResourceInfo(
    group="batch.volcano.sh",
    version="v1alpha1",
    kind="Job",
    plural="jobs",
    namespaced=True,
    subresources=frozenset({"status"}),
    schema=schemas.VOLCANO_JOB_SCHEMA,
    short_names=("vcjob", "vj"),
    printer_columns=(
        PrinterColumn("STATUS", json_path=".status.state.phase"),
        PrinterColumn("minAvailable", "integer", json_path=".status.minAvailable"),
        PrinterColumn("RUNNINGS", "integer", json_path=".status.running"),
        PrinterColumn("AGE", "date", json_path=".metadata.creationTimestamp"),
    ),
    mutators=(volcano_job_webhooks.default_vcjob,),
    admission=(volcano_job_webhooks.admit_vcjob,),
)

JOBS = ResourceInfo(
    group="batch",
    version="v1",
    kind="Job",
    plural="jobs",
    namespaced=True,
    subresources=frozenset({"status"}),
    categories=("all",),
    printer_columns=(
        PrinterColumn("Status", cell=printing.job_status),
        PrinterColumn("Completions", cell=printing.job_completions),
        PrinterColumn("Duration", cell=printing.job_duration),
        printing.AGE,
    ),
    mutators=(batch.default_job,),
    validators=(batch.validate_job,),
)
# Kubeflow Trainer v2 and the JobSet it runs on (docs/trainer-v2.md).
TRAINJOBS = ResourceInfo(
    group="trainer.kubeflow.org",
    version="v1alpha1",
    kind="TrainJob",
    plural="trainjobs",
    namespaced=True,
    subresources=frozenset({"status"}),
    schema=trainer_schemas.TRAINJOB_SCHEMA,
    # The CRD's CEL rule: a lower-case RFC 1035 label of at most 63 characters.
    name_rule="dns1035",
    printer_columns=(
        PrinterColumn("State", json_path=".status.conditions[-1:].type"),
        PrinterColumn("Age", "date", json_path=".metadata.creationTimestamp"),
    ),
    admission=(trainer_webhooks.admit_trainjob,),
)
TRAINING_RUNTIMES = ResourceInfo(
    group="trainer.kubeflow.org",
    version="v1alpha1",
    kind="TrainingRuntime",
    plural="trainingruntimes",
    namespaced=True,
    schema=trainer_schemas.TRAINING_RUNTIME_SCHEMA,
)
CLUSTER_TRAINING_RUNTIMES = ResourceInfo(
    group="trainer.kubeflow.org",
    version="v1alpha1",
    kind="ClusterTrainingRuntime",
    plural="clustertrainingruntimes",
    namespaced=False,
    schema=trainer_schemas.TRAINING_RUNTIME_SCHEMA,
)
JOBSETS = ResourceInfo(
    group="jobset.x-k8s.io",
    version="v1alpha2",
    kind="JobSet",
    plural="jobsets",
    namespaced=True,
    subresources=frozenset({"status"}),
    schema=trainer_schemas.JOBSET_SCHEMA,
    printer_columns=(
        PrinterColumn("TerminalState", json_path=".status.terminalState"),
        PrinterColumn("Restarts", json_path=".status.restarts"),
        PrinterColumn("Completed", cell=printing.jobset_completed),
        PrinterColumn("Suspended", json_path=".spec.suspend"),
        PrinterColumn("Age", "date", json_path=".metadata.creationTimestamp"),
    ),
    mutators=(trainer_webhooks.default_jobset,),
    admission=(trainer_webhooks.admit_jobset,),
)

BUILTIN_RESOURCES: tuple[ResourceInfo, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    CONFIGMAPS,
    EVENTS,
    LEASES,
    PRIORITY_CLASSES,
    PODDISRUPTIONBUDGETS,
    PYTORCHJOBS,
    PODGROUPS,
    QUEUES,
    VOLCANO_JOBS,
    JOBS,
    TRAINJOBS,
    TRAINING_RUNTIMES,
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
)


def builtin_registry() -> Registry:
    return Registry(BUILTIN_RESOURCES)


def with_default_tolerations(
    registry: Registry, not_ready_seconds: int, unreachable_seconds: int
) -> Registry:
    """``registry`` whose pods get these DefaultTolerationSeconds (kube-apiserver's flags)."""
    pods = registry.by_key(PODS.key)
    if pods is None:
        return registry
    defaulting = functools.partial(
        core.default_pod, not_ready_seconds=not_ready_seconds, unreachable_seconds=unreachable_seconds
    )
    mutators = tuple(defaulting if m is core.default_pod else m for m in pods.mutators)
    return registry.replaced([dataclasses.replace(pods, mutators=mutators)])
