"""Typed, pure description of a gang-scheduled PyTorchJob, and the only place manifests are built.

`GangJobSpec` maps one to one onto `PyTorchJobOperator`'s job arguments. Constructing it
validates everything a cluster would reject later (and a few things a cluster would accept but
that cannot work, such as a gang larger than the job); every problem raises `GangSpecError`
naming the field, the value and the fix. `build_pytorchjob()` and `build_podgroup()` then return
plain wire dicts (`kubeflow.org/v1` PyTorchJob, `scheduling.volcano.sh/v1beta1` PodGroup).

Facts encoded here (``docs/architecture.md#domain-facts``: PodGroups, the PyTorchJob, the
training-operator's gang scheduling): the training container is named ``pytorch``; there
is exactly one Master; the rendezvous port is 23456 unless given; Volcano keys pods to their
PodGroup only through the annotation ``scheduling.k8s.io/group-name`` and schedules only pods
with ``schedulerName: volcano``; a gang's ``minResources`` is the sum of the container requests
of its first ``minMember`` pods, Master first.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from airflow_gang.exceptions import GangSpecError
from airflow_gang.kinds.base import GROUP_NAME_ANNOTATION, VOLCANO_SCHEDULER
from airflow_gang.kinds.pytorchjob import templates
from airflow_gang.kinds.pytorchjob.recipe import pytorchjob_recipe
from airflow_gang.kinds.recipe import JobRecipe
from airflow_gang.model import pod_fields, validation
from airflow_gang.model.k8s_objects import deep_merge, ordered, pod_requests
from airflow_gang.model.naming import LABEL_PREFIX
from airflow_gang.model.quantity import Quantity, sum_resources
from airflow_gang.model.spec_choices import CleanPodPolicy, GangScheduling, RestartPolicy, RunPolicy

PYTORCHJOB_API_VERSION = "kubeflow.org/v1"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
CONTAINER_NAME = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_MASTER_PORT = 23456
REPLICA_TYPES = ("Master", "Worker")


class GangJobSpec(BaseModel):
    """Everything about one gang-scheduled PyTorchJob except its name and namespace.

    Raises `GangSpecError` (a `ValueError`) on invalid input, naming the field and the fix.
    With ``job_template``, only the arguments you pass explicitly override the template.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=False)

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    workers: int = Field(default=1, ge=0)
    resources: dict[str, Quantity] = Field(default_factory=dict)
    nproc_per_node: int | Literal["auto", "cpu", "gpu"] | None = None
    queue: str = "default"
    priority_class: str | None = None
    min_available: int | None = None
    min_resources: dict[str, Quantity] | None = None
    gang_scheduling: GangScheduling = GangScheduling.PROVIDER
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    service_account_name: str | None = None
    image_pull_secrets: list[str] = Field(default_factory=list)
    pod_template: dict[str, Any] | None = None
    job_template: dict[str, Any] | None = None
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    restart_policy: RestartPolicy = RestartPolicy.ON_FAILURE
    master_port: int = Field(default=DEFAULT_MASTER_PORT, ge=1, le=65535)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise validation.spec_error_from(error, _argument_names()) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> GangJobSpec:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as error:
            raise validation.spec_error_from(error, _argument_names()) from None

    # --- field validation: each raises with the field, the value and the fix -------------

    _wire = field_validator(
        "tolerations", "volumes", "volume_mounts", "pod_template", "run_policy", mode="before"
    )(validation.to_wire_before)
    _job_template = field_validator("job_template", mode="before")(templates.load_job_template)
    _image = field_validator("image")(validation.check_image)
    _strings = field_validator("command", "args", mode="before")(validation.check_string_list)
    _env = field_validator("env", mode="before")(validation.check_env)
    _resources = field_validator("resources", mode="before")(validation.check_resources)
    _min_resources = field_validator("min_resources", mode="before")(validation.check_min_resources)
    _nproc = field_validator("nproc_per_node")(validation.check_nproc_per_node)
    _object_names = field_validator("queue", "priority_class", "service_account_name")(
        validation.check_object_name
    )
    _labels = field_validator("labels")(pod_fields.check_labels)
    _annotations = field_validator("annotations")(pod_fields.check_annotations)
    _node_selector = field_validator("node_selector")(pod_fields.check_node_selector)
    _tolerations = field_validator("tolerations")(pod_fields.check_tolerations)
    _volumes = field_validator("volumes")(pod_fields.check_volumes)
    _volume_mounts = field_validator("volume_mounts")(pod_fields.check_volume_mounts)
    _pull_secrets = field_validator("image_pull_secrets", mode="before")(pod_fields.check_pull_secrets)
    _pod_template = field_validator("pod_template")(templates.check_pod_template_field)

    @model_validator(mode="after")
    def _check_consistency(self) -> GangJobSpec:
        replicas = 1 + self.effective_workers
        if self.min_available is not None and not 1 <= self.min_available <= replicas:
            raise validation.error(
                f"min_available={self.min_available} is invalid: must be between 1 and the job's "
                f"{replicas} replicas (1 Master + {self.effective_workers} Workers); leave it unset "
                "to require the whole gang",
                "min_available",
            )
        # Building once here turns every template/merge problem into a constructor error.
        validation.check_built_job(self._build_job_body())
        return self

    # --- derived values -------------------------------------------------------------------

    def _set(self, field: str) -> bool:
        """Whether the caller passed ``field`` explicitly (it then overrides ``job_template``)."""
        return field in self.model_fields_set or self.job_template is None

    def _template_replica(self, replica_type: str) -> dict[str, Any] | None:
        replica_specs = ((self.job_template or {}).get("spec") or {}).get("pytorchReplicaSpecs") or {}
        replica = replica_specs.get(replica_type)
        return replica if isinstance(replica, dict) else None

    @property
    def effective_workers(self) -> int:
        """Worker replicas after applying the arguments on top of ``job_template``."""
        if self._set("workers"):
            return self.workers
        worker = self._template_replica("Worker")
        return int(worker.get("replicas", 1)) if worker else 0

    @property
    def replica_count(self) -> int:
        """Pods in the job: one Master plus the Workers."""
        return 1 + self.effective_workers

    @property
    def min_member(self) -> int:
        """The gang size: ``min_available``, else every replica."""
        return self.min_available if self.min_available is not None else self.replica_count

    @property
    def effective_queue(self) -> str:
        if self._set("queue"):
            return self.queue
        policy = (((self.job_template or {}).get("spec") or {}).get("runPolicy") or {}).get(
            "schedulingPolicy"
        ) or {}
        return str(policy.get("queue") or self.queue)

    # --- builders -------------------------------------------------------------------------

    def build_pytorchjob(
        self,
        name: str,
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The ``kubeflow.org/v1`` PyTorchJob manifest.

        :param name: job name (DNS-1035; pods and services are named ``<name>-worker-<i>``).
        :param namespace: namespace of the job, its PodGroup and its pods.
        :param labels: extra labels (the operator passes the Airflow identity labels) put on the
            job and every pod; they win over ``labels`` of the spec.
        :param annotations: extra annotations for the job.
        """
        validation.check_job_name(name, self.effective_workers)
        validation.check_namespace(namespace)
        job = self._build_job_body(dict(labels or {}))
        metadata = job.setdefault("metadata", {})
        metadata["name"] = name
        metadata["namespace"] = namespace
        metadata["labels"] = {**(metadata.get("labels") or {}), **self.labels, **(labels or {})}
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            **self.annotations,
            **(annotations or {}),
        }
        for key in ("labels", "annotations"):
            if not metadata[key]:
                del metadata[key]
        if self.gang_scheduling is GangScheduling.PROVIDER:
            for replica in job["spec"]["pytorchReplicaSpecs"].values():
                replica["template"]["metadata"].setdefault("annotations", {})[GROUP_NAME_ANNOTATION] = name
        return ordered(job, ("apiVersion", "kind", "metadata", "spec"))

    def recipe(self) -> JobRecipe:
        """What submission builds from this spec (`airflow_gang.kinds.recipe`)."""
        return pytorchjob_recipe(self)

    def build_podgroup(
        self,
        name: str,
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """The ``scheduling.volcano.sh/v1beta1`` PodGroup, or ``None`` unless gang_scheduling="provider".

        Its name is the job's, which is what the pods' ``scheduling.k8s.io/group-name`` names
        and what the training-operator would pick too, so both can never disagree.
        """
        if self.gang_scheduling is not GangScheduling.PROVIDER:
            return None
        job = self.build_pytorchjob(name, namespace, labels)
        policy = job["spec"]["runPolicy"]["schedulingPolicy"]
        spec: dict[str, Any] = {
            "minMember": policy["minAvailable"],
            "queue": policy["queue"],
            "minResources": dict(policy["minResources"]),
        }
        if "priorityClass" in policy:
            spec["priorityClassName"] = policy["priorityClass"]
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        group_labels = {**self.labels, **(labels or {})}
        if group_labels:
            metadata["labels"] = group_labels
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        return {"apiVersion": PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata, "spec": spec}

    def _build_job_body(self, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
        """The job without name and namespace (``build_pytorchjob`` sets those)."""
        job = copy.deepcopy(self.job_template) if self.job_template else {}
        job["apiVersion"] = PYTORCHJOB_API_VERSION
        job["kind"] = "PyTorchJob"
        spec = job.setdefault("spec", {})
        replica_specs = spec.get("pytorchReplicaSpecs") or {}
        master_template = (replica_specs.get("Master") or {}).get("template") or {}
        built: dict[str, Any] = {}
        for replica_type, replicas in (("Master", 1), ("Worker", self.effective_workers)):
            if replicas == 0:
                continue
            base = replica_specs.get(replica_type) or {"template": copy.deepcopy(master_template)}
            built[replica_type] = self._build_replica(base, replicas, extra_labels or {})
        spec["pytorchReplicaSpecs"] = built
        if self._set("nproc_per_node") and self.nproc_per_node is not None:
            spec["nprocPerNode"] = str(self.nproc_per_node)
        spec["runPolicy"] = self._build_run_policy(spec.get("runPolicy") or {}, built)
        return job

    def _build_replica(
        self, base: dict[str, Any], replicas: int, extra_labels: dict[str, str]
    ) -> dict[str, Any]:
        replica = copy.deepcopy(base)
        replica["replicas"] = replicas
        if self._set("restart_policy") or "restartPolicy" not in replica:
            replica["restartPolicy"] = self.restart_policy.value
        template = replica.setdefault("template", {}) or {}
        replica["template"] = template
        metadata = template.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), **self.labels, **extra_labels}
        if not metadata["labels"]:
            del metadata["labels"]
        pod = template.setdefault("spec", {})
        pod["containers"] = self._build_containers(pod.get("containers") or [])
        self._apply_pod_fields(pod)
        merged = deep_merge(template, self.pod_template) if self.pod_template else template
        replica["template"] = self._apply_gang_decoration(merged)
        return ordered(replica, ("replicas", "restartPolicy", "template"))

    def _build_containers(self, containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        containers = copy.deepcopy(containers)
        pytorch = next((c for c in containers if c.get("name") == CONTAINER_NAME), None)
        if pytorch is None:
            pytorch = {"name": CONTAINER_NAME}
            containers.insert(0, pytorch)
        if self.image is not None:
            pytorch["image"] = self.image
        if self.command is not None and self._set("command"):
            pytorch["command"] = list(self.command)
        if self.args is not None and self._set("args"):
            pytorch["args"] = list(self.args)
        if self.env:
            env = [e for e in pytorch.get("env", []) if e.get("name") not in self.env]
            pytorch["env"] = env + [validation.env_var(key, value) for key, value in self.env.items()]
        if self.resources:
            resources = pytorch.setdefault("resources", {})
            requests, limits = validation.requests_and_limits(self.resources)
            resources["requests"] = {**(resources.get("requests") or {}), **requests}
            if limits:
                resources["limits"] = {**(resources.get("limits") or {}), **limits}
        ports = [p for p in pytorch.get("ports", []) if p.get("name") != PORT_NAME]
        old_port = next((p for p in pytorch.get("ports", []) if p.get("name") == PORT_NAME), None)
        port = self.master_port if self._set("master_port") or old_port is None else old_port["containerPort"]
        pytorch["ports"] = [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}, *ports]
        if self.volume_mounts:
            mounts = [m for m in pytorch.get("volumeMounts", []) if m not in self.volume_mounts]
            pytorch["volumeMounts"] = mounts + copy.deepcopy(self.volume_mounts)
        return containers

    def _apply_pod_fields(self, pod: dict[str, Any]) -> None:
        if self.node_selector:
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **self.node_selector}
        if self.tolerations:
            existing = pod.get("tolerations", [])
            pod["tolerations"] = existing + [t for t in self.tolerations if t not in existing]
        if self.volumes:
            ours = {v["name"] for v in self.volumes}
            kept = [v for v in pod.get("volumes", []) if v.get("name") not in ours]
            pod["volumes"] = kept + copy.deepcopy(self.volumes)
        if self.service_account_name is not None:
            pod["serviceAccountName"] = self.service_account_name
        if self.image_pull_secrets:
            present = [s.get("name") for s in pod.get("imagePullSecrets", [])]
            pod["imagePullSecrets"] = pod.get("imagePullSecrets", []) + [
                {"name": s} for s in self.image_pull_secrets if s not in present
            ]
        if self.priority_class is not None:
            pod["priorityClassName"] = self.priority_class

    def _apply_gang_decoration(self, template: dict[str, Any]) -> dict[str, Any]:
        pod = template.setdefault("spec", {})
        metadata = template.setdefault("metadata", {})
        annotations = metadata.get("annotations") or {}
        if self.gang_scheduling is GangScheduling.PROVIDER:
            scheduler = pod.get("schedulerName", VOLCANO_SCHEDULER)
            if scheduler != VOLCANO_SCHEDULER:
                raise validation.error(
                    f"pod_template sets spec.schedulerName={scheduler!r}, but gang_scheduling='provider' "
                    f"needs {VOLCANO_SCHEDULER!r}: remove schedulerName or use gang_scheduling='disabled'",
                    "pod_template",
                )
            pod["schedulerName"] = VOLCANO_SCHEDULER
        elif self.gang_scheduling is GangScheduling.DISABLED:
            # A plain job: strip gang decoration a job_template may carry, or Volcano would
            # still hold its pods without a PodGroup ever being created for them.
            annotations.pop(GROUP_NAME_ANNOTATION, None)
            if pod.get("schedulerName") == VOLCANO_SCHEDULER:
                del pod["schedulerName"]
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
        return template

    def _build_run_policy(self, base: dict[str, Any], replica_specs: dict[str, Any]) -> dict[str, Any]:
        policy = {**copy.deepcopy(base), **self.run_policy.to_wire()}
        if self.gang_scheduling is GangScheduling.DISABLED:
            policy.pop("schedulingPolicy", None)
            return policy
        scheduling = dict(policy.get("schedulingPolicy") or {})
        scheduling["queue"] = self.effective_queue
        scheduling["minAvailable"] = self.min_member
        if self.priority_class is not None:
            scheduling["priorityClass"] = self.priority_class
        scheduling["minResources"] = self._min_resources_of(replica_specs)
        policy["schedulingPolicy"] = scheduling
        return policy

    def _min_resources_of(self, replica_specs: dict[str, Any]) -> dict[str, str]:
        if self.min_resources is not None:
            return sum_resources([self.min_resources])
        pods: list[dict[str, Quantity]] = []
        for replica_type in REPLICA_TYPES:
            replica = replica_specs.get(replica_type)
            if replica is not None:
                pods.extend([pod_requests(replica["template"])] * int(replica["replicas"]))
        return sum_resources(pods[: self.min_member])


def _argument_names() -> list[str]:
    """Every job argument, for the "did you mean" of a misspelt one."""
    return [*GangJobSpec.model_fields, *RunPolicy.model_fields]


__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_MASTER_PORT",
    "GROUP_NAME_ANNOTATION",
    "LABEL_PREFIX",
    "CleanPodPolicy",
    "GangJobSpec",
    "GangScheduling",
    "GangSpecError",
    "RestartPolicy",
    "RunPolicy",
    "pod_requests",
]
