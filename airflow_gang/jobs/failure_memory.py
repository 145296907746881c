"""`FailureMemory`: the failing replica a wait saw, and its log tail read while it could be.

A TrainJob's pods run under a batch Job: a failing node restarts in place until the Job's
``backoffLimit``, and then the Job controller deletes the job's pods. By the time the TrainJob
says ``Failed`` there may be no pod left to name the failing rank or to read its log from. So
each wait (in the worker or the triggerer) notes the failing replica in every look, reads the
new one's log tail once, and hands both to `observation.failure_error` at the end. A PyTorchJob's
pods outlive its failure (``cleanPodPolicy`` None), so nothing is read during its wait.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from airflow_gang.kinds import JobKind
from airflow_gang.model.gang_state import ReplicaFailure, failing_replica

JsonDict = dict[str, Any]
# How a log tail that could not be read starts (`observation.log_tail`): read again next look.
UNAVAILABLE = "(log unavailable"


class FailureMemory:
    """The last failing replica seen in a wait's looks, and the log tail read when it was new."""

    def __init__(self, job_kind: JobKind) -> None:
        self.job_kind = job_kind
        self.failure: ReplicaFailure | None = None
        self.tail = ""

    @property
    def needed(self) -> bool:
        """Whether this kind's pods may be gone when its failure is read (then the wait notes it)."""
        return not self.job_kind.pods_outlive_failure

    def noticed(self, pods: list[JsonDict]) -> ReplicaFailure | None:
        """Note the failing replica among ``pods``; returns it when it is new (read its tail then)."""
        if not self.needed:
            return None
        failure = failing_replica(pods, self.job_kind)
        if failure is None:
            return None
        known = self.failure
        self.failure = failure
        read = bool(self.tail) and not self.tail.startswith(UNAVAILABLE)
        if read and known is not None and (known.pod, known.exit_code) == (failure.pod, failure.exit_code):
            return None
        return failure

    def to_json(self) -> JsonDict | None:
        if self.failure is None:
            return None
        return {**asdict(self.failure), "log_tail": self.tail}

    @classmethod
    def from_json(cls, job_kind: JobKind, data: JsonDict | None) -> FailureMemory:
        memory = cls(job_kind)
        if data:
            memory.failure = ReplicaFailure(
                pod=str(data.get("pod")),
                replica=str(data.get("replica")),
                exit_code=data.get("exit_code"),
                reason=data.get("reason"),
                message=data.get("message"),
                previous=bool(data.get("previous")),
            )
            memory.tail = str(data.get("log_tail") or "")
        return memory
