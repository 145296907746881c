"""`TrainJobArguments`: the job-description half of `TrainJobOperator`, validated before any API call.

Holds the arguments that describe a Kubeflow Trainer v2 TrainJob (runtime, nodes, resources per
node, image, command, queue, pod fields, runtime patches...), their templating, and
`TrainJobArguments.build_spec`, which turns them into a `airflow_gang.trainjob_spec.TrainJobSpec`
or raises `GangSpecError` naming the field. The operator adds how to wait (`GangWaitArguments`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_gang.exceptions import GangSpecError
from airflow_gang.operators.job_arguments import NOT_SET, admission_timeout_seconds, task_identity
from airflow_gang.trainjob_spec import TrainJobSpec

if TYPE_CHECKING:
    from airflow.sdk import Context

# Operator argument -> TrainJobSpec field, for the arguments given (unset ones take its defaults).
SPEC_FIELDS = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "num_nodes": "num_nodes",
    "resources_per_node": "resources_per_node",
    "num_proc_per_node": "num_proc_per_node",
    "runtime": "runtime",
    "runtime_kind": "runtime_kind",
    "volcano_queue": "queue",
    "labels": "labels",
    "annotations": "annotations",
    "node_selector": "node_selector",
    "tolerations": "tolerations",
    "pod_template": "pod_template",
    "runtime_patches": "runtime_patches",
    "suspend": "suspend",
}


class TrainJobArguments(BaseOperator):
    """Base of operators that submit one TrainJob: its description, validated by `TrainJobSpec`.

    :param runtime: the training runtime the TrainJob names (default ``torch-distributed``, a
        ClusterTrainingRuntime). A runtime with ``podGroupPolicy.volcano`` gang-schedules the job:
        Trainer's Volcano plugin makes its PodGroup. One without it does not (the task logs a
        warning and waits for every node's pod to be bound instead).
    :param runtime_kind: ``ClusterTrainingRuntime`` (default) or ``TrainingRuntime`` (namespaced).
    :param num_nodes: training nodes (pods); all are one gang. Default 1.
    :param resources_per_node: per node, e.g. ``{"cpu": "4", "nvidia.com/gpu": 1}`` (GPUs as
        both request and limit).
    :param num_proc_per_node: processes per node (torchrun's ``--nproc-per-node``).
    :param image: the trainer image (required with the default runtime, whose image only holds
        PyTorch, unless ``command`` runs in it).
    :param command: the trainer's command; ``args`` its arguments; ``env`` extra environment
        (never ``PET_*``: the torch runtime sets those).
    :param queue: the Volcano queue. It goes into the operator's runtime patch as the JobSet
        template annotation ``scheduling.volcano.sh/queue-name``, where Trainer's Volcano plugin
        reads it (not on the TrainJob's own metadata, which Trainer ignores: ``annotations=``
        naming it is refused); default the runtime template's queue, else ``default``. If the
        PodGroup appears in another queue than asked, the task fails at once with
        `GangQueueMismatch` and the job is deleted. Stored as ``volcano_queue``:
        ``BaseOperator.queue`` is Airflow's executor queue, which ``executor_queue=`` sets.
    :param priority_class: not settable from a TrainJob in Trainer v2.3 (its runtime patches
        cannot carry ``priorityClassName``); given, it is refused with the way to do it: a
        TrainingRuntime whose pod template sets it, named with ``runtime=``.
    :param labels: labels of the TrainJob and of its pods; ``annotations`` of the TrainJob (not
        the queue's: use ``queue``).
    :param node_selector: ``tolerations``, ``pod_template``: pod fields, patched into the
        runtime's trainer pods (`TrainJobSpec` lists which fields a runtime patch may set).
    :param runtime_patches: further ``runtimePatches`` entries, each with its own ``manager``,
        applied after the operator's own (one naming another queue than ``queue`` is refused).
    :param suspend: submit the TrainJob suspended (``spec.suspend``): no pods until it is resumed
        (`GangJobHook.set_job_suspended`); use with ``wait_for_completion=False``.
    :param admission_timeout: longest wait (timedelta or seconds) from submission until the gang
        is admitted; then the TrainJob is deleted and `GangAdmissionTimeout` raised. Default:
        ``[gang] default_admission_timeout`` (30 min). ``None`` waits forever.
    :param job_name: TrainJob (and PodGroup) name; default derived from the task instance try.
    :param namespace: default: the connection's namespace, else ``default``.
    :param kubernetes_conn_id: cncf ``kubernetes`` connection.
    """

    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "num_nodes",
        "resources_per_node",
        "num_proc_per_node",
        "runtime",
        "volcano_queue",
        "labels",
        "annotations",
        "node_selector",
        "tolerations",
        "pod_template",
        "runtime_patches",
        "job_name",
        "namespace",
        "kubernetes_conn_id",
        "checkpoint_dir",
    )
    template_fields_renderers = {
        "env": "json",
        "resources_per_node": "json",
        "pod_template": "json",
        "runtime_patches": "json",
    }

    def __init__(
        self,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: dict[str, Any] | None = None,
        num_nodes: int | None = None,
        resources_per_node: dict[str, Any] | None = None,
        num_proc_per_node: int | None = None,
        runtime: str | None = None,
        runtime_kind: str | None = None,
        queue: str | None = None,
        volcano_queue: str | None = None,
        executor_queue: str | None = None,
        priority_class: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Any] | None = None,
        pod_template: dict[str, Any] | None = None,
        runtime_patches: list[dict[str, Any]] | None = None,
        suspend: bool | None = None,
        admission_timeout: dt.timedelta | float | None = NOT_SET,
        job_name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        **kwargs: Any,
    ) -> None:
        if executor_queue is not None:
            kwargs["queue"] = executor_queue
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.num_nodes = num_nodes
        self.resources_per_node = resources_per_node
        self.num_proc_per_node = num_proc_per_node
        self.runtime = runtime
        self.runtime_kind = runtime_kind
        self.volcano_queue = volcano_queue if volcano_queue is not None else queue
        self.priority_class = priority_class
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.pod_template = pod_template
        self.runtime_patches = runtime_patches
        self.suspend = suspend
        self.admission_timeout = admission_timeout
        self.job_name = job_name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id

    def build_spec(self) -> TrainJobSpec:
        """The validated TrainJob description; raises `GangSpecError` before any API call."""
        if self.priority_class is not None:
            raise GangSpecError(
                f"priority_class={self.priority_class!r} cannot be set on a TrainJob: Trainer v2.3's "
                "runtime patches cannot carry priorityClassName, and Volcano takes the PodGroup's priority "
                "from the pod template. Create a TrainingRuntime whose trainer pod template sets "
                "priorityClassName and pass runtime=<its name>, runtime_kind='TrainingRuntime'",
                field="priority_class",
            )
        given = {
            field: getattr(self, name)
            for name, field in SPEC_FIELDS.items()
            if getattr(self, name) is not None
        }
        if isinstance(given.get("num_nodes"), str) and str(given["num_nodes"]).isdigit():
            given["num_nodes"] = int(given["num_nodes"])  # rendered from a template
        return TrainJobSpec(**given)

    def admission_timeout_seconds(self) -> float | None:
        return admission_timeout_seconds(self.admission_timeout)

    def identity(self, context: Context) -> tuple[str, dict[str, str]]:
        """The job's name and the identity labels of this task instance try."""
        return task_identity(context, self.job_name)
