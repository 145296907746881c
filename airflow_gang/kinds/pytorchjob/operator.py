"""`PyTorchJobOperator`: submit a gang-scheduled Kubeflow PyTorchJob, wait for admission, then for training.

The flow and its guarantees are `GangJobOperator`'s. What is PyTorchJob's own: its arguments
(validated by `GangJobSpec`), and `PyTorchJobOperator.prepare`: the training-operator's API must
be served (and Volcano's unless ``gang_scheduling="disabled"``), the Volcano queue must exist and
be Open, and in ``provider`` mode the provider creates the PodGroup itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import observation
from airflow_gang.jobs.recipe import JobRecipe
from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.pytorchjob.kind import PYTORCHJOB
from airflow_gang.kinds.pytorchjob.recipe import pytorchjob_recipe
from airflow_gang.kinds.pytorchjob.spec import GangJobSpec
from airflow_gang.operators.gang_job import SHARED_PARAMETERS, GangJobOperator

# Operator argument -> GangJobSpec field, for the arguments given (unset ones take its defaults).
SPEC_FIELDS = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "workers": "workers",
    "replica_resources": "resources",
    "nproc_per_node": "nproc_per_node",
    "volcano_queue": "queue",
    "priority_class": "priority_class",
    "min_available": "min_available",
    "min_resources": "min_resources",
    "gang_scheduling": "gang_scheduling",
    "labels": "labels",
    "annotations": "annotations",
    "node_selector": "node_selector",
    "tolerations": "tolerations",
    "volumes": "volumes",
    "volume_mounts": "volume_mounts",
    "service_account_name": "service_account_name",
    "image_pull_secrets": "image_pull_secrets",
    "pod_template": "pod_template",
    "job_template": "job_template",
    "run_policy": "run_policy",
    "restart_policy": "restart_policy",
}


class PyTorchJobOperator(GangJobOperator):
    __doc__ = (
        """Run a Kubeflow PyTorchJob gang-scheduled by Volcano and wait for it.

    Every argument is validated (`GangJobSpec`) before anything is sent to the cluster; unset job
    arguments take its defaults or, with ``job_template``, the template's values.

    :param image: the training image of every replica.
    :param command: the replicas' command (the image's entrypoint if unset); ``args`` its arguments.
    :param args: the command's arguments.
    :param env: extra environment of every replica (values may be `V1EnvVar`-style dicts).
    :param workers: Worker replicas besides the one Master (default 1).
    :param resources: per-replica resources, e.g. ``{"cpu": "4", "nvidia.com/gpu": 1}`` (GPUs as
        both request and limit). Stored as ``replica_resources``: ``BaseOperator.resources`` is
        Airflow's own executor hint.
    :param nproc_per_node: processes per replica (torchrun's ``--nproc-per-node``).
    :param queue: the Volcano queue (default ``default``); also accepted as ``volcano_queue``.
        Stored as ``volcano_queue``: ``BaseOperator.queue`` is Airflow's executor queue, which
        ``executor_queue=`` sets. With ``.partial()``/``.expand()`` pass ``volcano_queue`` (a
        mapped task's ``queue`` would also route it on Celery).
    :param volcano_queue: the same as ``queue``.
    :param priority_class: the PodGroup's and pods' ``priorityClassName`` (Volcano orders and
        preempts by it).
    :param min_available: the gang's ``minMember`` (default: every replica); fewer makes an
        elastic gang that starts with that many.
    :param min_resources: the gang's ``minResources`` (default: the sum of its first
        ``min_available`` replicas' requests, Master first).
    :param gang_scheduling: ``provider`` (default: the provider creates the PodGroup),
        ``training-operator`` (the training-operator's ``--gang-scheduler-name=volcano`` does) or
        ``disabled`` (no gang: the deadlock the provider exists to prevent).
    :param labels: labels of the job and its pods; ``annotations`` likewise.
    :param annotations: annotations of the job and its pods.
    :param node_selector: pod field of every replica; so are ``tolerations``, ``volumes``,
        ``volume_mounts``, ``service_account_name`` and ``image_pull_secrets``.
    :param tolerations: pod field of every replica.
    :param volumes: pod field of every replica.
    :param volume_mounts: the training container's volume mounts.
    :param service_account_name: pod field of every replica.
    :param image_pull_secrets: names of the pull secrets of every replica.
    :param pod_template: a pod template merged under every replica (strategic-merge style).
    :param job_template: a PyTorchJob manifest (dict, YAML text or a path) the arguments complete.
    :param run_policy: the job's ``runPolicy`` (``clean_pod_policy``, ``backoff_limit``,
        ``active_deadline_seconds``, ``ttl_seconds_after_finished``, ``suspend``).
    :param restart_policy: the replicas' restart policy (default ``OnFailure``).
    """
        + SHARED_PARAMETERS
    )

    job_kind: ClassVar[JobKind] = PYTORCHJOB
    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "replica_resources",
        "priority_class",
        "labels",
        "annotations",
        "node_selector",
        "tolerations",
        "volumes",
        "volume_mounts",
        "service_account_name",
        "image_pull_secrets",
        "pod_template",
        "job_template",
        "workers",
        "min_available",
        "gang_scheduling",
        *GangJobOperator.template_fields,
    )
    template_fields_renderers = {
        "env": "json",
        "replica_resources": "json",
        "pod_template": "json",
        "job_template": "yaml",
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
        nproc_per_node: int | str | None = None,
        priority_class: str | None = None,
        min_available: int | None = None,
        min_resources: dict[str, Any] | None = None,
        gang_scheduling: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Any] | None = None,
        volumes: list[Any] | None = None,
        volume_mounts: list[Any] | None = None,
        service_account_name: str | None = None,
        image_pull_secrets: list[str] | None = None,
        pod_template: dict[str, Any] | None = None,
        job_template: dict[str, Any] | str | None = None,
        run_policy: dict[str, Any] | None = None,
        restart_policy: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.workers = workers
        self.replica_resources = resources
        self.nproc_per_node = nproc_per_node
        self.priority_class = priority_class
        self.min_available = min_available
        self.min_resources = min_resources
        self.gang_scheduling = gang_scheduling
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.volumes = volumes
        self.volume_mounts = volume_mounts
        self.service_account_name = service_account_name
        self.image_pull_secrets = image_pull_secrets
        self.pod_template = pod_template
        self.job_template = job_template
        self.run_policy = run_policy
        self.restart_policy = restart_policy

    def build_job_spec(self) -> GangJobSpec:
        # Only what was given: unset arguments take GangJobSpec's defaults (workers=1,
        # queue="default", gang_scheduling="provider", restart_policy="OnFailure") or, with a
        # job_template, the template's values.
        given = {field: getattr(self, name) for name, field in SPEC_FIELDS.items()}
        return GangJobSpec(**{field: value for field, value in given.items() if value is not None})

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        recipe = pytorchjob_recipe(spec)
        gang = recipe.gang_scheduling
        hook.check_api(require_volcano=gang != "disabled", job_kind=self.job_kind)
        if gang != "disabled":
            observation.check_queue(hook, spec.effective_queue)
        return recipe

    @property
    def gang_mode(self) -> str | None:
        return self._gang or self.gang_scheduling
