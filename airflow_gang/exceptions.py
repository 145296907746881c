"""The provider's exceptions: one base class, four outcomes a DAG author may want to tell apart.

Messages follow one shape — what, which object, what was observed, and the fix — because they
end up in a task log read by someone who did not write the DAG.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException


class GangError(AirflowException):
    """Base class of every airflow-gang error; carries the job it is about when there is one."""

    def __init__(self, message: str, *, name: str | None = None, namespace: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.namespace = namespace


class GangSpecError(GangError, ValueError):
    """The job description is invalid; raised before anything is sent to the cluster.

    Retrying cannot help, so `gang_retry_policy()` fails the task at once.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class GangAdmissionTimeout(GangError):
    """The gang was not admitted by its queue within `admission_timeout`.

    The job and its PodGroup have already been deleted when this is raised, so a retry starts
    from a clean slate.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        queue: str | None = None,
        waited_seconds: float | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, name=name, namespace=namespace)
        self.queue = queue
        self.waited_seconds = waited_seconds
        self.reason = reason


class GangQueueMismatch(GangError):
    """The job's PodGroup appeared in another Volcano queue than the one the task asked for.

    Something between the job and Volcano chose the queue: a webhook (Volcano's own moves a
    PodGroup of queue ``default`` to its namespace's ``scheduling.volcano.sh/queue-name``), a
    policy engine, or a controller that ignores where the job names its queue (a Trainer older
    than v2.3 ignores ``runtimePatches``). The job was deleted as the task failed; a retry would
    land in the same queue, so `gang_retry_policy()` fails the task at once.

    :param asked_queue: the queue the task asked for.
    :param queue: the queue the PodGroup is in.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        asked_queue: str | None = None,
        queue: str | None = None,
    ) -> None:
        super().__init__(message, name=name, namespace=namespace)
        self.asked_queue = asked_queue
        self.queue = queue


class GangJobDisrupted(GangError):
    """The running gang lost pods (preempted, reclaimed, node lost, evicted) and the task's
    ``on_disruption`` policy gave the job up: ``retry``, or more than ``max_disruptions`` episodes
    in one try. The job was deleted (``deleted`` says whether that was seen) so a retry submits a
    fresh one, which resumes from the task's checkpoint location; `gang_retry_policy()` retries
    it after ``disruption_retry_delay``.

    :param reason: ``preempted``, ``reclaimed``, ``node_lost``, ``evicted`` or ``deleted``.
    :param disruptions: how many episodes this try saw.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        reason: str | None = None,
        disruptions: int = 0,
        deleted: bool = False,
    ) -> None:
        super().__init__(message, name=name, namespace=namespace)
        self.reason = reason
        self.disruptions = disruptions
        self.deleted = deleted


class PyTorchJobFailed(GangError):
    """The PyTorchJob reached the `Failed` condition; names the failing replica and its exit code."""

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        replica: str | None = None,
        exit_code: int | None = None,
        reason: str | None = None,
        log_tail: str | None = None,
    ) -> None:
        super().__init__(message, name=name, namespace=namespace)
        self.replica = replica
        self.exit_code = exit_code
        self.reason = reason
        self.log_tail = log_tail


class TrainJobFailed(PyTorchJobFailed):
    """The TrainJob reached its `Failed` condition; names the failing node (rank), its exit code and
    log tail. A `PyTorchJobFailed`, so one ``except`` clause and `gang_retry_policy` cover both kinds."""


class VolcanoJobFailed(PyTorchJobFailed):
    """The Volcano Job ended ``Failed`` (its policies gave up: ``maxRetry`` restarts used, or an
    ``AbortJob``/``TerminateJob``); names the failing task, index, exit code and log tail. A
    `PyTorchJobFailed`, so one ``except`` clause and `gang_retry_policy` cover every kind."""


class GangJobLost(GangError):
    """The job disappeared while we waited for it (deleted by someone else, or its namespace)."""


class GangApiError(GangError):
    """The cluster refused or failed a request in a way retrying will not fix; names verb and resource."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(message, name=name, namespace=namespace)
        self.status = status
        self.verb = verb
        self.resource = resource


class GangPermissionError(GangApiError):
    """HTTP 403: the service account behind the connection lacks a verb on a resource."""


class GangCRDNotInstalled(GangApiError):
    """The PyTorchJob (or PodGroup/Queue) API is not served by the cluster."""


class GangApiUnavailable(GangApiError):
    """The Kubernetes API could not be reached for longer than ``api_unavailable_timeout``.

    Nothing was deleted by the failing try: the job may be training fine behind the outage. The
    next try finds it by its labels and waits on. A task that fails for good (no retry left)
    no longer owns its job: the scheduler's orphan reaper (`airflow_gang.state.reaper`) deletes it,
    so it holds no GPUs with nobody waiting for its result. Set ``retries`` > 0 (or raise
    ``api_unavailable_timeout``) to ride out long outages.
    """

    def __init__(
        self,
        message: str,
        *,
        unavailable_seconds: float,
        last_error: str,
        name: str | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(message, status=None, name=name, namespace=namespace)
        self.unavailable_seconds = unavailable_seconds
        self.last_error = last_error
