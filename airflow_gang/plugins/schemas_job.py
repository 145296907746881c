"""The typed shape of a job in the page's JSON API: a row of the table, and everything on its page.

`service` keeps building plain dicts; the routes (`api`) check them against these models
(`schema_check`), so a key the service produces that is not declared here, or a value of another
type, fails the request (a 500 the tests see) instead of reaching the page unannounced. The
answers as a whole, the queues, the timeline and the error body are in `schemas`.

Times are ISO 8601 strings in UTC; durations are seconds. A key a row does not have (a recorded
job has no ``suspended``, a live one no ``exit_code``) stays absent from the answer rather than
null: every optional field defaults to None and is sent only when the service set it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from airflow_gang.kinds import ANY_JOB_KIND

# States are plain strings (a new one needs no schema change); these are the ones known.
STATE_DESCRIPTION = (
    "Where the job stands or how it ended. Live: queued, stuck (no gang: some replicas hold their "
    "GPUs while the rest wait), admitted, running, disrupted (losing pods now), succeeded, failed. "
    "Recorded (objects deleted): succeeded, failed, admission_timeout, timed_out, lost, killed, "
    "disrupted (given up after a disruption), gone (deleted before its task recorded an end), "
    "ending (its objects are gone while its task is still active and about to record the end). "
    "Other values may be added; the jobs list's `states` names those the filter accepts."
)


class StrictModel(BaseModel):
    """A part of an answer that declares every key it may carry."""

    # The contract: a key the service sends that the schema does not declare is an error.
    model_config = ConfigDict(extra="forbid")


class TaskInstanceState(StrictModel):
    """The Airflow task instance's state now."""

    state: str | None = Field(description="Airflow's state of the task instance (running, success...).")
    try_number: int | None = Field(description="The task instance's current try number.")


class Waiter(StrictModel):
    """A sensor task instance that waits for the job (another task submitted it)."""

    dag_id: str = Field(description="The sensor's DAG id.")
    task_id: str = Field(description="The sensor's task id.")
    run_id: str = Field(description="The sensor's DAG run id.")
    map_index: int = Field(description="The sensor's map index; -1 when it is not mapped.")
    state: str | None = Field(description="The sensor's Airflow state; null when unknown.")
    task_instance_url: str = Field(description="Path of the sensor's task instance in Airflow's UI.")


class AirflowTask(StrictModel):
    """The Airflow task instance (and try) a job belongs to, with links into Airflow's UI."""

    dag_id: str = Field(description="DAG id; when `resolved` is false possibly a label value (a hash).")
    task_id: str = Field(description="Task id; when `resolved` is false possibly a label value (a hash).")
    run_id: str = Field(description="DAG run id; when `resolved` is false possibly a label value (a hash).")
    map_index: int = Field(description="Map index of a mapped task; -1 when the task is not mapped.")
    try_number: int | None = Field(description="The try that submitted the job; null when unknown.")
    resolved: bool = Field(
        description="True when the ids are the real ones, matched in Airflow's metadata DB; false when "
        "the job's labels could not be matched (its run deleted, or hashed ids)."
    )
    task_instance_url: str | None = Field(
        description="Path of the task instance in Airflow's UI; null unless `resolved`."
    )
    dag_url: str | None = Field(description="Path of the DAG in Airflow's UI; null when the DAG is unknown.")
    task_instance: TaskInstanceState | None = Field(
        None, description="On a job's page only: the task instance's state now; null when unreadable."
    )
    waited_by: list[Waiter] | None = Field(
        None, description="On a job's page only: the sensors that wait for this job."
    )


class WaitingGang(StrictModel):
    """A gang not yet admitted: its place in Volcano's admission order, said in one sentence."""

    namespace: str = Field(description="The PodGroup's namespace.")
    name: str = Field(description="The PodGroup's name (the job's name).")
    queue: str = Field(description="The Volcano queue it waits in.")
    phase: str = Field(description="The PodGroup's phase: Pending (not enqueued) or Inqueue.")
    priority: int = Field(description="Its priority: its PriorityClass's value (the default's, else 0).")
    priority_class: str | None = Field(description="Its PriorityClass name; null when it names none.")
    created: str | None = Field(description="When the PodGroup was created (ISO 8601 UTC).")
    needs: dict[str, str] = Field(
        description="What the gang asks for (minResources, else its pods' requests), per resource, as "
        "Kubernetes quantities."
    )
    gangs_ahead: int = Field(description="Gangs of the same queue Volcano considers before this one.")
    never_fits: bool = Field(
        description="True when it can never start as things are configured (bigger than the cluster or "
        "its queue's capability, or no such queue)."
    )
    summary: str = Field(description='One sentence: "needs 4 GPUs; 0 free in queue default; 2 gangs ahead".')


class LiveDisruption(StrictModel):
    """The disruption a running gang is in now, as its objects show it."""

    reason: str | None = Field(
        description="What took the pods: preempted, reclaimed, node_lost, evicted or deleted; null when "
        "the gang just holds fewer pods than its gang size."
    )
    detail: str = Field(description="What the cluster says about it (a pod's condition or status message).")
    pods_lost: int = Field(description="How many pods the gang lost.")
    pods: list[str] = Field(description="Names of the lost pods that still carry a mark.")
    since: str | None = Field(
        description="When the first of them was marked (ISO 8601 UTC); null when no mark has a time."
    )
    requeued: bool = Field(description="True when the gang fell below its gang size: back in its queue.")


class DisruptionEpisode(StrictModel):
    """One disruption episode a task saw and recorded: a gang that lost pods while it ran."""

    number: int = Field(description="The episode's number within its try, from 1.")
    reason: str = Field(description="What took the pods: preempted, reclaimed, node_lost, evicted, deleted.")
    detail: str = Field(description="What the cluster said about it.")
    started_at: str = Field(description="When the first pod was lost (ISO 8601 UTC).")
    queue: str | None = Field(description="The queue the gang ran in.")
    pods: list[str] = Field(description="Names of the pods lost.")
    nodes: list[str] = Field(description="Nodes those pods ran on.")
    requeued: bool = Field(description="True when the gang fell below its gang size: back to its queue.")
    readmitted_at: str | None = Field(
        description="When it held its gang size again after being requeued (ISO 8601 UTC); null if never."
    )
    ended_at: str | None = Field(description="When the episode ended (ISO 8601 UTC); null while it lasts.")


class JobRow(StrictModel):
    """One job of the jobs table, live or recorded.

    A live job (``live: true``) is read from the cluster; a recorded one (``live: false``) is what
    its Airflow task recorded once cleanup, an admission timeout or a kill deleted its objects.
    Keys that only one of them has are optional and absent from the other.
    """

    kind: str = Field(description=f"The job's kind: {ANY_JOB_KIND}.")
    name: str = Field(description="The job's Kubernetes name.")
    namespace: str = Field(description="The job's Kubernetes namespace.")
    uid: str | None = Field(description="The job object's Kubernetes uid.")
    created_at: str | None = Field(
        description="When the job was submitted (ISO 8601 UTC): the table's order and the since/until "
        "filters use it."
    )
    deleting: bool = Field(description="True while Kubernetes deletes the job; false for a recorded one.")
    queue: str | None = Field(description="The Volcano queue of its gang; null without one.")
    state: str = Field(description=STATE_DESCRIPTION)
    job_condition: str | None = Field(
        description="The job's newest true condition (Created, Running, Restarting, Succeeded, Failed); "
        "null for a recorded job."
    )
    gang_scheduling: str | None = Field(
        description="How the gang is scheduled: provider (the provider's PodGroup), training-operator, "
        "trainer (Kubeflow Trainer's Volcano plugin) or disabled (pods placed one by one)."
    )
    podgroup: str | None = Field(description="The name of its Volcano PodGroup; null without one.")
    podgroup_phase: str | None = Field(
        description="The PodGroup's phase (Pending, Inqueue, Running, Unknown, Completed); null without one."
    )
    min_member: int | None = Field(
        description="The gang size: pods Volcano places together (minMember); null for a recorded job."
    )
    replicas: dict[str, int] = Field(
        description='Desired replicas per replica type, e.g. {"Master": 1, "Worker": 3} or {"Node": 2}.'
    )
    replicas_total: int = Field(description="All its desired replicas.")
    replicas_bound: int = Field(description="Replicas whose pod is bound to a node (0 for a recorded job).")
    replicas_running: int = Field(description="Replicas whose pod runs (0 for a recorded job).")
    reason: str | None = Field(
        description="Why it waits, is stuck or disrupted, or how it ended; null: nothing to tell."
    )
    warning: str | None = Field(
        description="Why a job meant to be a gang is not gang-scheduled; null when it is as meant."
    )
    queued_at: str | None = Field(description="When it entered its queue (ISO 8601 UTC).")
    admitted_at: str | None = Field(description="When its gang was admitted (ISO 8601 UTC); null before.")
    finished_at: str | None = Field(description="When it ended (ISO 8601 UTC); null while not finished.")
    queued_seconds: float | None = Field(
        description="Seconds from submission to admission; still counting while queued."
    )
    run_seconds: float | None = Field(
        description="Seconds from admission to the end; still counting while it runs; null before admission."
    )
    gpus: float = Field(description="GPUs (nvidia.com/gpu) the whole gang requests.")
    gpu_seconds: float | None = Field(
        description="GPU-seconds used: gpus times run_seconds (divide by 3600 for GPU-hours)."
    )
    live: bool = Field(
        description="True while its objects exist in the cluster; false for a job as its task recorded it."
    )
    managed: bool = Field(description="True when an Airflow task submitted it (it carries identity labels).")
    airflow: AirflowTask | None = Field(
        None,
        description="The Airflow task instance it belongs to; null for a job Airflow did not submit. Absent "
        "from a live job's `job` on its page, which carries it at the top level.",
    )
    suspended: bool | None = Field(None, description="Live jobs: true while suspended (it holds no pods).")
    suspendable: bool | None = Field(
        None,
        description="Live jobs: whether the page can suspend and resume it (false for a Volcano Job, "
        "which Volcano suspends only by aborting it with a bus Command).",
    )
    disruption: LiveDisruption | None = Field(
        None, description="Live jobs: the disruption the running gang is in now; null when none."
    )
    position: WaitingGang | None = Field(
        None,
        description="A live queued job's page only: its place in Volcano's admission order; null when it "
        "waits in no queue (e.g. suspended).",
    )
    failed_replica: str | None = Field(
        None, description='Recorded jobs: the replica whose failure failed the job, e.g. "Worker 1".'
    )
    exit_code: int | None = Field(None, description="Recorded jobs: that replica's container exit code.")
    recorded_at: str | None = Field(
        None, description="Recorded jobs: when its task last wrote the record (ISO 8601 UTC)."
    )
    disruptions: list[DisruptionEpisode] | None = Field(
        None, description="Recorded jobs: the disruption episodes its task saw, oldest first."
    )
    last_seen_at: str | None = Field(
        None,
        description="Recorded jobs with no recorded end: the last moment anyone saw the job (ISO 8601 UTC); "
        "the timeline ends its bar there.",
    )


class Condition(StrictModel):
    """A Kubernetes status condition of the job or its PodGroup."""

    type: str | None = Field(description="The condition's type (Running, Succeeded, Unschedulable...).")
    status: str | None = Field(description='"True", "False" or "Unknown".')
    reason: str | None = Field(description="Its reason, one CamelCase word.")
    message: str | None = Field(description="Its message, for people.")
    last_transition_time: str | None = Field(description="When its status last changed (ISO 8601 UTC).")


class PodGroupView(StrictModel):
    """The job's Volcano PodGroup: phase, gang size, queue, counts and conditions."""

    name: str | None = Field(description="The PodGroup's name.")
    phase: str | None = Field(description="Its phase: Pending, Inqueue, Running, Unknown or Completed.")
    queue: str | None = Field(description="Its Volcano queue.")
    min_member: int | None = Field(description="Its gang size (minMember).")
    min_resources: dict[str, Any] | None = Field(
        description="What the whole gang asks for (minResources), as Kubernetes quantities; null: unset."
    )
    running: int | None = Field(description="Member pods running, as Volcano counts them.")
    succeeded: int | None = Field(description="Member pods succeeded, as Volcano counts them.")
    failed: int | None = Field(description="Member pods failed, as Volcano counts them.")
    unschedulable: str | None = Field(
        description="The message of its newest true Unschedulable condition: why Volcano cannot place it."
    )
    conditions: list[Condition] = Field(description="Its conditions in the server's order.")


class ReplicaRow(StrictModel):
    """Pods of one replica type: desired, and how many are active, succeeded and failed."""

    type: str = Field(description="The replica type: Master, Worker, or Node for a TrainJob.")
    desired: int = Field(description="Replicas of this type the job asks for.")
    active: int = Field(description="Of them, pods pending or running.")
    succeeded: int = Field(description="Of them, pods succeeded.")
    failed: int = Field(description="Of them, pods failed.")


class PodRow(StrictModel):
    """A replica pod: which replica, where it runs and how its container is or ended."""

    name: str | None = Field(description="The pod's name.")
    replica_type: str | None = Field(description="Its replica type label (master, worker, node).")
    replica_index: str | None = Field(description="Its replica index label (a TrainJob node's rank).")
    phase: str | None = Field(description="The pod's phase: Pending, Running, Succeeded, Failed.")
    node: str | None = Field(description="The node it is bound to; null while unbound.")
    started_at: str | None = Field(description="When the kubelet started it (ISO 8601 UTC).")
    unschedulable: str | None = Field(description="Why the scheduler cannot place it; null when it can.")
    deleting: bool = Field(description="True while Kubernetes deletes the pod.")
    restarts: int = Field(description="Restarts of its training container.")
    exit_code: int | None = Field(description="Its container's exit code once it ended (this or last run).")
    reason: str | None = Field(description="Why its container ended or waits (OOMKilled, ErrImagePull...).")


class EventRow(StrictModel):
    """A Kubernetes event about the job, its PodGroup or its pods."""

    object_kind: str | None = Field(description="Kind of the object it is about.")
    object_name: str | None = Field(description="Name of the object it is about.")
    type: str | None = Field(description="Normal or Warning.")
    reason: str | None = Field(description="Its reason, one CamelCase word (Unschedulable, Evict...).")
    message: str | None = Field(description="Its message.")
    count: int = Field(description="How many times it happened.")
    last_seen: str | None = Field(description="When it last happened (ISO 8601 UTC).")


class Progress(StrictModel):
    """The job's task's ``progress`` entry in Airflow's task state store, or why there is none."""

    value: dict[str, Any] | None = Field(
        description="The entry as the operator wrote it (phase, moments, disruptions; free-form); null: none."
    )
    reason: str | None = Field(description="Why `value` is null; null when there is a value.")


class Recorded(StrictModel):
    """What the task of a deleted job recorded."""

    recorded_at: str | None = Field(description="When its task last wrote the record (ISO 8601 UTC).")
    log_tail: str | None = Field(description="The last lines of the master's log, as kept; null if none.")
    message: str = Field(description="A sentence saying that the objects are gone and this is the record.")


class TimelineEntry(StrictModel):
    """One job's moments on the timeline: queued, admitted, running, finished."""

    name: str = Field(description="The job's name.")
    namespace: str = Field(description="The job's namespace.")
    queue: str | None = Field(description="Its Volcano queue; null without one.")
    state: str = Field(description="Its phase as its moments tell it (queued, running, succeeded...).")
    queued_at: str = Field(description="When it entered its queue (ISO 8601 UTC).")
    admitted_at: str | None = Field(description="When its gang was admitted (ISO 8601 UTC).")
    running_at: str | None = Field(description="When all its replicas ran (ISO 8601 UTC); null if unknown.")
    finished_at: str | None = Field(description="When it ended (ISO 8601 UTC).")
    queue_wait_seconds: float | None = Field(description="Seconds from submission to admission.")
    run_seconds: float | None = Field(description="Seconds from admission to the end.")
    live: bool | None = Field(
        None, description="True while its objects exist; false for a recorded job; null when not said."
    )
    last_seen_at: str | None = Field(
        None, description="A recorded job with no recorded end: the last moment it was seen (ISO 8601 UTC)."
    )


class JobDetail(StrictModel):
    """``GET /api/jobs/{namespace}/{name}``: everything about one job, live or recorded."""

    job: JobRow = Field(description="The job's row (with `position` when it waits in a queue).")
    conditions: list[Condition] = Field(description="The job's conditions; empty for a recorded job.")
    podgroup: PodGroupView | None = Field(description="Its PodGroup; null without one or once deleted.")
    replicas: list[ReplicaRow] = Field(description="Per replica type, desired and pod counts.")
    pods: list[PodRow] = Field(description="Its pods, leader first, then by type and index.")
    events: list[EventRow] = Field(description="Recent events about it, newest first (at most 50).")
    labels: dict[str, str] = Field(description="Its airflow-gang.io/ identity labels.")
    airflow: AirflowTask | None = Field(
        description="Its Airflow task instance, its state, the sensors waiting; null: not from Airflow."
    )
    progress: Progress = Field(description="Its task's progress entry, or why there is none.")
    timeline: TimelineEntry | None = Field(description="Its moments; null when it has none yet.")
    recorded: Recorded | None = Field(description="For a deleted job, what its task recorded; else null.")
    warnings: list[str] = Field(description="What could not be read, the rest shown anyway.")
    generated_at: str = Field(description="When the answer was made (ISO 8601 UTC).")
