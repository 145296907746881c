"""`GangJobOperator`: submit one gang job, wait for admission, then for training: any kind.

The flow (DESIGN.md §3), the same for a PyTorchJob and a TrainJob: validate and build manifests
before any API call; take over an earlier try's job or submit a new one (`jobs.submission`);
publish ``job_name``/``job_namespace`` before waiting; wait for admission (an admission timeout
deletes the job and raises `GangAdmissionTimeout`), in the worker (`worker_wait`) or the
triggerer (`GangJobTrigger`), then for completion; log rank 0's tail; record the job's end in the
task state store (the Gang jobs page shows it after cleanup); return a small dict; clean up per
``delete_on_finish``.

A job is deleted only for its admission timeout, a person's kill or clear (``on_kill``), the
task's own ``execution_timeout``, or ``delete_on_finish`` after its end; never because the API
could not be read.

What differs between kinds is left to the subclass (`PyTorchJobOperator`, `TrainJobOperator`):
``job_kind``, the job arguments and ``build_spec``, and ``prepare`` (the cluster checks before
submitting, and the `JobRecipe` that builds the manifests). Subclasses combine this class with an
arguments base that provides ``identity``, ``admission_timeout_seconds``, ``namespace`` and
``kubernetes_conn_id``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.exceptions import AirflowTaskTimeout

from airflow_gang import links
from airflow_gang.exceptions import GangJobLost
from airflow_gang.gang_state import GangPhase, GangStatus
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import WAIT_RETRY_POLICY
from airflow_gang.job_kinds import JobKind
from airflow_gang.jobs import checkpoints, cleanup, observation, submission
from airflow_gang.jobs.disruption import GiveUp
from airflow_gang.jobs.disruption_report import job_given_up
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.outcome import deletes_on_finish, read_outcome
from airflow_gang.jobs.recipe import JobRecipe
from airflow_gang.jobs.result import job_result
from airflow_gang.jobs.wait_plan import WaitPlan
from airflow_gang.operators import state_store
from airflow_gang.operators.state_store import STATE_STORE_JOB_KEY, STATE_STORE_PROGRESS_KEY
from airflow_gang.operators.wait_arguments import GangWaitArguments
from airflow_gang.operators.worker_wait import WorkerWait
from airflow_gang.outage import Outage, unavailable_timeout_seconds
from airflow_gang.triggers import handover
from airflow_gang.triggers.events import TRIGGER_DELETED, EventStatus, GangEvent

if TYPE_CHECKING:
    from airflow.sdk import Context

JsonDict = dict[str, Any]


class GangJobOperator(GangWaitArguments):
    """Run one gang job and wait for it (see the module docstring): the base of `PyTorchJobOperator`
    and `TrainJobOperator`, whose job arguments are documented there; how it waits is
    `GangWaitArguments`'."""

    ui_color = "#f0e4ff"
    operator_extra_links = links.JOB_LINKS
    job_kind: ClassVar[JobKind]
    # Provided by the arguments base a subclass combines this class with.
    namespace: str | None
    kubernetes_conn_id: str

    if TYPE_CHECKING:

        def identity(self, context: Context) -> tuple[str, dict[str, str]]: ...

        def admission_timeout_seconds(self) -> float | None: ...

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._submitted: JsonDict | None = None
        self._waiter: WorkerWait | None = None
        self._reattached = False
        # The job's gang mode, once known: from its recipe, or from the wait it resumes.
        self._gang: str | None = None

    @cached_property
    def hook(self) -> GangJobHook:
        return GangJobHook(conn_id=self.kubernetes_conn_id)

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        """Check the cluster can run ``spec`` (its kinds served, its queue open...) and return the
        recipe that builds its manifests; raises `GangSpecError`/`GangCRDNotInstalled` first."""
        raise NotImplementedError

    @property
    def gang_mode(self) -> str | None:
        """The job's gang mode, for deleting it (None: not known yet: the provider's)."""
        return self._gang

    @contextlib.contextmanager
    def _riding_out_outages(self, name: str, namespace: str) -> Iterator[GangJobHook]:
        """The hook inside the block: quick quiet retries per call, and an API that cannot be
        reached waited for (`airflow_gang.outage`) up to ``api_unavailable_timeout``."""
        outage = Outage(
            f"{self.job_kind.kind} {namespace}/{name}",
            timeout=unavailable_timeout_seconds(self.api_unavailable_timeout),
        )
        with (
            self.hook.retries(WAIT_RETRY_POLICY),
            self.hook.riding_out(outage, name=name, namespace=namespace),
        ):
            yield self.hook

    # --- execute: submit, then wait here or in the triggerer, then finish ---------------------

    def execute(self, context: Context) -> Any:
        spec = checkpoints.with_checkpoint_env(self.build_spec(), self.checkpoint_location(context))
        name, identity = self.identity(context)
        namespace = self.namespace or self.hook.get_namespace() or "default"
        with self._riding_out_outages(name, namespace) as hook:
            recipe = self.prepare(hook, spec, namespace)
            gang = self._gang = recipe.gang_scheduling
            job = self._take_over_or_submit(context, recipe, submission.Target(name, namespace, identity))
            if not self.wait_for_completion and not self.wait_for_admission:
                return job_result(job, "submitted", None, None)
            plan = WaitPlan.for_job(
                job,
                gang,
                "both" if self.wait_for_completion else "admission",
                admission_timeout=self.admission_timeout_seconds(),
                expected_queue=recipe.expected_queue,
                on_disruption=self.on_disruption,
                max_disruptions=self.max_disruptions,
            )
            if self.deferrable:
                seen = observation.observe(
                    hook, name, namespace, gang, job["metadata"]["uid"], job_kind=self.job_kind
                )
                self._record_progress(context, seen.status)
                # A wait the trigger would end at once is finished here: a task resumed seconds
                # after it deferred is what apache/airflow#72716 fails.
                ends_now = seen.status.finished or seen.status.phase is GangPhase.LOST
                if not ends_now and not (plan.wait_for == "admission" and seen.status.admitted):
                    self._defer(context, job, plan)
            return self._wait_in_worker(context, job, plan)

    def _take_over_or_submit(
        self, context: Context, recipe: JobRecipe, target: submission.Target
    ) -> JsonDict:
        stored = state_store.read(context, STATE_STORE_JOB_KEY)
        job, attached = submission.take_over_or_submit(
            self.hook,
            recipe,
            target,
            stored=stored if isinstance(stored, dict) else None,
            reuse_succeeded=self.reuse_succeeded_job,
            first_try=submission.first_try_since_clear(
                int(getattr(context["ti"], "max_tries", 0) or 0), int(self.retries or 0)
            ),
            logger=self.log,
        )
        self._reattached = attached is not None and not attached.finished
        self._submitted = job
        self._remember(context, job)
        waits = {"for_completion": self.wait_for_completion, "for_admission": self.wait_for_admission}
        state_store.record_start(context, job, recipe.gang_scheduling, **waits)
        return job

    def _remember(self, context: Context, job: JsonDict, *, delivered: bool = False) -> None:
        links.persist(context, job["metadata"]["namespace"], job["metadata"]["name"])
        # The orphan reaper (airflow_gang.reaper) finds jobs through this entry.
        conn, delete_on_finish = self.kubernetes_conn_id, self.delete_on_finish
        state_store.remember_job(context, job, conn, delete_on_finish, delivered=delivered)

    def _record_progress(self, context: Context, status: GangStatus) -> None:
        if self.report_progress:
            progress = status.progress(dt.datetime.now(dt.UTC).isoformat())
            if self._waiter is not None:
                progress.update(self._waiter.disruptions.progress())
            state_store.write(context, STATE_STORE_PROGRESS_KEY, progress)

    # --- waiting in the worker ----------------------------------------------------------------

    def _wait_in_worker(self, context: Context, job: JsonDict, plan: WaitPlan) -> Any:
        self._waiter = WorkerWait(
            self.hook,
            self.log,
            self.poll_interval,
            on_change=partial(self._record_progress, context),
            follow_logs=self.get_logs,
            job_kind=self.job_kind,
            on_disruption=lambda seen: state_store.record_disruptions(context, job, seen.to_json()),
            task={"dag_id": context["ti"].dag_id, "task_id": context["ti"].task_id},
        )
        try:
            end = self._waiter.run(job, plan)
        except AirflowTaskTimeout:
            # execution_timeout: the task gives up, so nobody would wait for the job any more.
            state_store.record_end(context, job, "timed_out", reason="execution_timeout reached")
            self._give_up(job, "execution_timeout reached")
            raise
        status = end.seen.status
        if end.kind == "lost":
            return self._job_lost(context, job)
        if end.kind == "admission_timeout":
            metadata, seconds = job["metadata"], self.admission_timeout_seconds()
            gone = self._give_up(job, "gang not admitted in time")
            error = observation.admission_timeout(
                metadata["name"], metadata["namespace"], status, seconds, self.job_kind, deleted=gone
            )
            ended: JsonDict = {"reason": str(error), "finished_at": self._gave_up_at}
            state_store.record_end(context, job, "admission_timeout", **ended)
            raise error
        if end.kind == "disrupted" and end.give_up is not None:
            return self._disrupted(context, job, end.give_up, end.admitted_at)
        if end.kind == "queue_mismatch":  # a retry would land in the same queue: fail for good
            gone = self._give_up(job, "its PodGroup is in another queue than asked")
            wrong = observation.queue_mismatch(
                job, plan.expected_queue, end.seen, self.job_kind, deleted=gone
            )
            state_store.record_end(context, job, "failed", reason=str(wrong))
            raise wrong
        if end.kind == "admitted":
            return job_result(end.seen.job or job, "admitted", end.admitted_at, None)
        return self._finish(context, job, status.phase.value, end.admitted_at, None, seen_failure=end.failure)

    def _give_up(self, job: JsonDict, reason: str) -> bool:
        """Delete a job nobody will wait for; whether it was confirmed gone (`cleanup.give_up`)."""
        if self._waiter is not None:
            self._waiter.stop_following(timeout=1.0)
        self._submitted, self._gave_up_at = None, dt.datetime.now(dt.UTC).isoformat()  # the record's end
        return cleanup.give_up(
            self.hook, job, reason, gang_scheduling=self.gang_mode, job_kind=self.job_kind, logger=self.log
        )

    def _disrupted(self, context: Context, job: JsonDict, give_up: GiveUp, admitted_at: str | None) -> Any:
        """The ``on_disruption`` policy gave the running gang up: delete it and fail the try."""
        episodes = self._waiter.disruptions.to_json() if self._waiter is not None else []
        gone, seconds = self._give_up(job, give_up.message), self.admission_timeout_seconds()
        error = job_given_up(job, self.job_kind.kind, give_up, episodes, deleted=gone, waited_seconds=seconds)
        details: JsonDict = {"reason": str(error), "disruptions": episodes, "admitted_at": admitted_at}
        state_store.record_end(context, job, give_up.end_state, finished_at=self._gave_up_at, **details)
        raise error

    # --- deferral -----------------------------------------------------------------------------

    def _defer(self, context: Context, job: JsonDict, plan: WaitPlan) -> None:
        started = context["ti"].start_date
        if self.execution_timeout is not None and started is not None:
            plan = plan.until(started + self.execution_timeout)
        metadata = job["metadata"]
        trigger, timeout = handover.trigger_for(
            metadata["name"],
            metadata["namespace"],
            metadata["uid"],
            plan,
            poll_interval=self.poll_interval,
            kubernetes_conn_id=self.kubernetes_conn_id,
            hook_kwargs=self.hook.async_hook_kwargs(),
            api_unavailable_timeout=unavailable_timeout_seconds(self.api_unavailable_timeout),
            reattached=self._reattached,
            job_kind=self.job_kind.kind,
        )
        kwargs = {**plan.kwargs(), "reattached": self._reattached}
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timeout, kwargs=kwargs)

    def execute_complete(self, context: Context, event: dict[str, Any], **wait: Any) -> Any:
        ended = GangEvent.of(event)
        name, namespace = ended.name, ended.namespace
        if self.report_progress:
            state_store.write(context, STATE_STORE_PROGRESS_KEY, ended.progress)
        # The event says it too: dag.test() resumes a task without the defer kwargs.
        self._reattached = bool(wait.pop("reattached", False) or ended.reattached)
        self._gang = (
            wait.get("gang_scheduling") or (event.get("wait") or {}).get("gang_scheduling") or self._gang
        )
        known = {"metadata": {"name": name, "namespace": namespace, "uid": ended.uid}}
        if ended.status is EventStatus.LOST:
            return self._job_lost(context, known)
        error = ended.to_exception(waited_seconds=self.admission_timeout_seconds())
        episodes, admitted_at = list(ended.disruptions), ended.admitted_at
        if ended.is_execution_timeout:  # the task gives up: nobody will wait for the job
            state_store.record_end(context, known, "timed_out", reason=ended.message)
            self._give_up(known, ended.message)
        elif (state := TRIGGER_DELETED.get(ended.status)) is not None:  # the trigger deleted the job
            details: JsonDict = {"reason": str(error), "disruptions": episodes, "admitted_at": admitted_at}
            state_store.record_end(context, known, state, finished_at=ended.deleted_at, **details)
        if error is not None:
            raise error
        with self._riding_out_outages(name, namespace) as hook:
            job = hook.get_job(self.job_kind, name, namespace) or known
            self._submitted = job
            if ended.status is EventStatus.ADMITTED:
                return job_result(job, "admitted", ended.admitted_at, None)
            seen = FailureMemory.from_json(self.job_kind, ended.failure)
            return self._finish(
                context, job, ended.status, ended.admitted_at, ended.finished_at, seen_failure=seen,
                disruptions=episodes,
            )  # fmt: skip

    # --- the end ------------------------------------------------------------------------------

    def _finish(
        self,
        context: Context,
        job: JsonDict,
        state: str,
        admitted_at: str | None,
        finished_at: str | None,
        *,
        seen_failure: FailureMemory | None = None,
        disruptions: list[JsonDict] | None = None,
    ) -> Any:
        """Log the master's tail, return the task's value or raise the job's failure; delete the
        job per ``delete_on_finish`` either way."""
        streamed = self._waiter.stop_following() if self._waiter is not None else False
        ended = read_outcome(
            self.hook,
            job,
            state,
            admitted_at=admitted_at,
            finished_at=finished_at,
            log_tail_lines=self.log_tail_lines,
            read_master_log=self.get_logs and not streamed,
            collect_metrics=self.collect_metrics,
            job_kind=self.job_kind,
            seen_failure=seen_failure,
        )
        if ended.master_log and ended.master_log.strip():
            self.log.info(
                "%s log (last %d lines):\n%s",
                "master replica" if self.job_kind.leader == "Master" else "rank 0",
                self.log_tail_lines,
                ended.master_log.rstrip(),
            )
        if disruptions is None and self._waiter is not None:
            disruptions = self._waiter.disruptions.to_json()
        moments = {"admitted_at": admitted_at, "finished_at": finished_at}
        state_store.record_outcome(context, ended, disruptions=disruptions, **moments)
        succeeded = False
        try:
            if ended.error is not None:
                raise ended.error
            assert ended.result is not None
            meta, result = ended.job["metadata"], ended.result
            self.log.info(
                "%s %s/%s %s: queued %ss, ran %ss",
                self.job_kind.kind,
                meta["namespace"],
                meta["name"],
                state,
                result["queued_seconds"],
                result["run_seconds"],
            )
            value = self.job_succeeded(context, ended.job, result)
            succeeded = True
        finally:
            if deletes_on_finish(self.delete_on_finish, succeeded):
                cleanup.delete_gang(
                    self.hook,
                    ended.job["metadata"]["name"],
                    ended.job["metadata"]["namespace"],
                    ended.job["metadata"].get("uid"),
                    gang_scheduling=self.gang_mode,
                    reason=f"delete_on_finish={self.delete_on_finish}",
                    logger=self.log,
                    job_kind=self.job_kind,
                )
        self._remember(context, job, delivered=True)
        self._submitted = None
        return value

    def job_succeeded(self, context: Context, job: JsonDict, result: JsonDict) -> Any:
        """What the task returns once its job succeeded (``result``); a hook for subclasses, run while
        the job's pods and logs are still there (``@task.pytorchjob`` reads the function's value)."""
        return result

    def _job_lost(self, context: Context, job: JsonDict) -> Any:
        """The job was deleted while this try waited. If this try had taken it over, the earlier
        try was cleared or marked failed by a person as this one started, and its ``on_kill``
        deleted the job ("train again"): start over with a new job. Else `GangJobLost`."""
        self._submitted = None
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        state_store.record_end(context, job, "killed" if self._reattached else "lost")
        if not self._reattached:
            raise GangJobLost(
                f"{self.job_kind.kind} {namespace}/{name} was deleted while waiting",
                name=name,
                namespace=namespace,
            )
        earlier = "of an earlier try was deleted (that try was cleared or killed): submitting a new job"
        self.log.warning("%s %s/%s %s", self.job_kind.kind, namespace, name, earlier)
        self._reattached = False
        return self.execute(context)

    def on_kill(self) -> None:
        """The task was killed while waiting in the worker: delete the job and its PodGroup."""
        if self._submitted is not None:
            self._give_up(self._submitted, "task killed")
