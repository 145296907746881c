"""`VolcanoJobOperator`: submit a Volcano Job (``batch.volcano.sh/v1alpha1``), wait for its gang's
admission, then for its end.

The flow and its guarantees are `GangJobOperator`'s, shared with the Kubeflow kinds. What is a
Volcano Job's own (docs/volcano-job.md), checked in `VolcanoJobOperator.prepare`:

- Volcano's Job API must be served, and its queue must exist and be Open;
- Volcano's job controller makes the PodGroup (``<job>-<uid>``, ``minMember`` = ``min_available``):
  a ``min_available`` smaller than the job is not one gang, so the task warns and counts the
  job admitted only once every pod is bound (gang mode ``disabled``);
- the job's own ``policies`` and ``max_retry`` restart it: a restart is reported as
  ``Restarting`` (not a failure); the task fails when Volcano gives up (``Failed``, or a policy's
  ``AbortJob``/``TerminateJob``), naming the failing task, its index and its exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import observation
from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.recipe import JobRecipe
from airflow_gang.kinds.vcjob.kind import VCJOB
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.operators.gang_job import SHARED_PARAMETERS, GangJobOperator

# Operator argument -> VolcanoJobSpec field, for the arguments given (unset ones take its defaults).
SPEC_FIELDS = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "workers": "workers",
    "replica_resources": "resources",
    "tasks": "tasks",
    "volcano_queue": "queue",
    "priority_class": "priority_class",
    "min_available": "min_available",
    "max_retry": "max_retry",
    "policies": "policies",
    "plugins": "plugins",
    "ttl_seconds_after_finished": "ttl_seconds_after_finished",
    "restart_policy": "restart_policy",
    "master_port": "master_port",
    "labels": "labels",
    "annotations": "annotations",
    "node_selector": "node_selector",
    "tolerations": "tolerations",
    "pod_template": "pod_template",
}
NO_GANG_WARNING = (
    "min_available=%s is smaller than the %s replicas of Volcano Job %s/%s: it is NOT one gang. Volcano "
    "places its pods in parts, and several such jobs on a shared pool can each hold part of it and wait for "
    "ever; the task counts it admitted only once every pod is bound (the admission timeout ends this wait "
    "otherwise)"
)


class VolcanoJobOperator(GangJobOperator):
    __doc__ = (
        """Run Volcano's own Job (``vcjob``) as one gang and wait for it.

    Every argument is validated (`VolcanoJobSpec`) before anything is sent to the cluster. By
    default the job is the PyTorch shorthand: a ``master`` task of one pod and a ``worker`` task of
    ``workers`` pods, wired by Volcano's ``pytorch`` plugin (``MASTER_ADDR``, ``MASTER_PORT``,
    ``WORLD_SIZE``, ``RANK``); ``tasks=`` gives any tasks instead. The result's ``replicas`` maps
    task to pods; a failure raises `VolcanoJobFailed` (a `PyTorchJobFailed`) naming the failing
    task, index, exit code and log tail.

    :param image: the image of every task (a task may give its own).
    :param command: the command of every task (a task may give its own).
    :param args: the command's arguments.
    :param env: extra environment of every pod (values may be `V1EnvVar`-style dicts).
    :param workers: pods of the shorthand's ``worker`` task (default 1); not with ``tasks``.
    :param resources: per-pod resources, e.g. ``{"cpu": "4", "nvidia.com/gpu": 1}`` (GPUs as both
        request and limit). Stored as ``replica_resources``: ``BaseOperator.resources`` is
        Airflow's own executor hint.
    :param tasks: the general form: a list of `VolcanoTask` (or dicts with ``name``,
        ``replicas``, and optionally ``image``, ``command``, ``args``, ``env``, ``resources``,
        ``min_available``, ``max_retry``, ``policies``, ``pod_template``).
    :param queue: the Volcano queue (default ``default``); also accepted as ``volcano_queue``.
        Stored as ``volcano_queue``: ``BaseOperator.queue`` is Airflow's executor queue, which
        ``executor_queue=`` sets.
    :param volcano_queue: the same as ``queue``.
    :param priority_class: the job's ``priorityClassName`` (its PodGroup's and pods').
    :param min_available: the gang's size (default: every pod). Smaller is not one gang: the task
        warns and waits for every pod to be bound.
    :param max_retry: how many times Volcano's ``RestartJob`` may restart the job before it fails
        it (Volcano's default 3).
    :param policies: the job's lifecycle policies, e.g. ``[{"event": "PodEvicted", "action":
        "RestartJob"}, {"event": "TaskCompleted", "action": "CompleteJob"}]`` (events, actions and
        ``exitCode`` as Volcano's webhook accepts them).
    :param plugins: Volcano job plugins (default ``pytorch``, ``svc`` and ``env`` for the
        shorthand; ``svc`` and ``env`` with ``tasks``).
    :param ttl_seconds_after_finished: Volcano deletes the finished job after this long.
    :param restart_policy: the pods' ``restartPolicy`` (default ``Never``, so a failed container
        fails its pod and Volcano's ``PodFailed`` policies see it).
    :param master_port: the ``pytorch`` plugin's port (default 23456).
    :param labels: labels of the job and its pods.
    :param annotations: annotations of the job.
    :param node_selector: pod field of every task.
    :param tolerations: pod field of every task.
    :param pod_template: a pod template merged under every task's.
    """
        + SHARED_PARAMETERS
    )

    job_kind: ClassVar[JobKind] = VCJOB
    ui_color = "#e8f5e9"

    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "workers",
        "replica_resources",
        "tasks",
        "priority_class",
        "min_available",
        "max_retry",
        "policies",
        "plugins",
        "labels",
        "annotations",
        "node_selector",
        "tolerations",
        "pod_template",
        *GangJobOperator.template_fields,
    )
    template_fields_renderers = {
        "env": "json",
        "replica_resources": "json",
        "tasks": "json",
        "policies": "json",
        "pod_template": "json",
    }

    def __init__(
        self,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: dict[str, Any] | None = None,
        workers: int | None = None,
        resources: dict[str, Any] | None = None,
        tasks: list[Any] | None = None,
        priority_class: str | None = None,
        min_available: int | None = None,
        max_retry: int | None = None,
        policies: list[dict[str, Any]] | None = None,
        plugins: dict[str, list[str]] | None = None,
        ttl_seconds_after_finished: int | None = None,
        restart_policy: str | None = None,
        master_port: int | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Any] | None = None,
        pod_template: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.workers = workers
        self.replica_resources = resources
        self.tasks = tasks
        self.priority_class = priority_class
        self.min_available = min_available
        self.max_retry = max_retry
        self.policies = policies
        self.plugins = plugins
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.restart_policy = restart_policy
        self.master_port = master_port
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.pod_template = pod_template

    def build_job_spec(self) -> VolcanoJobSpec:
        """The validated Volcano Job description; raises `GangSpecError` before any API call."""
        given = {field: getattr(self, name) for name, field in SPEC_FIELDS.items()}
        for field in ("workers", "min_available", "max_retry"):
            if isinstance(given.get(field), str) and str(given[field]).isdigit():
                given[field] = int(given[field])  # rendered from a template
        return VolcanoJobSpec(**{field: value for field, value in given.items() if value is not None})

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        hook.check_api(require_volcano=True, job_kind=self.job_kind)
        observation.check_queue(hook, spec.queue)
        recipe: JobRecipe = spec.recipe()
        if recipe.gang_scheduling == "disabled":
            self.log.warning(
                NO_GANG_WARNING, spec.min_member, spec.replica_count, namespace, self.job_name or "<derived>"
            )
        return recipe
