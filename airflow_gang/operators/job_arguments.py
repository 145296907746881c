"""`GangJobArguments`: the job-description half of `PyTorchJobOperator`, validated before any API call.

Holds the arguments that describe the PyTorchJob and its gang (image, replicas, resources, queue,
gang mode, pod and job templates...), their templating, and `GangJobArguments.build_spec`,
which turns them into a `airflow_gang.spec.GangJobSpec` or raises `GangSpecError` naming the
field. The operator adds how to wait; `@task.pytorchjob` can build on the same base.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator

from airflow_gang.exceptions import GangSpecError
from airflow_gang.naming import identity_labels, job_name
from airflow_gang.spec import GangJobSpec
from airflow_gang.validation import positive_seconds

if TYPE_CHECKING:
    from airflow.sdk import Context

NOT_SET: Any = object()
JOB_ARGUMENTS = (
    "image",
    "command",
    "args",
    "env",
    "workers",
    "replica_resources",
    "nproc_per_node",
    "volcano_queue",
    "priority_class",
    "min_available",
    "min_resources",
    "gang_scheduling",
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
    "run_policy",
    "restart_policy",
)


class GangJobArguments(BaseOperator):
    """Base of operators that submit one gang job: its description, validated by `GangJobSpec`.

    Job arguments (``image`` ... ``restart_policy``) are those of `airflow_gang.spec.GangJobSpec`
    and are validated before anything is sent to the cluster; unset ones take its defaults
    (``workers=1``, ``queue="default"``, ``gang_scheduling="provider"``,
    ``restart_policy="OnFailure"``) or, with ``job_template``, the template's values.

    :param queue: the Volcano queue (default ``default``); also accepted as ``volcano_queue``.
        Stored as ``volcano_queue``: ``BaseOperator.queue`` is Airflow's executor queue, which
        ``executor_queue=`` sets. With ``.partial()``/``.expand()`` pass ``volcano_queue`` (a
        mapped task's ``queue`` would also route it on Celery).
    :param resources: per-replica resources (stored as ``replica_resources``:
        ``BaseOperator.resources`` is Airflow's own executor hint).
    :param admission_timeout: longest wait (timedelta or seconds) from submission until the gang
        is admitted; then the job is deleted and `GangAdmissionTimeout` raised. Default:
        ``[gang] default_admission_timeout`` (30 min). ``None`` waits forever.
    :param job_name: PyTorchJob/PodGroup name; default derived from the task instance try.
    :param namespace: default: the connection's namespace, else ``default``.
    :param kubernetes_conn_id: cncf ``kubernetes`` connection.
    """

    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "replica_resources",
        "volcano_queue",
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
        "job_name",
        "namespace",
        "kubernetes_conn_id",
        "workers",
        "min_available",
        "gang_scheduling",
        "checkpoint_dir",
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
        queue: str | None = None,
        volcano_queue: str | None = None,
        executor_queue: str | None = None,
        priority_class: str | None = None,
        min_available: int | None = None,
        min_resources: dict[str, Any] | None = None,
        gang_scheduling: str | None = None,
        admission_timeout: dt.timedelta | float | None = NOT_SET,
        job_name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
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
        if executor_queue is not None:
            kwargs["queue"] = executor_queue
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.workers = workers
        self.replica_resources = resources
        self.nproc_per_node = nproc_per_node
        # BaseOperator.queue is Airflow's executor queue (Celery routing): the Volcano queue
        # must live elsewhere or a task for queue "research" would wait for a Celery worker.
        self.volcano_queue = volcano_queue if volcano_queue is not None else queue
        self.priority_class = priority_class
        self.min_available = min_available
        self.min_resources = min_resources
        self.gang_scheduling = gang_scheduling
        self.admission_timeout = admission_timeout
        self.job_name = job_name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
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

    def build_spec(self) -> GangJobSpec:
        """The validated job description; raises `GangSpecError` before any API call."""
        # Only what was given: unset arguments take GangJobSpec's defaults (workers=1,
        # queue="default", gang_scheduling="provider", restart_policy="OnFailure") or, with a
        # job_template, the template's values.
        given = {name: getattr(self, name) for name in JOB_ARGUMENTS if getattr(self, name) is not None}
        if "volcano_queue" in given:
            given["queue"] = given.pop("volcano_queue")
        if "replica_resources" in given:
            given["resources"] = given.pop("replica_resources")
        return GangJobSpec(**given)

    def admission_timeout_seconds(self) -> float | None:
        return admission_timeout_seconds(self.admission_timeout)

    def identity(self, context: Context) -> tuple[str, dict[str, str]]:
        """The job's name and the identity labels of this task instance try."""
        return task_identity(context, self.job_name)


def admission_timeout_seconds(value: Any) -> float | None:
    """An ``admission_timeout`` argument in seconds: unset takes ``[gang] default_admission_timeout``."""
    if value is NOT_SET:
        configured = conf.get("gang", "default_admission_timeout", fallback="1800")
        return float(configured) if configured else None
    return positive_seconds(value, "admission_timeout")


def task_identity(context: Context, given_name: str | None) -> tuple[str, dict[str, str]]:
    """The job's name (``given_name``, else derived) and the identity labels of this task instance try."""
    ti = context["ti"]
    raw_index = getattr(ti, "map_index", None)
    map_index = -1 if raw_index is None else int(raw_index)
    try_number = int(getattr(ti, "try_number", 1) or 1)
    labels = identity_labels(ti.dag_id, ti.task_id, context["run_id"], map_index, try_number)
    name = given_name or job_name(ti.dag_id, ti.task_id, context["run_id"], map_index, try_number)
    return name, labels


def raise_for_choice(value: Any, field: str, choices: Sequence[str]) -> None:
    """`GangSpecError` naming ``field`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(choice) for choice in choices)
        raise GangSpecError(f"{field}={value!r} is invalid: use one of {options}", field=field)
