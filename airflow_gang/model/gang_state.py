"""Where a gang job stands, decided purely from what the cluster shows (job, PodGroup, pods).

The operator (sync waits), the trigger (deferred waits) and the sensors all call `gang_status`,
so they can never disagree about what "admitted" or "failed" means:

- admitted = PodGroup phase ``Running`` or ``Completed``; or ``Inqueue``/``Unknown`` with at
  least ``minMember`` of its pods bound to nodes (Volcano binds a session before it writes
  ``Running``, see below); or the job already has a ``Running``, ``Succeeded`` or ``Failed``
  condition. With gang scheduling disabled: every replica pod bound (the operator's ``Running``
  only means the Master runs, which is exactly the deadlocked state). The same holds for a job
  of ``gang_scheduling="training-operator"`` that has pods but no PodGroup: a training-operator
  with the gang flag creates pods only once its PodGroup is admitted, so such pods come from
  an operator without ``--gang-scheduler-name=volcano`` and the job is no gang at all
  (`GangStatus.warning` says so).
- finished = the job's last true condition is ``Succeeded`` or ``Failed``.

Decisions use phases and bound pods, never the mere presence of a PodGroup condition (a stale
``Unschedulable=True`` can sit next to phase ``Running``). The Volcano behaviour behind these
rules: ``docs/architecture.md#volcano-session`` and ``#volcano-messages``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_gang.kinds import DEFAULT_JOB_KIND, PYTORCHJOB, JobKind
from airflow_gang.reports.timeline import gang_admitted_at

JsonDict = dict[str, Any]
JOB_NAME_LABEL = DEFAULT_JOB_KIND.pod_job_label
NOT_GANG_SCHEDULED = (
    "not gang-scheduled: the training-operator created pods but no PodGroup, so it runs without "
    "--gang-scheduler-name=volcano; start it with that flag, or use gang_scheduling='provider'"
)
TRAINER_NOT_GANG_SCHEDULED = (
    "not gang-scheduled: the TrainJob's pods exist but no PodGroup does, so its runtime has no Volcano "
    "podGroupPolicy; use a runtime with podGroupPolicy.volcano"
)
REPLICA_TYPE_LABEL = DEFAULT_JOB_KIND.replica_type_label
REPLICA_INDEX_LABEL = DEFAULT_JOB_KIND.replica_index_label
# Modes in which a controller, not the provider, makes the PodGroup: the training-operator with
# --gang-scheduler-name=volcano, or Kubeflow Trainer v2's Volcano plugin (a runtime's
# podGroupPolicy.volcano). The PodGroup may not exist for a while after submission.
CONTROLLER_PODGROUP_MODES = ("training-operator", "trainer")


class GangPhase(StrEnum):
    QUEUED = "queued"
    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True)
class GangStatus:
    phase: GangPhase
    podgroup_phase: str | None
    queue: str | None
    min_member: int
    replicas: int
    bound: int
    running: int
    job_condition: str | None
    message: str
    warning: str = ""  # something about the job the user must know, whatever its phase

    @property
    def admitted(self) -> bool:
        return self.phase not in (GangPhase.QUEUED, GangPhase.LOST)

    @property
    def finished(self) -> bool:
        return self.phase in (GangPhase.SUCCEEDED, GangPhase.FAILED)

    def progress(self, updated_at: str) -> dict[str, Any]:
        """The task state store's ``progress`` entry: what the UI shows while the task waits."""
        entry = {
            "phase": self.phase.value,
            "podgroup_phase": self.podgroup_phase,
            "queue": self.queue,
            "replicas_bound": self.bound,
            "replicas_running": self.running,
            "replicas": self.replicas,
            "message": self.message,
            "updated_at": updated_at,
        }
        if self.warning:
            entry["warning"] = self.warning
        return entry

    def describe(self) -> str:
        """One log-friendly line: ``queued podgroup=Pending queue=default bound=0/4 | reason``."""
        parts = [self.phase.value]
        if self.podgroup_phase is not None:
            parts.append(f"podgroup={self.podgroup_phase}")
        if self.queue:
            parts.append(f"queue={self.queue}")
        parts.append(f"bound={self.bound}/{self.replicas}")
        text = " ".join(parts)
        for note in (self.message, self.warning):
            if note:
                text = f"{text} | {note}"
        return text


def last_true_condition(job: JsonDict) -> JsonDict | None:
    """The training-operator appends the newest condition last; the last true one is the state."""
    conditions = (job.get("status") or {}).get("conditions") or []
    true = [c for c in conditions if c.get("status") == "True"]
    return true[-1] if true else None


def replica_count(job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> int:
    return job_kind.total_replicas(job)


def finished_state(job: JsonDict, job_kind: JobKind = DEFAULT_JOB_KIND) -> str | None:
    """``Succeeded``/``Failed`` once the job has ended, else None."""
    state, _ = job_kind.state(job)
    return state if state in ("Succeeded", "Failed") else None


def _bound(pods: list[JsonDict]) -> int:
    return sum(1 for pod in pods if (pod.get("spec") or {}).get("nodeName") and not _deleting(pod))


def _deleting(pod: JsonDict) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _unschedulable_message(podgroup: JsonDict | None, pods: list[JsonDict]) -> str:
    if podgroup is not None:
        for condition in reversed((podgroup.get("status") or {}).get("conditions") or []):
            if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
                return str(condition.get("message") or "")
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message") or "")
    return ""


def gang_status(
    job: JsonDict | None,
    podgroup: JsonDict | None,
    pods: list[JsonDict],
    gang_scheduling: str,
    job_kind: JobKind = DEFAULT_JOB_KIND,
) -> GangStatus:
    """Map what the cluster shows onto one `GangStatus`.

    :param job: the PyTorchJob (or TrainJob), or None if it is gone.
    :param podgroup: its PodGroup, or None (not created yet, or deleted after the job finished).
    :param pods: the job's pods (label ``training.kubeflow.org/job-name``, or the kind's).
    :param gang_scheduling: ``provider``, ``training-operator``, ``trainer`` (Trainer v2's
        Volcano plugin makes the PodGroup) or ``disabled``.
    :param job_kind: the job's kind.
    """
    pg_status = (podgroup or {}).get("status") or {}
    pg_spec = (podgroup or {}).get("spec") or {}
    pg_phase = pg_status.get("phase") if podgroup is not None else None
    replicas = job_kind.total_replicas(job) if job is not None else 0
    if job is not None and not replicas:  # a TrainJob taking numNodes from its runtime
        replicas = int(pg_spec.get("minMember") or 0)
    policy = ((job or {}).get("spec") or {}).get("runPolicy", {}).get("schedulingPolicy") or {}
    # Without gang scheduling no queue admits anything (a TrainJob may still carry the annotation).
    queue = (
        None
        if gang_scheduling == "disabled"
        else pg_spec.get("queue") or (job_kind.queue(job) if job else None)
    )
    min_member = int(pg_spec.get("minMember") or policy.get("minAvailable") or replicas or 0)
    bound = _bound(pods)
    running = sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Running")
    # A gang-flag operator deletes a finished job's PodGroup while its pods may stay
    # (cleanPodPolicy None): only an unfinished job tells an operator without the flag.
    operator_made_no_gang = (
        gang_scheduling in CONTROLLER_PODGROUP_MODES
        and podgroup is None
        and any(not _deleting(pod) for pod in pods)
        and job is not None
        and finished_state(job, job_kind) is None
    )
    no_gang = gang_scheduling == "disabled" or operator_made_no_gang
    warning = ""
    if operator_made_no_gang:
        warning = TRAINER_NOT_GANG_SCHEDULED if gang_scheduling == "trainer" else NOT_GANG_SCHEDULED

    def status(phase: GangPhase, condition_type: str | None, message: str) -> GangStatus:
        return GangStatus(
            phase, pg_phase, queue, min_member, replicas, bound, running, condition_type, message, warning
        )

    if job is None:
        return status(GangPhase.LOST, None, f"the {job_kind.kind} no longer exists")
    condition_type, message = job_kind.state(job)
    if condition_type == "Succeeded":
        return status(GangPhase.SUCCEEDED, condition_type, message)
    if condition_type == "Failed":
        return status(GangPhase.FAILED, condition_type, message)
    all_bound = replicas > 0 and bound >= replicas
    # Without gang scheduling the operator calls a job Running as soon as its Master runs, even
    # when its Workers can never be placed (the deadlock): only every replica bound counts.
    if condition_type in ("Running", "Restarting") and (not no_gang or all_bound):
        return status(GangPhase.RUNNING, condition_type, message)
    if no_gang:
        admitted = all_bound
    else:
        admitted = pg_phase in ("Running", "Completed") or (
            pg_phase in ("Inqueue", "Unknown") and min_member > 0 and bound >= min_member
        )
    if admitted:
        if condition_type is None and replicas > 0 and running >= replicas and not job_kind.running_condition:
            # A TrainJob has no Running condition: every node's pod running is what running means.
            return status(GangPhase.RUNNING, "Running", "")
        return status(GangPhase.ADMITTED, condition_type, "")
    if condition_type == "Suspended":
        reason = message or f"the {job_kind.kind} is suspended"
    elif podgroup is None and not no_gang:
        reason = "waiting for the PodGroup to be created"
    else:
        reason = _unschedulable_message(podgroup, pods)
    return status(GangPhase.QUEUED, condition_type, reason)


@dataclass(frozen=True)
class GangSnapshot:
    """One look at the cluster: the objects read and the decision made from them."""

    status: GangStatus
    job: JsonDict | None
    podgroup: JsonDict | None
    pods: list[JsonDict]

    @classmethod
    def of(
        cls,
        job: JsonDict | None,
        podgroup: JsonDict | None,
        pods: list[JsonDict],
        gang_scheduling: str,
        job_kind: JobKind = DEFAULT_JOB_KIND,
    ) -> GangSnapshot:
        return cls(gang_status(job, podgroup, pods, gang_scheduling, job_kind), job, podgroup, pods)

    def admitted_at(self) -> str:
        """When the cluster admitted the gang (ISO UTC), from these objects; now if they cannot tell."""
        moment = None
        if self.job is not None:
            moment = gang_admitted_at(self.job, self.podgroup, self.pods, self.status.min_member)
        return (moment or dt.datetime.now(dt.UTC)).isoformat()


@dataclass(frozen=True)
class ReplicaFailure:
    pod: str
    replica: str
    exit_code: int | None
    reason: str | None
    message: str | None
    # The failed run is the container's previous one (restarted in place): its log is read with
    # ``previous=True``, the current one's is the new run's.
    previous: bool = False


def _terminated(status: JsonDict) -> tuple[JsonDict, bool] | None:
    state = (status.get("state") or {}).get("terminated")
    last = (status.get("lastState") or {}).get("terminated")
    if state and state.get("exitCode", 0) != 0:
        return dict(state), False
    if last and last.get("exitCode", 0) != 0:
        return dict(last), True
    return None


def failing_replica(pods: list[JsonDict], job_kind: JobKind = DEFAULT_JOB_KIND) -> ReplicaFailure | None:
    """The replica that failed first (by container finish time), with its exit code and reason.

    A container restarted in place (``OnFailure``) is read from its ``lastState``.
    """
    candidates: list[tuple[str, ReplicaFailure]] = []
    for pod in pods:
        replica = job_kind.replica_of(pod)
        status = pod.get("status") or {}
        for container_status in status.get("containerStatuses") or []:
            if container_status.get("name") != job_kind.container:
                continue
            found = _terminated(container_status)
            if found is not None:
                terminated, previous = found
                failure = ReplicaFailure(
                    pod=pod["metadata"]["name"],
                    replica=replica,
                    exit_code=terminated.get("exitCode"),
                    reason=terminated.get("reason"),
                    message=terminated.get("message"),
                    previous=previous,
                )
                candidates.append((str(terminated.get("finishedAt") or ""), failure))
        if not candidates and status.get("phase") == "Failed":
            failure = ReplicaFailure(
                pod["metadata"]["name"], replica, None, status.get("reason"), status.get("message")
            )
            candidates.append(("~", failure))
    candidates.sort(key=lambda item: item[0])
    return candidates[0][1] if candidates else None


# The queue of a PodGroup that names none: the PodGroup CRD's default for ``spec.queue``.
DEFAULT_QUEUE = "default"


def podgroup_queue(podgroup: JsonDict) -> str:
    """The Volcano queue a PodGroup is in (``spec.queue``; the CRD's ``default`` when unset)."""
    return str((podgroup.get("spec") or {}).get("queue") or DEFAULT_QUEUE)


def queue_mismatch(asked: str | None, seen: GangSnapshot) -> str | None:
    """The queue the gang's PodGroup is in when it is not ``asked``, else None (nothing asked,
    no PodGroup yet, or a job that already finished: its result stands wherever it ran)."""
    if asked is None or seen.podgroup is None or seen.status.finished:
        return None
    actual = podgroup_queue(seen.podgroup)
    return actual if actual != asked else None


def queue_mismatch_message(
    kind: str, namespace: str, name: str, asked: str | None, actual: str | None, *, deleted: bool
) -> str:
    """What a task whose PodGroup landed in another queue says (`GangQueueMismatch`)."""
    end = "it was deleted" if deleted else "its deletion was not confirmed (see the task log)"
    return (
        f"{kind} {namespace}/{name} asked for Volcano queue {asked!r} but its PodGroup was created in "
        f"queue {actual!r}, so {end}. Something between the job and Volcano chose the queue: Volcano's "
        "PodGroup webhook moves queue 'default' to the namespace's scheduling.volcano.sh/queue-name "
        "annotation, a policy webhook or controller may rewrite it, and a Trainer older than v2.3 "
        "ignores the runtime patch that carries the queue. A retry lands in the same queue: remove the "
        f"override, or ask for queue {actual!r}"
    )


def master_pod_name(job_name: str) -> str:
    """A PyTorchJob's rank-0 pod (`JobKind.leader_pod` finds any kind's)."""
    return f"{job_name}-{PYTORCHJOB.leader.lower()}-0"


def owned_by(obj: JsonDict, uid: str | None) -> bool:
    """Whether ``obj`` lists ``uid`` among its ownerReferences."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return uid is not None and any(reference.get("uid") == uid for reference in references)
