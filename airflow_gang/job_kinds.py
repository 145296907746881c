"""What the job lifecycle must know about one kind of gang job: `JobKind`.

The lifecycle (`airflow_gang.jobs`), the waits, the trigger and the UI read a job's kind-specific
facts only through a `JobKind`: where it is served, how its pods name it, which container's exit
code is the failure's, whose log is the task's, how many replicas of which type it wants, and
how its status says it ended. Kubeflow's PyTorchJob is `PYTORCHJOB`; Kubeflow Trainer v2's
TrainJob is `TRAINJOB`.

The two differ in what the job object says:

- a PyTorchJob lists its replicas (``spec.pytorchReplicaSpecs``), its pods are named
  ``<job>-master-0``/``<job>-worker-N``, and its conditions ``Created``/``Running``/
  ``Restarting``/``Succeeded``/``Failed``/``Suspended`` are appended in order;
- a TrainJob names a runtime and ``spec.trainer.numNodes``; its pods come from a JobSet's
  indexed Job (``<job>-node-0-<rank>-<random>``, the rank in the label
  ``batch.kubernetes.io/job-completion-index``), and its conditions are metav1 ones,
  ``Complete``/``Failed``/``Suspended``, with no "Running" at all (DOMAIN.md §6).

`JobKind.state` maps either onto the training-operator's words, which the rest of the provider
speaks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, cast

JsonDict = dict[str, Any]
# The annotation Volcano's queue is named by (a TrainJob's runtime template and runtimePatches).
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# The condition types the lifecycle decides on (the training-operator's words).
SUCCEEDED, FAILED, SUSPENDED = "Succeeded", "Failed", "Suspended"


def _true_conditions(job: JsonDict) -> list[JsonDict]:
    conditions = (job.get("status") or {}).get("conditions") or []
    return [condition for condition in conditions if condition.get("status") == "True"]


def _labels(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


@dataclass(frozen=True)
class ChildResource:
    """Objects a job's controller makes for it, e.g. a TrainJob's JobSet and batch Jobs.

    :param labelled: found by the job kind's ``pod_job_label`` (``<label>=<job>``); else it is
        the one object named after the job.
    """

    group: str
    version: str
    plural: str
    kind: str
    labelled: bool


@dataclass(frozen=True)
class JobKind:
    """One kind of gang job (PyTorchJob's behaviour; `TrainJobKind` overrides what differs).

    :param kind: the object's ``kind``, e.g. ``PyTorchJob``.
    :param group: its API group; ``version`` and ``plural`` complete where it is served.
    :param pod_job_label: the label every pod of a job carries, with the job's name as value.
    :param replica_type_label: the label naming a pod's replica type (``Master``, ``Worker``).
    :param replica_index_label: the label numbering the pods of one replica type.
    :param container: the training container: its exit code and log describe a failure.
    :param replica_specs_field: the ``spec`` field mapping replica type to ``{replicas, template}``.
    :param leader: the replica type whose first pod's log is the task's (rank 0).
    :param pods_outlive_failure: a failed job's pods stay to be read (a TrainJob's Job deletes
        them at its backoff limit: its waits note the failure as they see it).
    :param deletion_propagation: how the provider deletes such a job. ``Foreground`` for a
        PyTorchJob (the training-operator skips a job marked for deletion, so nothing comes back
        while its dependents go); ``Background`` for a TrainJob, whose controller never checks
        ``deletionTimestamp`` and re-applies every child the garbage collector removes while the
        TrainJob waits in a foreground deletion (docs/trainer-v2.md, "Deleting a TrainJob").
    :param controller_owns_podgroup: the job's controller makes, owns and re-creates its PodGroup
        (Trainer's Volcano plugin), so the provider never deletes it itself: the garbage
        collector removes it with the job.
    :param children: what the job's controller makes besides pods and the PodGroup and that
        holds or makes pods (`ChildResource`): a deletion is confirmed only once none is left.
    """

    kind: str
    group: str
    version: str
    plural: str
    pod_job_label: str
    replica_type_label: str
    replica_index_label: str
    container: str
    replica_specs_field: str
    leader: str
    pods_outlive_failure: bool = True
    deletion_propagation: Literal["Foreground", "Background"] = "Foreground"
    controller_owns_podgroup: bool = False
    children: tuple[ChildResource, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def watch_name(self) -> Literal["pytorchjob", "trainjob"]:
        """The lower-case name the hooks' watch and wait calls take (``pytorchjob``)."""
        # The cast's target as a string: a subscripted Literal is built anew on every call, and
        # the shared watch cache asks for this on every look of every trigger.
        return cast('Literal["pytorchjob", "trainjob"]', self.kind.lower())

    def pod_selector(self, job_name: str) -> str:
        """The label selector of one job's pods."""
        return f"{self.pod_job_label}={job_name}"

    def leader_pod(self, job_name: str, pods: Iterable[JsonDict] = ()) -> str | None:
        """The pod whose log goes into the task log: rank 0, the leader's first replica."""
        return f"{job_name}-{self.leader.lower()}-0"

    def replica_specs(self, job: JsonDict) -> dict[str, JsonDict]:
        """Replica type → its spec (``replicas``, ``template``), as the job asks for them."""
        specs = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        return {str(replica_type): spec or {} for replica_type, spec in specs.items()}

    def replica_counts(self, job: JsonDict) -> dict[str, int]:
        """``{"Master": 1, "Worker": 3}``: the replicas the job wants, per type (1 if unsaid)."""
        return {
            replica_type: int(spec.get("replicas", 1))
            for replica_type, spec in self.replica_specs(job).items()
        }

    def total_replicas(self, job: JsonDict) -> int:
        return sum(self.replica_counts(job).values())

    def state(self, job: JsonDict) -> tuple[str | None, str]:
        """The job's state in the training-operator's words (``Running``, ``Succeeded``...) and
        its message; the training-operator appends the newest condition last."""
        true = _true_conditions(job)
        if not true:
            return None, ""
        return true[-1].get("type"), str(true[-1].get("message") or "")

    def queue(self, job: JsonDict) -> str | None:
        """The Volcano queue the job asks for, as the job says it (the PodGroup's wins)."""
        policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
        return policy.get("queue")

    def replica_of(self, pod: JsonDict) -> str:
        """``Worker 2``: the pod's replica, as failure messages name it."""
        labels = _labels(pod)
        replica_type = str(labels.get(self.replica_type_label, "replica")).capitalize()
        return f"{replica_type} {labels.get(self.replica_index_label, '?')}"


RANK_LABEL = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass(frozen=True)
class TrainJobKind(JobKind):
    """Kubeflow Trainer v2's TrainJob (see the module docstring for what differs)."""

    def leader_pod(self, job_name: str, pods: Iterable[JsonDict] = ()) -> str | None:
        """Rank 0's pod among ``pods`` (the newest, if its Job replaced one), or None: its name
        ends in characters the Job controller picks, so it can only be found, not derived."""
        leaders = [
            pod
            for pod in pods
            if _labels(pod).get(self.pod_job_label) == job_name
            and _labels(pod).get(REPLICATED_JOB_LABEL, self.leader) == self.leader
            and _labels(pod).get(self.replica_index_label) == "0"
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
        return {"Node": {"replicas": int(trainer["numNodes"])}}

    def state(self, job: JsonDict) -> tuple[str | None, str]:
        """``Complete`` reads as ``Succeeded``; ``Failed`` and ``Suspended`` as they are. A TrainJob
        has no condition while it runs: None then (the pods tell)."""
        true = {condition.get("type"): condition for condition in _true_conditions(job)}
        for condition_type, word in (("Failed", FAILED), ("Complete", SUCCEEDED), ("Suspended", SUSPENDED)):
            if condition_type in true:
                return word, str(true[condition_type].get("message") or "")
        return None, ""

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

    def replica_of(self, pod: JsonDict) -> str:
        return f"Node {_labels(pod).get(self.replica_index_label, '?')}"


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


PYTORCHJOB = JobKind(
    kind="PyTorchJob",
    group="kubeflow.org",
    version="v1",
    plural="pytorchjobs",
    pod_job_label="training.kubeflow.org/job-name",
    replica_type_label="training.kubeflow.org/replica-type",
    replica_index_label="training.kubeflow.org/replica-index",
    container="pytorch",
    replica_specs_field="pytorchReplicaSpecs",
    leader="Master",
)

TRAINJOB = TrainJobKind(
    kind="TrainJob",
    group="trainer.kubeflow.org",
    version="v1alpha1",
    plural="trainjobs",
    pod_job_label=JOBSET_NAME_LABEL,
    replica_type_label=REPLICATED_JOB_LABEL,
    replica_index_label=RANK_LABEL,
    container="node",
    replica_specs_field="trainer",
    leader="node",
    pods_outlive_failure=False,
    deletion_propagation="Background",
    controller_owns_podgroup=True,
    children=(
        ChildResource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", labelled=False),
        ChildResource("batch", "v1", "jobs", "Job", labelled=True),
    ),
)

JOB_KINDS: dict[str, JobKind] = {job_kind.kind: job_kind for job_kind in (PYTORCHJOB, TRAINJOB)}


def job_kind_named(name: str | None) -> JobKind:
    """The `JobKind` of a ``kind`` (``PyTorchJob``, ``TrainJob``; None: PyTorchJob)."""
    if name is None:
        return PYTORCHJOB
    try:
        return JOB_KINDS[name]
    except KeyError:
        raise ValueError(f"job kind {name!r}: use one of {', '.join(JOB_KINDS)}") from None
