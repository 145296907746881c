"""Kubeflow Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``): `TRAINJOB`.

What a TrainJob's objects say otherwise than a PyTorchJob's (docs/trainer-v2.md):

- it names a runtime and ``spec.trainer.numNodes``; its one replica type is ``Node``, and its
  pods come from a JobSet's indexed Job (``<job>-node-0-<rank>-<random>``, the rank in the label
  ``batch.kubernetes.io/job-completion-index``), counted from the pods themselves (its
  ``jobsStatus`` counts Jobs, not pods);
- its conditions are metav1 ones, ``Complete``/``Failed``/``Suspended``, with no ``Running`` at all;
- its gang mode is its runtime's (``podGroupPolicy.volcano``: ``trainer``, none: ``disabled``),
  and Trainer's Volcano plugin makes, owns and re-creates its PodGroup;
- its queue is where Trainer reads it, the runtime patches (`patches_queue`);
- Trainer never checks ``deletionTimestamp`` and re-applies every child the garbage collector
  removes while a TrainJob waits in a foreground deletion: it is deleted in the background and
  its deletion is confirmed once its JobSet and Jobs are gone too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from airflow_gang.kinds.base import (
    FAILED,
    QUEUE_ANNOTATION,
    SUCCEEDED,
    SUSPENDED,
    VOLCANO_SCHEDULER,
    ApiFacts,
    ChildResource,
    JobKind,
    labels_of,
    true_conditions,
)
from airflow_gang.model.quantity import parse_quantity

if TYPE_CHECKING:
    from airflow_gang.exceptions import PyTorchJobFailed

JsonDict = dict[str, Any]
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
RANK_LABEL = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
NODE = "Node"


def patches_queue(patches: Iterable[JsonDict]) -> str | None:
    """The Volcano queue a TrainJob's ``runtimePatches`` name, as Trainer v2.3 applies them: each
    patch's ``trainingRuntimeSpec.template.metadata.annotations`` over the runtime's JobSet
    template annotations, in list order, so the last patch naming a queue wins (kubeflow/trainer
    v2.3.0 ``pkg/runtime/core/trainingruntime.go`` lines 145-161). None when no patch names one."""
    queue: str | None = None
    for patch in patches:
        template = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        named = ((template.get("metadata") or {}).get("annotations") or {}).get(QUEUE_ANNOTATION)
        if named is not None:
            queue = str(named)
    return queue


def runtime_policy_mode(runtime: JsonDict) -> str | None:
    """The gang mode a runtime gives its TrainJobs: ``trainer`` with Volcano's ``podGroupPolicy``
    (Trainer's Volcano plugin makes the PodGroup), ``disabled`` without a policy, None for another
    policy (``coscheduling``: PodGroups that are not Volcano's)."""
    policy = (runtime.get("spec") or {}).get("podGroupPolicy") or {}
    if not policy:
        return "disabled"
    return "trainer" if "volcano" in policy else None


@dataclass(frozen=True)
class TrainJobKind(JobKind):
    """Kubeflow Trainer v2's TrainJob (see the module docstring for what differs)."""

    @property
    def failure_error(self) -> type[PyTorchJobFailed]:
        from airflow_gang.exceptions import TrainJobFailed  # see JobKind.failure_error

        return TrainJobFailed

    def leader_pod(self, job_name: str, pods: Iterable[JsonDict] = ()) -> str | None:
        """Rank 0's pod among ``pods`` (the newest, if its Job replaced one), or None: its name
        ends in characters the Job controller picks, so it can only be found, not derived."""
        leaders = [
            pod
            for pod in pods
            if labels_of(pod).get(self.pod_job_label) == job_name
            and labels_of(pod).get(REPLICATED_JOB_LABEL, self.leader) == self.leader
            and labels_of(pod).get(self.replica_index_label) == "0"
        ]
        if not leaders:
            return None
        newest = max(leaders, key=lambda pod: str((pod.get("metadata") or {}).get("creationTimestamp") or ""))
        return str(newest["metadata"]["name"])

    def replica_specs(self, job: JsonDict) -> dict[str, JsonDict]:
        """The trainer's nodes as one replica type (the runtime holds the template)."""
        trainer = (job.get("spec") or {}).get("trainer") or {}
        if "numNodes" not in trainer:
            return {}
        return {NODE: {"replicas": int(trainer["numNodes"])}}

    def replica_counts(self, job: JsonDict, gang_size: int = 0) -> dict[str, int]:
        """``{"Node": 2}``; a TrainJob taking its node count from its runtime: ``gang_size``."""
        counts = super().replica_counts(job)
        if not counts and gang_size:
            return {NODE: gang_size}
        return counts

    def gang_requests(self, job: JsonDict) -> dict[str, Decimal]:
        """``resourcesPerNode`` times the nodes (what its runtime adds is not counted)."""
        trainer = (job.get("spec") or {}).get("trainer") or {}
        per_node = trainer.get("resourcesPerNode") or {}
        amounts = {**(per_node.get("limits") or {}), **(per_node.get("requests") or {})}
        nodes = int(trainer.get("numNodes") or 1)
        return {resource: parse_quantity(amount) * nodes for resource, amount in amounts.items()}

    def replica_rows(
        self, job: JsonDict, pods: Iterable[JsonDict] = (), gang_size: int = 0
    ) -> list[JsonDict]:
        """The ``Node`` row: desired nodes, and the pods active, succeeded and failed."""
        phases = [
            (pod.get("status") or {}).get("phase")
            for pod in pods
            if not (pod.get("metadata") or {}).get("deletionTimestamp")
        ]
        desired = self.replica_counts(job).get(NODE, gang_size)
        return [
            {
                "type": NODE,
                "desired": desired,
                "active": sum(1 for phase in phases if phase in ("Pending", "Running")),
                "succeeded": phases.count("Succeeded"),
                "failed": phases.count("Failed"),
            }
        ]

    def state(self, job: JsonDict) -> tuple[str | None, str]:
        """``Complete`` reads as ``Succeeded``; ``Failed`` and ``Suspended`` as they are. A TrainJob
        has no condition while it runs: None then (the pods tell)."""
        true = {condition.get("type"): condition for condition in true_conditions(job)}
        for condition_type, word in (("Failed", FAILED), ("Complete", SUCCEEDED), ("Suspended", SUSPENDED)):
            if condition_type in true:
                return word, str(true[condition_type].get("message") or "")
        return None, ""

    def state_time(self, job: JsonDict, state: str) -> str | None:
        """Its ``Complete`` condition's time is when it succeeded."""
        return super().state_time(job, "Complete" if state == SUCCEEDED else state)

    def queue(self, job: JsonDict) -> str | None:
        """The queue the TrainJob's ``runtimePatches`` give its PodGroup, as Trainer reads it (the
        last patch naming one wins; the runtime's own template, which they override, is not on
        the job: its queue is pinned into the provider's patch at submission)."""
        patched = patches_queue((job.get("spec") or {}).get("runtimePatches") or [])
        if patched is not None:
            return patched
        # Only TrainJobs submitted by provider versions before the fix of issue 32 name it here;
        # Trainer ignored it (their PodGroup went to the runtime's queue or `default`), but it is
        # what their task asked for, which their history and the Gang jobs page show.
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        legacy = annotations.get(QUEUE_ANNOTATION)
        return str(legacy) if legacy else None

    def has_podgroup(self, job: JsonDict) -> bool:
        """A TrainJob the provider submitted with a gang names its queue in its runtime patch."""
        return self.queue(job) is not None

    def observed_gang_mode(
        self, job: JsonDict, podgroup: JsonDict | None, pods: Iterable[JsonDict] = ()
    ) -> str:
        """A PodGroup, or pods bound for Volcano, mean Trainer's Volcano plugin gang-schedules the
        job; pods for the default scheduler mean no gang. Before there is either, the gang runtime
        is assumed (the PodGroup is on its way)."""
        if podgroup is not None:
            return "trainer"
        listed = list(pods)
        schedulers = {(pod.get("spec") or {}).get("schedulerName") for pod in listed}
        if listed and VOLCANO_SCHEDULER not in schedulers:
            return "disabled"
        return "trainer"

    def runtime_ref(self, job: JsonDict) -> tuple[str, str] | None:
        """``(kind, name)`` of the runtime the TrainJob names, or None if it names none."""
        ref = (job.get("spec") or {}).get("runtimeRef") or {}
        if not ref.get("name"):
            return None
        return str(ref.get("kind") or CLUSTER_RUNTIME), str(ref["name"])

    def runtime_gang_mode(self, runtime: JsonDict | None) -> str | None:
        return None if runtime is None else runtime_policy_mode(runtime)

    def replica_of(self, pod: JsonDict) -> str:
        return f"{NODE} {labels_of(pod).get(self.replica_index_label, '?')}"

    def replica_phrase(self, replica: str) -> str:
        return replica.lower()


TRAINJOB = TrainJobKind(
    kind="TrainJob",
    group=GROUP,
    version=VERSION,
    plural="trainjobs",
    pod_job_label=JOBSET_NAME_LABEL,
    replica_type_label=REPLICATED_JOB_LABEL,
    replica_index_label=RANK_LABEL,
    container="node",
    replica_specs_field="trainer",
    leader="node",
    leader_title="rank 0",
    api=ApiFacts(
        ("trainjobs", "clustertrainingruntimes"),
        "Kubeflow Trainer v2",
        "install Kubeflow Trainer (https://www.kubeflow.org/docs/components/trainer/) and its runtimes",
    ),
    permissions=(
        # The TrainJob, and the runtime it names (read to learn whether its Volcano
        # podGroupPolicy gang-schedules it). Trainer's Volcano plugin creates and owns the PodGroup.
        (GROUP, "trainjobs", "create"),
        (GROUP, "trainjobs", "get"),
        (GROUP, "trainjobs", "list"),
        (GROUP, "trainjobs", "watch"),
        (GROUP, "trainjobs", "delete"),
        (GROUP, "trainjobs", "patch"),
        (GROUP, "trainingruntimes", "get"),
        # Cluster-scoped, like queues.
        (GROUP, "clustertrainingruntimes", "get"),
        # A TrainJob's deletion is confirmed once its JobSet and batch Jobs are gone too (Trainer
        # re-creates them while a TrainJob waits in a foreground deletion): `list` only.
        ("jobset.x-k8s.io", "jobsets", "list"),
        ("batch", "jobs", "list"),
    ),
    suspend_field="spec.suspend",
    task_decorator="trainjob",
    decorator_class="airflow_gang.decorators.train_job.trainjob_task",
    pods_outlive_failure=False,
    running_condition=False,
    deletion_propagation="Background",
    controller_owns_podgroup=True,
    children=(
        ChildResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", labelled=False),
        ChildResource("batch", "v1", "jobs", "Job", labelled=True),
    ),
)
