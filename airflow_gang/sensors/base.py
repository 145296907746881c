"""Sensors for jobs submitted with ``wait_for_completion=False``: admission, then completion.

Both poke once (one cheap read of job, PodGroup and pods) and, when ``deferrable``, hand the rest
of the wait to `GangJobTrigger`. They use the same decision as the operator
(`airflow_gang.model.gang_state.gang_status`) and ride out API outages as it does: each read retries
briefly and quietly (`WAIT_RETRY_POLICY`, retries at DEBUG), and an outage that outlasts that is
reported once per episode (`airflow_gang.model.outage`), in poke, reschedule and deferrable mode.
With ``admission_timeout`` they also enforce the operator's queue deadline, counted from the
job's creation: a job still queued then is deleted (with its PodGroup and pods, so nothing keeps
holding GPUs) and `GangAdmissionTimeout` raised.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSensorTimeout

from airflow_gang import links
from airflow_gang.exceptions import GangAdmissionTimeout, GangJobLost, PyTorchJobFailed
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import WAIT_RETRY_POLICY
from airflow_gang.jobs import cleanup, observation, outcome
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.wait_plan import WaitFor, WaitPlan
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind, job_kind_named
from airflow_gang.model.gang_state import GangPhase, GangSnapshot, GangStatus
from airflow_gang.model.outage import DEFAULT_API_UNAVAILABLE_TIMEOUT, Outage, unavailable_timeout_seconds
from airflow_gang.model.validation import positive_seconds
from airflow_gang.reports.timeline import finished_at, parse_time
from airflow_gang.state import history, task_store
from airflow_gang.triggers import handover
from airflow_gang.triggers.events import EventStatus, GangEvent

if TYPE_CHECKING:
    from airflow.sdk import Context


# The parameters every gang job sensor takes; each sensor's class docstring ends with them, so it
# documents every parameter it takes in one place.
SENSOR_PARAMETERS = """
    :param job_name: the job (XCom ``job_name`` of the operator that submitted it; templated).
    :param namespace: default: the connection's, else ``default``.
    :param kubernetes_conn_id: cncf ``kubernetes`` connection.
    :param admission_timeout: seconds (or timedelta) from the job's creation; a job still queued
        then is deleted and `GangAdmissionTimeout` raised. Default None: wait for the queue.
    :param log_tail_lines: how many lines of rank 0's log a succeeded job leaves in the task log
        and its record (and in failures, lines of the failing replica).
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param api_unavailable_timeout: as for the operators: one API outage longer than this fails
        the sensor with `GangApiUnavailable`; nothing is deleted.
    :param kwargs: `BaseSensorOperator`'s (``mode``, ``timeout``, ``poke_interval``, ``soft_fail``...).

    The sensor's ``timeout`` raises `AirflowSensorTimeout` in every mode, deferrable included,
    so ``soft_fail`` works.
"""


class _GangJobSensor(BaseSensorOperator):
    template_fields: Sequence[str] = (
        "job_name",
        "namespace",
        "kubernetes_conn_id",
        "gang_scheduling",
        "admission_timeout",
    )
    wait_for: ClassVar[WaitFor] = "completion"
    default_kind: ClassVar[JobKind] = DEFAULT_JOB_KIND
    operator_extra_links = links.JOB_LINKS

    def __init__(
        self,
        *,
        job_name: str,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        gang_scheduling: str = "provider",
        admission_timeout: dt.timedelta | float | None = None,
        log_tail_lines: int = 100,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        api_unavailable_timeout: dt.timedelta | float | None = DEFAULT_API_UNAVAILABLE_TIMEOUT,
        job_kind: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kind = job_kind_named(job_kind) if job_kind else self.default_kind
        self.job_name = job_name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.gang_scheduling = gang_scheduling
        self.admission_timeout = admission_timeout
        self.log_tail_lines = log_tail_lines
        self.deferrable = deferrable
        self.api_unavailable_timeout = api_unavailable_timeout

    @cached_property
    def hook(self) -> GangJobHook:
        return GangJobHook(conn_id=self.kubernetes_conn_id)

    def _namespace(self) -> str:
        return self.namespace or self.hook.get_namespace() or "default"

    @cached_property
    def _outage(self) -> Outage:
        timeout = unavailable_timeout_seconds(self.api_unavailable_timeout)
        return Outage(f"{self.kind.kind} {self.job_name}", timeout=timeout)

    def _status(self) -> tuple[GangStatus, dict[str, Any] | None]:
        namespace = self._namespace()
        with self.hook.riding_out(self._outage, name=self.job_name, namespace=namespace):
            seen = observation.observe(
                self.hook, self.job_name, namespace, self.gang_scheduling, job_kind=self.kind
            )
        self._seen: GangSnapshot | None = seen
        context = getattr(self, "_context", None)
        if context is not None and seen.job is not None and not getattr(self, "_started", False):
            waits = {"for_completion": self.wait_for == "completion", "for_admission": True}
            task_store.record_start(context, seen.job, self.gang_scheduling, **waits)
            self._started = True
        status, job = seen.status, seen.job
        self.log.info("gang job %s/%s: %s", namespace, self.job_name, status.describe())
        return status, job

    def _done(self, status: GangStatus) -> bool:
        raise NotImplementedError

    def _admission_timeout_seconds(self) -> float | None:
        return positive_seconds(self.admission_timeout, "admission_timeout")

    def _admission_deadline(self, job: dict[str, Any] | None) -> dt.datetime | None:
        """Creation time + ``admission_timeout``: the operator's clock, whoever waits."""
        seconds = self._admission_timeout_seconds()
        created = parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp"))
        if seconds is None or created is None:
            return None
        return created + dt.timedelta(seconds=seconds)

    def poke(self, context: Context) -> bool:
        # Quiet retries: an outage is reported once per episode (_status), not once per retry.
        with self.hook.retries(WAIT_RETRY_POLICY):
            return self._judge(*self._status())

    def _judge(self, status: GangStatus, job: dict[str, Any] | None) -> bool:
        """Done, not yet, or raise (job gone, failed, or queued past its admission deadline)."""
        namespace = self._namespace()
        if status.phase is GangPhase.LOST:
            raise GangJobLost(
                f"{self.kind.kind} {namespace}/{self.job_name} does not exist",
                name=self.job_name,
                namespace=namespace,
            )
        deadline = self._admission_deadline(job)
        if deadline is not None and not status.admitted and dt.datetime.now(dt.UTC) >= deadline:
            uid = (job or {}).get("metadata", {}).get("uid")
            self._gave_up_at: str | None = dt.datetime.now(dt.UTC).isoformat()  # the record's end
            gone = cleanup.delete_gang(
                self.hook,
                self.job_name,
                namespace,
                uid,
                gang_scheduling=self.gang_scheduling,
                reason="gang not admitted in time",
                logger=self.log,
                job_kind=self.kind,
            )
            seconds = self._admission_timeout_seconds()
            raise observation.admission_timeout(
                self.job_name, namespace, status, seconds, self.kind, deleted=gone
            )
        return self._done(status)

    def execute(self, context: Context) -> Any:
        links.persist(context, self._namespace(), self.job_name)
        self._tell_the_page(context)
        self._context: Context | None = context
        with self._recording_the_end(context):
            return self._wait(context)

    def _wait(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        with self.hook.retries(WAIT_RETRY_POLICY):
            status, job = self._status()  # one read serves the first check and the trigger's uid
            if self._judge(status, job):
                return None
        wait_for = self.wait_for
        if not status.admitted and wait_for == "completion" and self._admission_timeout_seconds():
            wait_for = "both"  # the trigger then also enforces the queue deadline
        plan = WaitPlan.for_job(
            job,
            self.gang_scheduling,
            wait_for,
            admission_timeout=None if status.admitted else self._admission_timeout_seconds(),
        )
        if self.timeout:
            plan = plan.until(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=float(self.timeout)))
        trigger, _ = handover.trigger_for(
            self.job_name,
            self._namespace(),
            (job or {}).get("metadata", {}).get("uid", ""),
            plan,
            poll_interval=float(self.poke_interval),
            kubernetes_conn_id=self.kubernetes_conn_id,
            hook_kwargs=self.hook.async_hook_kwargs(),
            delete_on_kill=False,
            api_unavailable_timeout=unavailable_timeout_seconds(self.api_unavailable_timeout),
            job_kind=self.kind.kind,
        )
        # The sensor's own timeout is the trigger's execution deadline; no framework timeout on
        # top, so the trigger's message (and soft_fail) decide how it ends.
        self.defer(trigger=trigger, method_name="execute_complete")

    @contextlib.contextmanager
    def _recording_the_end(self, context: Context, uid: str | None = None) -> Iterator[None]:
        """Keep, in this task's ``gang_history``, how the job ended when this sensor saw it end:
        the job's page then shows its outcome after cleanup deleted it, although the task that
        submitted it did not wait (`airflow_gang.state.history`)."""
        namespace = self._namespace()
        known = {"metadata": {"name": self.job_name, "namespace": namespace, "uid": uid}}
        try:
            yield
        except PyTorchJobFailed as error:
            moments = self._moments()
            reason = history.failure_headline(str(error))
            details: dict[str, Any] = {"failed_replica": error.replica, "exit_code": error.exit_code}
            details["reason"] = reason
            task_store.record_end(
                context, self._job_or(known), "failed", log_tail=error.log_tail, **moments, **details
            )
            raise
        except GangAdmissionTimeout as error:
            ended: dict[str, Any] = {"reason": str(error), "finished_at": getattr(self, "_gave_up_at", None)}
            task_store.record_end(context, self._job_or(known), "admission_timeout", **ended)
            raise
        except GangJobLost:
            task_store.record_end(context, self._job_or(known), "lost")
            raise
        if self.wait_for == "completion":
            tail = self._leader_tail(namespace)
            task_store.record_end(context, self._job_or(known), "succeeded", log_tail=tail, **self._moments())

    def _leader_tail(self, namespace: str) -> str | None:
        """Rank 0's last lines, for the task log and the job's record (the Gang jobs page shows
        them after cleanup deleted the job); None when they cannot be read: a record without a
        tail is no reason to fail a job that succeeded."""
        try:
            with self.hook.retries(WAIT_RETRY_POLICY):
                tail = outcome.leader_log_tail(
                    self.hook, self.kind, self.job_name, namespace, self.log_tail_lines
                )
        except Exception as error:
            self.log.debug("could not read rank 0's log for the job's record: %s", error)
            return None
        if tail.strip():
            leader = "master replica" if self.kind.leader == "Master" else "rank 0"
            self.log.info("%s log (last %d lines):\n%s", leader, self.log_tail_lines, tail.rstrip())
        return tail

    def _job_or(self, known: dict[str, Any]) -> dict[str, Any]:
        seen = getattr(self, "_seen", None)
        return seen.job if seen is not None and seen.job is not None else known

    def _moments(self) -> dict[str, Any]:
        """When the gang was admitted and the job ended, from the last look (None: unknown)."""
        seen = getattr(self, "_seen", None)
        if seen is None or seen.job is None:
            return {"admitted_at": None, "finished_at": None}
        ended = finished_at(seen.job)
        return {"admitted_at": seen.admitted_at(), "finished_at": ended.isoformat() if ended else None}

    def _tell_the_page(self, context: Context) -> None:
        """Name the job this sensor waits for in the task state store: the Gang jobs page links
        it as the task that waits (a convenience: a store that cannot be written is no failure)."""
        store = context.get("task_state_store")
        if store is None:
            return
        try:
            store.set(
                history.WAITS_FOR_KEY, history.waits_for(self.job_name, self._namespace(), self.wait_for)
            )
        except Exception as error:
            self.log.debug("task state store unavailable: %s", error)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        ended = GangEvent.of(event)
        self._gave_up_at = ended.deleted_at  # the trigger deleted the job then (admission timeout)
        with self._recording_the_end(context, ended.uid or None):
            self._seen = self._look_again(ended)
            self._complete(ended)

    def _look_again(self, ended: GangEvent) -> GangSnapshot | None:
        """The job as it ended, for its record (None: gone, or the API cannot say)."""
        if ended.status not in (EventStatus.SUCCEEDED, EventStatus.FAILED):
            return None
        try:
            with self.hook.retries(WAIT_RETRY_POLICY):
                return observation.observe(
                    self.hook, self.job_name, ended.namespace, self.gang_scheduling, job_kind=self.kind
                )
        except Exception as error:  # the record is a convenience; the event decides
            self.log.debug("could not read the job for its record: %s", error)
            return None

    def _complete(self, ended: GangEvent) -> None:
        if ended.status is EventStatus.FAILED:
            with self.hook.retries(WAIT_RETRY_POLICY):
                seen = FailureMemory.from_json(self.kind, ended.failure)
                raise observation.failure_error(
                    self.hook, self.job_name, ended.namespace, self.log_tail_lines, self.kind, seen=seen
                )
        if ended.is_execution_timeout:
            # The sensor's own ``timeout``, as in poke mode: soft_fail then skips the task.
            raise AirflowSensorTimeout(
                f"sensor timeout of {self.timeout}s reached: waiting for {self.kind.kind} "
                f"{ended.namespace}/{self.job_name}: {ended.message}"
            )
        error = ended.to_exception(waited_seconds=self._admission_timeout_seconds())
        if error is not None:
            raise error


class GangAdmissionSensor(_GangJobSensor):
    __doc__ = (
        """Succeeds once the job's gang is admitted by its queue; fails if the job is gone.

    :param job_kind: the job's kind, ``PyTorchJob`` (default), ``TrainJob`` (then pass
        ``gang_scheduling="trainer"``) or ``VolcanoJob`` (then ``gang_scheduling="volcano"``).
    :param gang_scheduling: how the job was submitted (``disabled`` counts bound replicas).
    """
        + SENSOR_PARAMETERS
    )

    wait_for: ClassVar[WaitFor] = "admission"

    def _done(self, status: GangStatus) -> bool:
        return status.admitted


class GangCompletionSensor(_GangJobSensor):
    """Succeeds when the job succeeds; raises the kind's `PyTorchJobFailed` when it fails: the
    base of each kind's completion sensor (`PyTorchJobSensor`, `TrainJobSensor`,
    `VolcanoJobSensor`)."""

    FAILURE_STATES: ClassVar[tuple[GangPhase, ...]] = (GangPhase.FAILED,)

    def _done(self, status: GangStatus) -> bool:
        if status.phase in self.FAILURE_STATES:
            raise observation.failure_error(
                self.hook, self.job_name, self._namespace(), self.log_tail_lines, self.kind
            )
        return status.phase is GangPhase.SUCCEEDED
