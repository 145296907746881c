"""Typed, pure description of a Kubeflow Trainer v2 TrainJob, and the only place its manifest is built.

The first piece of issue 25 on the provider side: `TrainJobSpec` is what a `TrainJobOperator`
will take as job arguments; constructing it validates everything Trainer's webhook or the API
server would reject later, and `build_trainjob()` returns the plain wire dict
(``trainer.kubeflow.org/v1alpha1`` TrainJob). Every problem raises `GangSpecError` naming the
field, the value and the fix, before anything is sent to a cluster.

Facts encoded here (``docs/trainer-v2.md#what-a-trainjob-makes``, the v2.3.0 TrainJob CRD):

- the trainer's fields are ``image``, ``command``, ``args``, ``env``, ``numNodes``,
  ``resourcesPerNode`` and ``numProcPerNode`` (an integer in v2.3.0); the runtime is named by
  ``runtimeRef`` (kind ``ClusterTrainingRuntime`` unless ``TrainingRuntime``);
- the torch runtime sets ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
  ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT`` itself, and Trainer's webhook refuses a trainer
  ``env`` that sets them;
- the Volcano plugin takes the PodGroup's queue from the annotation
  ``scheduling.volcano.sh/queue-name`` of the runtime's JobSet template
  (``spec.template.metadata.annotations``), overridden by the same annotation in
  ``runtimePatches[].trainingRuntimeSpec.template.metadata.annotations``, the last patch naming
  one winning (kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` lines 145-161,
  ``plugins/volcano/volcano.go`` line 182); without one the PodGroup is in ``default``. The
  TrainJob's own ``metadata.annotations`` are never read for it, nor are pod annotations. So
  ``queue`` goes into the operator's own runtime patch, and an annotation naming the queue
  anywhere Trainer ignores it, or a patch of the user's naming another queue than ``queue``, is
  refused;
- everything about the pods beyond the trainer goes through ``runtimePatches``: entries keyed by
  ``manager``, each patching the runtime's JobSet template per replicated job, whose pod spec
  may only set affinity, containers (env, securityContext, volumeMounts), imagePullSecrets,
  initContainers, nodeSelector, schedulingGates, securityContext, serviceAccountName,
  terminationGracePeriodSeconds, tolerations and volumes, and whose pod metadata labels and
  annotations. This spec's queue and pod fields become one patch of manager `PATCH_MANAGER`
  (the pod fields for the trainer's replicated job, ``node``), the first of the list;
- pods are named ``<trainjob>-node-0-<rank>-<5 characters>`` and must stay within 63.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airflow_gang.kinds.base import QUEUE_ANNOTATION
from airflow_gang.kinds.trainjob.kind import patches_queue
from airflow_gang.model import pod_fields, validation
from airflow_gang.model.k8s_objects import deep_merge
from airflow_gang.model.naming import is_dns_1035_label, is_dns_1123_subdomain
from airflow_gang.model.quantity import Quantity

TRAINJOB_API_VERSION = "trainer.kubeflow.org/v1alpha1"
DEFAULT_RUNTIME = "torch-distributed"
# The replicated job, and its container, the torch runtimes train in.
TRAINER_NODE = "node"
PATCH_MANAGER = "airflow-gang.io/operator"
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
PATCHABLE_POD_SPEC = frozenset(
    {
        "affinity", "containers", "imagePullSecrets", "initContainers", "nodeSelector", "schedulingGates",
        "securityContext", "serviceAccountName", "terminationGracePeriodSeconds", "tolerations", "volumes",
    }
)  # fmt: skip
PATCHABLE_CONTAINER = frozenset({"name", "env", "securityContext", "volumeMounts"})
# "-node-0-" and the Job controller's "-<5 random characters>" around the rank.
_POD_NAME_EXTRA = len(f"-{TRAINER_NODE}-0-") + 6


class TrainJobSpec(BaseModel):
    """Everything about one TrainJob except its name and namespace (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    num_nodes: int = Field(default=1, ge=1)
    resources_per_node: dict[str, Quantity] = Field(default_factory=dict)
    num_proc_per_node: int | None = Field(default=None, ge=1)
    runtime: str = DEFAULT_RUNTIME
    runtime_kind: Literal["ClusterTrainingRuntime", "TrainingRuntime"] = "ClusterTrainingRuntime"
    queue: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    pod_template: dict[str, Any] | None = None
    runtime_patches: list[dict[str, Any]] = Field(default_factory=list)
    suspend: bool = False

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise validation.spec_error_from(
                error, list(TrainJobSpec.model_fields), "TrainJobOperator"
            ) from None

    _image = field_validator("image")(validation.check_image)
    _strings = field_validator("command", "args", mode="before")(validation.check_string_list)

    @field_validator("resources_per_node", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> dict[str, Quantity]:
        return validation.check_resource_list(value, "resources_per_node", gpus_positive=True)

    _labels = field_validator("labels")(pod_fields.check_labels)

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, value: dict[str, str]) -> dict[str, str]:
        checked = pod_fields.check_annotations(value)
        _refuse_ignored_queue(checked, "annotations", "the TrainJob")
        return checked

    _node_selector = field_validator("node_selector")(pod_fields.check_node_selector)
    _tolerations = field_validator("tolerations")(pod_fields.check_tolerations)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> dict[str, Any]:
        checked = validation.check_env(value)
        reserved = sorted(name for name in checked if name in RESERVED_ENV)
        if reserved:
            raise validation.error(
                f"env sets {', '.join(reserved)}, which the torch runtime sets itself (Trainer refuses "
                "the TrainJob): remove them; num_nodes and num_proc_per_node set the node and process counts",
                "env",
            )
        return checked

    @field_validator("runtime", "queue")
    @classmethod
    def _object_name(cls, value: str | None, info: Any) -> str | None:
        if value is not None and not is_dns_1123_subdomain(value):
            raise validation.error(
                f"{info.field_name}={value!r} is invalid: must be a lower-case DNS-1123 name, "
                f"e.g. {'torch-distributed' if info.field_name == 'runtime' else 'research'!r}",
                info.field_name,
            )
        return value

    @field_validator("pod_template")
    @classmethod
    def _pod_template(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - {"metadata", "spec"})
        metadata_fields = sorted(set(value.get("metadata") or {}) - {"labels", "annotations"})
        spec_fields = sorted(set(value.get("spec") or {}) - PATCHABLE_POD_SPEC)
        container_fields = sorted(
            {key for container in (value.get("spec") or {}).get("containers") or [] for key in container}
            - PATCHABLE_CONTAINER
        )
        _refuse_ignored_queue((value.get("metadata") or {}).get("annotations") or {}, "pod_template", "a pod")
        for found, where in (
            (unknown, "pod_template"),
            (metadata_fields, "pod_template.metadata"),
            (spec_fields, "pod_template.spec"),
            (container_fields, "pod_template.spec.containers[]"),
        ):
            if found:
                raise validation.error(
                    f"{where} sets {', '.join(found)}, which a TrainJob cannot patch into its runtime "
                    "(Trainer v2.3 allows pod labels and annotations and the pod fields "
                    f"{', '.join(sorted(PATCHABLE_POD_SPEC))}): set the rest in a TrainingRuntime of yours "
                    "and name it with runtime=",
                    "pod_template",
                )
        return value

    @field_validator("runtime_patches")
    @classmethod
    def _runtime_patches(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        managers = [patch.get("manager") for patch in value]
        if not all(isinstance(manager, str) and manager for manager in managers):
            raise validation.error(
                "runtime_patches: every entry needs a 'manager' naming who owns it, "
                "e.g. 'team.example.com/tuning'",
                "runtime_patches",
            )
        if PATCH_MANAGER in managers or len(set(managers)) != len(managers):
            raise validation.error(
                f"runtime_patches: managers must be unique and not {PATCH_MANAGER!r}, which this "
                "operator's own patch (node_selector, tolerations, pod_template) uses",
                "runtime_patches",
            )
        return value

    @model_validator(mode="after")
    def _patches_agree_with_the_queue(self) -> TrainJobSpec:
        """A patch of the user's comes after the operator's own, so its queue would win over
        ``queue`` (Trainer applies runtimePatches in order): refuse that rather than run elsewhere."""
        for index, patch in enumerate(self.runtime_patches):
            named = patches_queue([patch])
            if self.queue is not None and named is not None and named != self.queue:
                raise validation.error(
                    f"runtime_patches[{index}] (manager {patch.get('manager')!r}) sets {QUEUE_ANNOTATION}="
                    f"{named!r} but queue={self.queue!r}: Trainer applies runtime patches in order and "
                    "yours come after the operator's, so the patch's queue would win; drop the annotation "
                    f"from the patch, or pass queue={named!r}",
                    "runtime_patches",
                )
        return self

    @property
    def asked_queue(self) -> str | None:
        """The queue this job asks for: ``queue``, else the one a user's runtime patch names."""
        return self.queue if self.queue is not None else patches_queue(self.runtime_patches)

    @model_validator(mode="after")
    def _needs_an_image_or_a_command(self) -> TrainJobSpec:
        if self.image is None and self.command is None and self.runtime == DEFAULT_RUNTIME:
            raise validation.error(
                f"image is required with the default runtime {DEFAULT_RUNTIME!r}, whose image only holds "
                "PyTorch: pass image='registry/repo:tag' (or command= to run in the runtime's image)",
                "image",
            )
        return self

    def build_trainjob(
        self, name: str, namespace: str, extra_labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The TrainJob manifest; ``extra_labels`` (the task's identity) go on it and its pods."""
        check_trainjob_name(name, self.num_nodes)
        validation.check_namespace(namespace)
        labels = {**self.labels, **(extra_labels or {})}
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if labels:
            metadata["labels"] = labels
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        spec: dict[str, Any] = {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": self.runtime_kind,
                "name": self.runtime,
            },
            "trainer": self._trainer(),
        }
        patches = [*self._own_patch(extra_labels or {}), *self.runtime_patches]
        if patches:
            spec["runtimePatches"] = patches
        if self.suspend:
            spec["suspend"] = True
        return {"apiVersion": TRAINJOB_API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": spec}

    def _trainer(self) -> dict[str, Any]:
        trainer: dict[str, Any] = {"numNodes": self.num_nodes}
        for key, value in (("image", self.image), ("command", self.command), ("args", self.args)):
            if value is not None:
                trainer[key] = value
        if self.env:
            trainer["env"] = [validation.env_var(key, value) for key, value in self.env.items()]
        if self.resources_per_node:
            requests, limits = validation.requests_and_limits(self.resources_per_node)
            trainer["resourcesPerNode"] = {"requests": requests, **({"limits": limits} if limits else {})}
        if self.num_proc_per_node is not None:
            trainer["numProcPerNode"] = self.num_proc_per_node
        return trainer

    def _own_patch(self, identity: dict[str, str]) -> list[dict[str, Any]]:
        """The operator's runtime patch: the queue on the JobSet template, where Trainer's Volcano
        plugin reads it; identity labels, pod_template and node fields on the trainer's pods."""
        template: dict[str, Any] = {}
        if self.queue is not None:
            template["metadata"] = {"annotations": {QUEUE_ANNOTATION: self.queue}}
        pod = self._own_pod_patch(identity)
        if pod:
            replicated = {"name": TRAINER_NODE, "template": {"spec": {"template": pod}}}
            template["spec"] = {"replicatedJobs": [replicated]}
        if not template:
            return []
        return [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": template}}]

    def _own_pod_patch(self, identity: dict[str, str]) -> dict[str, Any]:
        pod: dict[str, Any] = {"metadata": {"labels": dict(identity)}} if identity else {}
        if self.pod_template:
            pod = deep_merge(pod, self.pod_template)
        if self.node_selector:
            pod = deep_merge(pod, {"spec": {"nodeSelector": self.node_selector}})
        if self.tolerations:
            spec = pod.setdefault("spec", {})
            spec["tolerations"] = [*(spec.get("tolerations") or []), *self.tolerations]
        return pod


def _refuse_ignored_queue(annotations: dict[str, Any], field: str, where: str) -> None:
    """Trainer reads the queue only from the runtime's JobSet template and runtimePatches: the
    annotation anywhere else would be silently ignored and the job run in another queue."""
    if QUEUE_ANNOTATION in annotations:
        queue = annotations[QUEUE_ANNOTATION]
        raise validation.error(
            f"{field} sets {QUEUE_ANNOTATION}={queue!r}, which Trainer v2.3 ignores on {where} (its "
            "Volcano plugin reads the queue only from the runtime's template and runtimePatches, so the "
            f"job would run in another queue): remove it and pass queue={queue!r}",
            field,
        )


def check_trainjob_name(name: str, num_nodes: int) -> None:
    """A TrainJob name must be DNS-1035 and leave room for its longest pod name."""
    limit = 63 - _POD_NAME_EXTRA - len(str(num_nodes - 1))
    if not isinstance(name, str) or not is_dns_1035_label(name, max_length=63):
        raise validation.error(
            f"job_name={name!r} is invalid: must be a lower-case DNS-1035 label (a-z, 0-9 and '-', starting "
            "with a letter, ending with a letter or digit), e.g. 'train-resnet'",
            "job_name",
        )
    if len(name) > limit:
        raise validation.error(
            f"job_name={name!r} is too long ({len(name)} characters): with {num_nodes} nodes the pod name "
            f"'{name}-{TRAINER_NODE}-0-{num_nodes - 1}-xxxxx' would exceed 63; "
            f"use at most {limit} characters",
            "job_name",
        )


def runtime_queue(runtime: dict[str, Any]) -> str | None:
    """The Volcano queue a runtime gives its TrainJobs: the annotation on its JobSet template
    (``spec.template.metadata.annotations``, where Trainer reads it; trainingruntime.go line 145),
    never the runtime object's own ``metadata.annotations``. None when it names none."""
    template = (runtime.get("spec") or {}).get("template") or {}
    queue = ((template.get("metadata") or {}).get("annotations") or {}).get(QUEUE_ANNOTATION)
    return str(queue) if queue else None
