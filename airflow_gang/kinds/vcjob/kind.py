"""Volcano's own Job (``batch.volcano.sh/v1alpha1`` kind ``Job``, ``vcjob``): `VCJOB`.

What a Volcano Job's objects say otherwise than a PyTorchJob's (docs/volcano-job.md):

- its replicas are a list of ``spec.tasks`` (``name``, ``replicas``, ``template``); its pods are
  ``<job>-<task>-<index>``, labelled ``volcano.sh/job-name``, ``volcano.sh/task-spec`` (the task)
  and ``volcano.sh/task-index``; rank 0 is the pod whose ``RANK`` is 0 (Volcano's ``pytorch``
  plugin sets it: the ``master`` task's first pod);
- its state is one phase, ``status.state.phase`` (``Pending``, ``Running``, ``Restarting``,
  ``Completing``, ``Completed``, ``Aborting``, ``Aborted``, ``Terminating``, ``Terminated``,
  ``Failed``), not a list of conditions; its own ``policies`` restart it (``RestartJob``, up to
  ``maxRetry`` times, ``status.retryCount`` counting) or end it;
- Volcano's job controller makes its PodGroup, named ``<job>-<job uid>`` and owned by the job,
  with ``minMember`` = the job's ``minAvailable``: a job whose ``minAvailable`` is smaller than
  its replicas is not one gang (Volcano places it in parts; gang mode ``disabled``);
- its pods are deleted by a ``RestartJob`` (every pod, the failed one too), so its failure is
  noted while the wait sees it (``pods_outlive_failure=False``);
- the controller does nothing for a job with a ``deletionTimestamp`` (Volcano v1.16
  ``pkg/controllers/job/job_controller_actions.go``: ``killPods`` and ``syncJob`` return early),
  so a foreground deletion settles once the garbage collector has removed its pods and PodGroup.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_gang.kinds.base import FAILED, SUCCEEDED, ApiFacts, JobKind, labels_of

if TYPE_CHECKING:
    from airflow_gang.exceptions import PyTorchJobFailed

JsonDict = dict[str, Any]
GROUP, VERSION, PLURAL = "batch.volcano.sh", "v1alpha1", "jobs"
JOB_NAME_LABEL = "volcano.sh/job-name"
TASK_LABEL = "volcano.sh/task-spec"
TASK_INDEX_LABEL = "volcano.sh/task-index"
MASTER, WORKER = "master", "worker"
# The modes a Volcano Job runs in: one gang (Volcano's job controller makes the PodGroup with
# minMember = every replica), or parts of it (minAvailable smaller than the job).
GANG, NO_GANG = "volcano", "disabled"
# Phases, in the provider's words (`JobKind.state`): what the lifecycle decides on.
SUCCEEDED_PHASES = ("Completed",)
FAILED_PHASES = ("Failed", "Terminating", "Terminated", "Aborting", "Aborted")
RUNNING_PHASES = ("Running", "Completing")
_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def phase_of(job: JsonDict) -> str | None:
    """``status.state.phase``, or None before the controller has written one."""
    phase = (((job.get("status") or {}).get("state")) or {}).get("phase")
    return str(phase) if phase else None


def tasks_of(job: JsonDict) -> list[JsonDict]:
    return [task or {} for task in (job.get("spec") or {}).get("tasks") or []]


def min_available(job: JsonDict) -> int:
    """The gang's size: ``spec.minAvailable``, else every replica (Volcano's webhook default)."""
    spec = job.get("spec") or {}
    if spec.get("minAvailable") is not None:
        return int(spec["minAvailable"])
    return sum(int(task.get("replicas", 1)) for task in tasks_of(job))


def _env_value(pod: JsonDict, name: str) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for variable in container.get("env") or []:
            if variable.get("name") == name and "value" in variable:
                return str(variable["value"])
    return None


@dataclass(frozen=True)
class VolcanoJobKind(JobKind):
    """Volcano's Job (see the module docstring for what differs)."""

    @property
    def failure_error(self) -> type[PyTorchJobFailed]:
        from airflow_gang.exceptions import VolcanoJobFailed  # see JobKind.failure_error

        return VolcanoJobFailed

    def podgroup_name(self, job_name: str, job_uid: str | None = None) -> str:
        """``<job>-<uid>``, as Volcano's job controller names it (v1.16
        ``job_controller_actions.go`` ``generateRelatedPodGroupName``, lines 64-66); without the
        uid, the job's own name, which ``getPodGroupByJob`` (lines 48-62) falls back to for
        PodGroups made by older controllers."""
        return f"{job_name}-{job_uid}" if job_uid else job_name

    def job_of_podgroup(self, podgroup: JsonDict) -> str | None:
        """The Volcano Job owning the PodGroup, else its name without the uid suffix."""
        metadata = podgroup.get("metadata") or {}
        for owner in metadata.get("ownerReferences") or []:
            if self.describes(owner):
                return str(owner.get("name"))
        name = str(metadata.get("name") or "")
        return _UID_SUFFIX.sub("", name) or None

    def leader_pod(self, job_name: str, pods: Iterable[JsonDict] = ()) -> str | None:
        """Rank 0's pod: the one whose ``RANK`` is 0 (the ``pytorch`` plugin's ``master``), else the
        ``master`` task's first pod, else the first task's; None without pods (a job's tasks may
        have any names, so the pod is found, not derived)."""
        ours = [pod for pod in pods if labels_of(pod).get(self.pod_job_label) == job_name]
        if not ours:
            return None

        def rank(pod: JsonDict) -> tuple[int, str]:
            labels = labels_of(pod)
            if _env_value(pod, "RANK") == "0":
                order = 0
            elif labels.get(TASK_LABEL) == MASTER and labels.get(TASK_INDEX_LABEL) == "0":
                order = 1
            elif labels.get(TASK_INDEX_LABEL) == "0":
                order = 2
            else:
                order = 3
            return order, str((pod.get("metadata") or {}).get("name"))

        return str(min(ours, key=rank)["metadata"]["name"])

    def replica_specs(self, job: JsonDict) -> dict[str, JsonDict]:
        """Task name → its spec, in the job's order."""
        return {str(task.get("name") or f"default{index}"): task for index, task in enumerate(tasks_of(job))}

    def replica_rows(
        self, job: JsonDict, pods: Iterable[JsonDict] = (), gang_size: int = 0
    ) -> list[JsonDict]:
        """Per task: desired, and the pods pending or running, succeeded and failed, from the job's
        ``status.taskStatusCount`` (pod phase → count, per task)."""
        counts = (job.get("status") or {}).get("taskStatusCount") or {}
        rows = []
        for task, desired in self.replica_counts(job).items():
            phases = (counts.get(task) or {}).get("phase") or {}
            rows.append(
                {
                    "type": task,
                    "desired": desired,
                    "active": int(phases.get("Pending") or 0) + int(phases.get("Running") or 0),
                    "succeeded": int(phases.get("Succeeded") or 0),
                    "failed": int(phases.get("Failed") or 0),
                }
            )
        return rows

    def state(self, job: JsonDict) -> tuple[str | None, str]:
        """The phase in the lifecycle's words: ``Completed`` is ``Succeeded``; ``Failed``,
        ``Terminated``, ``Aborted`` (and their ``-ing``) are ``Failed``; ``Running`` and
        ``Completing`` are ``Running``; ``Restarting``, and ``Pending`` after a restart
        (``status.retryCount`` > 0: its pods are being made again), are ``Restarting``;
        a first ``Pending`` is None (queued)."""
        status = job.get("status") or {}
        state = status.get("state") or {}
        phase = phase_of(job)
        message = str(state.get("message") or state.get("reason") or "")
        retries = int(status.get("retryCount") or 0)
        if phase in SUCCEEDED_PHASES:
            return SUCCEEDED, message
        if phase in FAILED_PHASES:
            if not message:
                message = f"the Volcano Job is {phase.lower()}"
                if phase == "Failed" and retries:
                    limit = (job.get("spec") or {}).get("maxRetry", 3)
                    message += f" after {retries} restart(s) (maxRetry {limit})"
            return FAILED, message
        if phase in RUNNING_PHASES:
            return "Running", message
        if phase == "Restarting" or (phase == "Pending" and retries):
            limit = (job.get("spec") or {}).get("maxRetry", 3)
            return "Restarting", message or f"restarted by its policy ({retries} of maxRetry {limit})"
        return None, message

    def state_time(self, job: JsonDict, state: str) -> str | None:
        """The newest ``status.conditions`` entry (one per phase: ``{status: <phase>,
        lastTransitionTime}``, Volcano's ``appendJobCondition``) of a phase `state` reads as
        ``state``; a restart clears nothing, so ``Running`` is the last run's."""
        phases = {SUCCEEDED: SUCCEEDED_PHASES, FAILED: FAILED_PHASES, "Running": ("Running",)}.get(
            state, (state,)
        )
        moments = [
            str(condition["lastTransitionTime"])
            for condition in (job.get("status") or {}).get("conditions") or []
            if condition.get("status") in phases and condition.get("lastTransitionTime")
        ]
        if state in (SUCCEEDED, FAILED) and self.state(job)[0] != state:
            return None  # a phase the job has left (Failed of a restarted run cannot be)
        return max(moments) if moments else None

    def queue(self, job: JsonDict) -> str | None:
        """``spec.queue`` (Volcano's webhook defaults it to ``default``)."""
        return (job.get("spec") or {}).get("queue") or "default"

    def has_podgroup(self, job: JsonDict) -> bool:
        """Volcano's job controller makes a PodGroup for every Volcano Job."""
        return True

    def observed_gang_mode(
        self, job: JsonDict, podgroup: JsonDict | None, pods: Iterable[JsonDict] = ()
    ) -> str:
        """``volcano`` when the gang is the whole job, ``disabled`` when ``minAvailable`` is smaller
        (Volcano then places it in parts, as if it had no gang)."""
        return GANG if min_available(job) >= self.total_replicas(job) else NO_GANG

    def replica_of(self, pod: JsonDict) -> str:
        """``worker 2``: the task and the pod's index in it."""
        labels = labels_of(pod)
        return f"{labels.get(TASK_LABEL, 'task')} {labels.get(TASK_INDEX_LABEL, '?')}"

    def replica_phrase(self, replica: str) -> str:
        """``task master, index 0``."""
        task, _, index = replica.rpartition(" ")
        return f"task {task}, index {index}" if task else f"task {replica}"

    def suspended(self, job: JsonDict) -> bool:
        """A Volcano Job has no suspend field (Volcano suspends with a bus Command, which aborts
        it): never suspended as the lifecycle means it."""
        return False


VCJOB = VolcanoJobKind(
    kind="VolcanoJob",
    api_kind="Job",
    group=GROUP,
    version=VERSION,
    plural=PLURAL,
    pod_job_label=JOB_NAME_LABEL,
    replica_type_label=TASK_LABEL,
    replica_index_label=TASK_INDEX_LABEL,
    container="pytorch",
    replica_specs_field="tasks",
    leader=MASTER,
    leader_title="rank 0",
    api=ApiFacts(
        (PLURAL,),
        "Volcano Job CRD (batch.volcano.sh)",
        "install Volcano with its controller manager (https://volcano.sh/en/docs/installation/)",
    ),
    permissions=(
        (GROUP, PLURAL, "create"),
        (GROUP, PLURAL, "get"),
        (GROUP, PLURAL, "list"),
        (GROUP, PLURAL, "watch"),
        (GROUP, PLURAL, "delete"),
    ),
    suspend_field="",
    task_decorator="vcjob",
    decorator_class="airflow_gang.decorators.volcano_job.vcjob_task",
    pods_outlive_failure=False,
    running_condition=False,
    controller_owns_podgroup=True,
)
