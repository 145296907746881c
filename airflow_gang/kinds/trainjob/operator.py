"""`TrainJobOperator`: submit a Kubeflow Trainer v2 TrainJob gang-scheduled by Volcano, wait for it.

The flow and its guarantees are `GangJobOperator`'s, shared with `PyTorchJobOperator`: validated
before any API call, reattach or submit by identity labels, admission observed on the PodGroup,
admission timeout → delete → `GangAdmissionTimeout`, deferrable on the triggerer's shared watch
cache, outages ridden out, ``on_kill``, the orphan reaper, rank 0's log in the task log.

What is TrainJob's own (docs/trainer-v2.md), checked in `TrainJobOperator.prepare` before submitting:

- Kubeflow Trainer v2 must be served, and the named runtime must exist;
- the runtime decides the gang: with ``podGroupPolicy.volcano`` Trainer's Volcano plugin makes
  the PodGroup (named after the TrainJob, ``minMember`` = every node), so the gang mode is
  ``trainer`` and Volcano and the queue are checked like a PyTorchJob's; without a
  podGroupPolicy it is ``disabled`` (the task warns: such jobs deadlock a shared pool, and their
  admission timeout says so); a ``coscheduling`` policy is refused (this provider follows
  Volcano's PodGroups);
- the queue is where Trainer reads it (`airflow_gang.kinds.trainjob.spec`): ``queue=`` (or a user's
  runtime patch naming one), else the annotation ``scheduling.volcano.sh/queue-name`` on the
  runtime's JobSet template (``spec.template.metadata.annotations``; not the runtime's own
  metadata), else ``default``. It must exist and be Open, and goes into the operator's runtime
  patch. A queue the task asked for (given or the runtime's) is checked again when the PodGroup
  appears: in another queue (a webhook such as Volcano's namespace default moved it, or a Trainer
  older than v2.3 ignored the patch) the task fails at once with `GangQueueMismatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow_gang.exceptions import GangSpecError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import observation
from airflow_gang.kinds.base import JobKind
from airflow_gang.kinds.recipe import JobRecipe
from airflow_gang.kinds.trainjob.kind import TRAINJOB
from airflow_gang.kinds.trainjob.recipe import runtime_gang_mode, trainjob_recipe
from airflow_gang.kinds.trainjob.spec import TrainJobSpec, runtime_queue
from airflow_gang.operators.gang_job import SHARED_PARAMETERS, GangJobOperator

JsonDict = dict[str, Any]
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
__all__ = ["TrainJobOperator", "runtime_gang_mode"]
NO_GANG_WARNING = (
    "runtime %r has no podGroupPolicy: TrainJob %s/%s is NOT gang-scheduled. Its nodes' pods are placed one "
    "by one, and several such jobs on a shared pool can each hold part of it and wait for ever; use a "
    "runtime with podGroupPolicy.volcano (the admission timeout ends this wait otherwise)"
)


class TrainJobOperator(GangJobOperator):
    __doc__ = (
        """Run a Kubeflow Trainer v2 TrainJob gang-scheduled by Volcano and wait for it.

    Every argument is validated (`TrainJobSpec`) before anything is sent to the cluster. The
    result's ``replicas`` is ``{"Node": num_nodes}``; a failure raises `TrainJobFailed` (a
    `PyTorchJobFailed`) naming the failing node's rank, its exit code and its log tail.

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
    :param command: the trainer's command.
    :param args: the command's arguments.
    :param env: extra environment of every node (never ``PET_*``: the torch runtime sets those).
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
    :param labels: labels of the TrainJob and of its pods.
    :param annotations: annotations of the TrainJob (not the queue's: use ``queue``).
    :param node_selector: a pod field, patched into the runtime's trainer pods like
        ``tolerations`` and ``pod_template`` (`TrainJobSpec` lists which fields a runtime patch
        may set).
    :param tolerations: a pod field (see ``node_selector``).
    :param pod_template: pod fields (see ``node_selector``).
    :param runtime_patches: further ``runtimePatches`` entries, each with its own ``manager``,
        applied after the operator's own (one naming another queue than ``queue`` is refused).
    :param suspend: submit the TrainJob suspended (``spec.suspend``): no pods until it is resumed
        (`GangJobHook.set_job_suspended`); use with ``wait_for_completion=False``.
    :param volcano_queue: the same as ``queue``.
    """
        + SHARED_PARAMETERS
    )

    job_kind: ClassVar[JobKind] = TRAINJOB
    ui_color = "#e4f0ff"

    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "num_nodes",
        "resources_per_node",
        "num_proc_per_node",
        "runtime",
        "labels",
        "annotations",
        "node_selector",
        "tolerations",
        "pod_template",
        "runtime_patches",
        *GangJobOperator.template_fields,
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
        priority_class: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Any] | None = None,
        pod_template: dict[str, Any] | None = None,
        runtime_patches: list[dict[str, Any]] | None = None,
        suspend: bool | None = None,
        **kwargs: Any,
    ) -> None:
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
        self.priority_class = priority_class
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.pod_template = pod_template
        self.runtime_patches = runtime_patches
        self.suspend = suspend

    def build_job_spec(self) -> TrainJobSpec:
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

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        hook.check_api(job_kind=self.job_kind)
        runtime = hook.get_training_runtime(spec.runtime, spec.runtime_kind, namespace)
        if runtime is None:
            where = "cluster" if spec.runtime_kind == "ClusterTrainingRuntime" else f"namespace {namespace!r}"
            raise GangSpecError(
                f"runtime={spec.runtime!r}: no {spec.runtime_kind} of that name in the {where}; pass an "
                f"existing one (kubectl get {spec.runtime_kind.lower()}s) or install Trainer's runtimes",
                field="runtime",
            )
        gang = runtime_gang_mode(runtime)
        if gang == "disabled":
            self.log.warning(NO_GANG_WARNING, spec.runtime, namespace, self.job_name or "<derived>")
            return trainjob_recipe(spec, gang, None)
        hook.check_api(require_volcano=True, job_kind=self.job_kind)
        asked = spec.asked_queue or runtime_queue(runtime)
        queue = asked or "default"
        observation.check_queue(hook, queue)
        # The queue goes into the operator's runtime patch, where Trainer reads it, and so the
        # TrainJob names it for its result and the Gang jobs page. Only a queue asked for (given
        # or the runtime's) is checked on the PodGroup: a defaulted one may be moved on purpose
        # by Volcano's webhook to the namespace's queue.
        return trainjob_recipe(spec.model_copy(update={"queue": queue}), gang, queue, expected_queue=asked)
