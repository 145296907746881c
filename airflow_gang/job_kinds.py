"""What the job lifecycle must know about one kind of gang job, as data: `JobKind`.

The lifecycle (`airflow_gang.jobs`), the waits, the trigger and the UI read a job's kind-specific
facts only through a `JobKind`: where it is served, how its pods name it, which container's exit
code is the failure's, whose log is the task's, how many replicas of which type it wants. Kubeflow's
PyTorchJob is `PYTORCHJOB`. A second kind (Kubeflow Trainer v2's TrainJob, a Volcano Job) is one
more value here plus a spec builder; see the package docstring of `airflow_gang.jobs` for the rest
of the interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class JobKind:
    """One kind of gang job.

    :param kind: the object's ``kind``, e.g. ``PyTorchJob``.
    :param group: its API group; ``version`` and ``plural`` complete where it is served.
    :param pod_job_label: the label every pod of a job carries, with the job's name as value.
    :param replica_type_label: the label naming a pod's replica type (``Master``, ``Worker``).
    :param replica_index_label: the label numbering the pods of one replica type.
    :param container: the training container: its exit code and log describe a failure.
    :param replica_specs_field: the ``spec`` field mapping replica type to ``{replicas, template}``.
    :param leader: the replica type whose first pod's log is the task's (rank 0).
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

    def leader_pod(self, job_name: str) -> str:
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
