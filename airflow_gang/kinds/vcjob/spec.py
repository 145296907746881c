"""Typed, pure description of a Volcano Job (``batch.volcano.sh/v1alpha1``), and the only place
its manifest is built.

`VolcanoJobSpec` is what `VolcanoJobOperator` takes. Two ways to say the tasks:

- the PyTorch shorthand: ``image``, ``command``, ``workers``... make a ``master`` task of one pod
  and a ``worker`` task of ``workers`` pods, wired by Volcano's ``pytorch`` plugin
  (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``) with its ``svc`` and ``env``;
- the general form: ``tasks=[VolcanoTask(...), ...]`` (or dicts), each with its own replicas
  and, where it differs from the job's, image, command, resources, pod template and policies.

Constructing it validates what Volcano's admission webhook would refuse
(``pkg/webhooks/admission/jobs/validate``: policy events and actions, ``event`` with
``exitCode``, duplicate events, ``*`` with others, unique task names, ``minAvailable`` within the
job), and what would be accepted but cannot work (a pod name past 63 characters, the ``pytorch``
plugin without its ``master`` task). Every problem raises `GangSpecError` naming the field.

The pods' ``restartPolicy`` defaults to ``Never``: a failed container then fails its pod, which
is what a ``PodFailed`` policy acts on (with ``OnFailure`` the kubelet restarts it in place and
Volcano never hears of it).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airflow_gang.kinds.recipe import JobRecipe
from airflow_gang.kinds.vcjob.kind import GROUP, MASTER, VCJOB, VERSION, WORKER
from airflow_gang.model import pod_fields, validation
from airflow_gang.model.k8s_objects import deep_merge, ordered
from airflow_gang.model.naming import is_dns_1123_label
from airflow_gang.model.quantity import Quantity

VCJOB_API_VERSION = f"{GROUP}/{VERSION}"
CONTAINER_NAME = "pytorch"
DEFAULT_PORT = 23456
# What Volcano's webhook lets a policy say (validate/util.go `policyEventMap`/`policyActionMap`).
POLICY_EVENTS = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
POLICY_ACTIONS = (
    "AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", "CompleteJob",
    "ResumeJob",
)  # fmt: skip
# The job plugins Volcano v1.16's controller knows (pkg/controllers/job/plugins/factory.go).
PLUGINS = ("env", "svc", "ssh", "pytorch", "tensorflow", "mpi", "hcclrank", "ray")
RestartPolicy = Literal["Never", "OnFailure", "Always"]


class LifecyclePolicy(BaseModel):
    """One Volcano lifecycle policy: on ``event`` (or ``events``, or a container's ``exit_code``),
    take ``action`` (e.g. ``{"event": "PodFailed", "action": "RestartJob"}``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    action: str
    event: str | None = None
    events: list[str] = Field(default_factory=list)
    exit_code: int | None = Field(default=None, alias="exitCode")
    timeout: str | None = None

    def event_list(self) -> list[str]:
        return list(dict.fromkeys([*self.events, *([self.event] if self.event else [])]))

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"action": self.action}
        if self.event:
            wire["event"] = self.event
        if self.events:
            wire["events"] = list(self.events)
        if self.exit_code is not None:
            wire["exitCode"] = self.exit_code
        if self.timeout:
            wire["timeout"] = self.timeout
        return wire


def check_policies(policies: list[LifecyclePolicy], field: str) -> list[LifecyclePolicy]:
    """Volcano's webhook rules for a list of policies (validate/util.go ``validatePolicies``)."""
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for index, policy in enumerate(policies):
        where = f"{field}[{index}]"
        if policy.action not in POLICY_ACTIONS:
            raise validation.error(
                f"{where}: action {policy.action!r} is not one Volcano accepts: "
                f"use one of {', '.join(POLICY_ACTIONS)}",
                field,
            )
        events = policy.event_list()
        if events and policy.exit_code is not None:
            raise validation.error(
                f"{where}: give an event or an exit_code, not both (Volcano refuses the job: "
                "'must not specify event and exitCode simultaneously')",
                field,
            )
        if not events and policy.exit_code is None:
            raise validation.error(f"{where}: give an event (e.g. 'PodFailed') or an exit_code", field)
        for event in events:
            if event not in POLICY_EVENTS:
                raise validation.error(
                    f"{where}: event {event!r} is not one Volcano accepts: "
                    f"use one of {', '.join(POLICY_EVENTS)}",
                    field,
                )
            if event in seen_events:
                raise validation.error(
                    f"{where}: event {event!r} is already handled by an earlier policy", field
                )
            seen_events.add(event)
        if policy.exit_code is not None:
            if policy.exit_code == 0:
                raise validation.error(
                    f"{where}: exit_code 0 is success, not a failure: use a non-zero code", field
                )
            if policy.exit_code in seen_codes:
                raise validation.error(f"{where}: exit_code {policy.exit_code} is already handled", field)
            seen_codes.add(policy.exit_code)
    if "*" in seen_events and len(seen_events) > 1:
        raise validation.error(f"{field}: a policy for event '*' must be the only event policy", field)
    return policies


class VolcanoTask(BaseModel):
    """One task of a Volcano Job: ``replicas`` pods ``<job>-<name>-<index>``. Unset fields take the
    job's (``image``, ``command``, ``args``, ``env``, ``resources``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    replicas: int = Field(default=1, ge=1)
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    resources: dict[str, Quantity] = Field(default_factory=dict)
    min_available: int | None = Field(default=None, ge=0)
    max_retry: int | None = Field(default=None, ge=0)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    pod_template: dict[str, Any] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_dns_1123_label(value):
            raise validation.error(
                f"tasks: name {value!r} is invalid: must be a lower-case DNS-1123 label, e.g. 'worker'",
                "tasks",
            )
        return value

    _image = field_validator("image")(validation.check_image)
    _strings = field_validator("command", "args", mode="before")(validation.check_string_list)
    _env = field_validator("env", mode="before")(validation.check_env)
    _resources = field_validator("resources", mode="before")(validation.check_resources)

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: list[LifecyclePolicy], info: Any) -> list[LifecyclePolicy]:
        return check_policies(value, "tasks[].policies")


class VolcanoJobSpec(BaseModel):
    """Everything about one Volcano Job except its name and namespace (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    workers: int | None = Field(default=None, ge=0)
    resources: dict[str, Quantity] = Field(default_factory=dict)
    tasks: list[VolcanoTask] | None = None
    queue: str = "default"
    priority_class: str | None = None
    min_available: int | None = None
    max_retry: int = Field(default=3, ge=0)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    plugins: dict[str, list[str]] | None = None
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    restart_policy: RestartPolicy = "Never"
    master_port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    pod_template: dict[str, Any] | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise validation.spec_error_from(
                error, list(VolcanoJobSpec.model_fields), "VolcanoJobOperator"
            ) from None

    _image = field_validator("image")(validation.check_image)
    _strings = field_validator("command", "args", mode="before")(validation.check_string_list)
    _env = field_validator("env", mode="before")(validation.check_env)
    _resources = field_validator("resources", mode="before")(validation.check_resources)
    _object_names = field_validator("queue", "priority_class")(validation.check_object_name)
    _labels = field_validator("labels")(pod_fields.check_labels)
    _annotations = field_validator("annotations")(pod_fields.check_annotations)
    _node_selector = field_validator("node_selector")(pod_fields.check_node_selector)
    _tolerations = field_validator("tolerations")(pod_fields.check_tolerations)

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: list[LifecyclePolicy]) -> list[LifecyclePolicy]:
        return check_policies(value, "policies")

    @field_validator("plugins")
    @classmethod
    def _plugins(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        unknown = sorted(set(value or {}) - set(PLUGINS))
        if unknown:
            raise validation.error(
                f"plugins: {', '.join(unknown)} is not a Volcano job plugin: use {', '.join(PLUGINS)}",
                "plugins",
            )
        return value

    @model_validator(mode="after")
    def _check_tasks(self) -> VolcanoJobSpec:
        if self.tasks is not None:
            if self.workers is not None:
                raise validation.error(
                    "workers is the master/worker shorthand: with tasks=, give each task its replicas",
                    "workers",
                )
            if not self.tasks:
                raise validation.error(
                    "tasks is empty: give at least one task, e.g. [{'name': 'worker'}]", "tasks"
                )
            names = [task.name for task in self.tasks]
            duplicated = sorted({name for name in names if names.count(name) > 1})
            if duplicated:
                raise validation.error(
                    f"tasks: duplicate task name {duplicated[0]!r}: names must be unique", "tasks"
                )
        for task in self.effective_tasks:
            if (task.image or self.image) is None and not _template_has_image(
                task.pod_template or self.pod_template
            ):
                raise validation.error(
                    f"image is required: task {task.name!r} has none (pass image='registry/repo:tag', "
                    "or give the task its own)",
                    "image",
                )
            if task.min_available is not None and task.min_available > task.replicas:
                raise validation.error(
                    f"tasks: task {task.name!r} has min_available={task.min_available} but only "
                    f"{task.replicas} replicas",
                    "tasks",
                )
        total = self.replica_count
        if self.min_available is not None and not 1 <= self.min_available <= total:
            raise validation.error(
                f"min_available={self.min_available} is invalid: must be between 1 and the job's {total} "
                "replicas; leave it unset to require the whole gang",
                "min_available",
            )
        plugins = self.effective_plugins
        if "pytorch" in plugins:
            master = _plugin_option(plugins["pytorch"], "master", MASTER)
            if master not in {task.name for task in self.effective_tasks}:
                raise validation.error(
                    f"plugins: the pytorch plugin's master task {master!r} is not among the tasks "
                    f"({', '.join(task.name for task in self.effective_tasks)}): name one task {master!r}, "
                    "or pass plugins without 'pytorch'",
                    "plugins",
                )
        return self

    # --- derived values -------------------------------------------------------------------

    @property
    def effective_tasks(self) -> list[VolcanoTask]:
        """The tasks as given, or the shorthand's ``master`` (1) and ``worker`` (``workers``)."""
        if self.tasks is not None:
            return list(self.tasks)
        workers = 1 if self.workers is None else self.workers
        tasks = [VolcanoTask(name=MASTER, replicas=1)]
        if workers:
            tasks.append(VolcanoTask(name=WORKER, replicas=workers))
        return tasks

    @property
    def replica_count(self) -> int:
        return sum(task.replicas for task in self.effective_tasks)

    @property
    def min_member(self) -> int:
        """The gang: ``min_available``, else every replica."""
        return self.min_available if self.min_available is not None else self.replica_count

    @property
    def gang_scheduling(self) -> str:
        """``volcano`` when the gang is the whole job; ``disabled`` when ``min_available`` is
        smaller (Volcano then places the job's pods in parts)."""
        return "volcano" if self.min_member >= self.replica_count else "disabled"

    @property
    def effective_plugins(self) -> dict[str, list[str]]:
        """``plugins`` as given; by default the shorthand's ``pytorch`` (with ``svc`` and ``env``),
        and ``svc`` and ``env`` for tasks given in the general form."""
        if self.plugins is not None:
            return {name: list(options) for name, options in self.plugins.items()}
        if self.tasks is None:
            pytorch = [f"--master={MASTER}", f"--worker={WORKER}", f"--port={self.master_port}"]
            return {"pytorch": pytorch, "svc": [], "env": []}
        return {"svc": [], "env": []}

    # --- the manifest ---------------------------------------------------------------------

    def recipe(self) -> JobRecipe:
        """What submission builds from this spec (`airflow_gang.kinds.recipe`)."""
        return JobRecipe(
            VCJOB,
            self.gang_scheduling,
            self.queue,
            self.build_vcjob,
            expected_queue=self.queue,
        )

    def build_vcjob(
        self, name: str, namespace: str, extra_labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The Volcano Job manifest; ``extra_labels`` (the task's identity) go on it and its pods."""
        check_vcjob_name(name, self.effective_tasks)
        validation.check_namespace(namespace)
        labels = {**self.labels, **(extra_labels or {})}
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if labels:
            metadata["labels"] = labels
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "minAvailable": self.min_member,
            "queue": self.queue,
            "maxRetry": self.max_retry,
            "plugins": self.effective_plugins,
            "tasks": [self._task(task, extra_labels or {}) for task in self.effective_tasks],
        }
        if self.policies:
            spec["policies"] = [policy.to_wire() for policy in self.policies]
        if self.priority_class is not None:
            spec["priorityClassName"] = self.priority_class
        if self.ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        return {"apiVersion": VCJOB_API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}

    def _task(self, task: VolcanoTask, identity: dict[str, str]) -> dict[str, Any]:
        template = copy.deepcopy(self.pod_template) if self.pod_template else {}
        if task.pod_template:
            template = deep_merge(template, task.pod_template)
        metadata = template.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), **self.labels, **identity}
        if not metadata["labels"]:
            del metadata["labels"]
        pod = template.setdefault("spec", {})
        pod["containers"] = self._containers(task, pod.get("containers") or [])
        pod.setdefault("restartPolicy", self.restart_policy)
        if self.node_selector:
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **self.node_selector}
        if self.tolerations:
            pod["tolerations"] = [*(pod.get("tolerations") or []), *self.tolerations]
        if self.priority_class is not None:
            pod.setdefault("priorityClassName", self.priority_class)
        wire: dict[str, Any] = {"name": task.name, "replicas": task.replicas}
        if task.min_available is not None:
            wire["minAvailable"] = task.min_available
        if task.max_retry is not None:
            wire["maxRetry"] = task.max_retry
        if task.policies:
            wire["policies"] = [policy.to_wire() for policy in task.policies]
        wire["template"] = ordered(template, ("metadata", "spec"))
        return wire

    def _containers(self, task: VolcanoTask, containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        containers = copy.deepcopy(containers)
        main = next((c for c in containers if c.get("name") == CONTAINER_NAME), None)
        if main is None:
            main = {"name": CONTAINER_NAME}
            containers.insert(0, main)
        image = task.image or self.image
        if image is not None:
            main["image"] = image
        for key, value in (("command", task.command or self.command), ("args", task.args or self.args)):
            if value is not None:
                main[key] = list(value)
        env = {**self.env, **task.env}
        if env:
            kept = [e for e in main.get("env", []) if e.get("name") not in env]
            main["env"] = kept + [validation.env_var(key, value) for key, value in env.items()]
        resources = {**self.resources, **task.resources}
        if resources:
            requests, limits = validation.requests_and_limits(resources)
            main["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
        return containers


def _template_has_image(template: dict[str, Any] | None) -> bool:
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    return any(c.get("name") == CONTAINER_NAME and c.get("image") for c in containers)


def _plugin_option(options: list[str], key: str, default: str) -> str:
    """``--master=head`` → ``head`` (the plugin's ``flag`` parsing of its arguments)."""
    for option in options:
        flag, _, value = option.lstrip("-").partition("=")
        if flag == key and value:
            return value
    return default


def check_vcjob_name(name: str, tasks: list[VolcanoTask]) -> None:
    """A Volcano Job's name is a DNS-1123 label that leaves room for its longest pod name
    (``<job>-<task>-<index>``, a pod's hostname: at most 63)."""
    if not isinstance(name, str) or not is_dns_1123_label(name):
        raise validation.error(
            f"job_name={name!r} is invalid: must be a lower-case DNS-1123 label (a-z, 0-9 and '-'), "
            "e.g. 'train-resnet'",
            "job_name",
        )
    longest = max((f"{name}-{task.name}-{task.replicas - 1}" for task in tasks), key=len)
    if len(longest) > 63:
        allowed = 63 - (len(longest) - len(name))
        raise validation.error(
            f"job_name={name!r} is too long: the pod name {longest!r} would exceed 63 characters; "
            f"use at most {allowed}",
            "job_name",
        )
