"""`GangJobOperator`: submit one gang job, wait for admission, then for training: any kind.

How it runs, top-down (the same for every kind; a kind's operator adds its arguments, `build_spec`
and `prepare`):

1. `GangJobOperator.execute` validates the arguments and builds the manifests before any API
   call, checks the cluster (`prepare`), takes over an earlier try's job or submits a new one
   (`airflow_gang.jobs.submission`) and publishes ``job_name``/``job_namespace``;
2. it waits for admission (an admission timeout deletes the job and raises
   `GangAdmissionTimeout`), then for completion: in the worker (`execute_sync`) or in the
   triggerer (`execute_async`, which defers to `GangJobTrigger`);
3. `execute_complete` (after a deferral) and `execute_sync` end the same way: rank 0's log tail
   in the task log, the job's end recorded in the task state store (the Gang jobs page shows it
   after cleanup), a small dict returned, cleanup per ``delete_on_finish``.

A job is deleted only for its admission timeout, a person's kill or clear (``on_kill``), the
task's own ``execution_timeout`` or ``on_disruption`` policy, or ``delete_on_finish`` after its
end; never because the API could not be read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Sequence
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.configuration import conf
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowTaskTimeout

from airflow_gang import links
from airflow_gang.exceptions import GangJobLost, GangSpecError
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.hooks.retrying import WAIT_RETRY_POLICY
from airflow_gang.jobs import checkpoints, cleanup, observation, submission
from airflow_gang.jobs.checkpoints import checkpoint_location
from airflow_gang.jobs.disruption import (
    DEFAULT_MAX_DISRUPTIONS,
    ON_DISRUPTION_CHOICES,
    GiveUp,
    check_max_disruptions,
)
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.outcome import (
    DELETE_ON_FINISH_CHOICES,
    ON_FINISH_ACTIONS,
    DeleteOnFinish,
    deletes_on_finish,
    read_outcome,
)
from airflow_gang.jobs.recipe import JobRecipe
from airflow_gang.jobs.result import job_result
from airflow_gang.jobs.wait_plan import WaitPlan
from airflow_gang.kinds import JobKind
from airflow_gang.model.gang_state import GangPhase, GangStatus
from airflow_gang.model.naming import identity_labels, job_name
from airflow_gang.model.outage import DEFAULT_API_UNAVAILABLE_TIMEOUT, Outage, unavailable_timeout_seconds
from airflow_gang.model.validation import positive_seconds
from airflow_gang.operators.worker_wait import WorkerWait
from airflow_gang.reports.disruption_report import job_given_up
from airflow_gang.state import state_store
from airflow_gang.state.state_store import STATE_STORE_JOB_KEY, STATE_STORE_PROGRESS_KEY
from airflow_gang.triggers import handover
from airflow_gang.triggers.events import TRIGGER_DELETED, EventStatus, GangEvent

if TYPE_CHECKING:
    from airflow.sdk import Context

JsonDict = dict[str, Any]
# `admission_timeout` not given: `[gang] default_admission_timeout` decides (None waits forever).
NOT_SET: Any = object()

# The parameters every kind's operator takes from `GangJobOperator`; each concrete operator's
# class docstring ends with them, so it documents every parameter it takes in one place.
SHARED_PARAMETERS = """
    :param admission_timeout: longest wait (timedelta or seconds) from submission until the gang
        is admitted; then the job is deleted and `GangAdmissionTimeout` raised. Default:
        ``[gang] default_admission_timeout`` (30 min). ``None`` waits forever.
    :param job_name: the job's name (and its PodGroup's); default derived from the task instance try.
    :param namespace: default: the connection's namespace, else ``default``.
    :param kubernetes_conn_id: cncf ``kubernetes`` connection.
    :param executor_queue: Airflow's executor queue (Celery routing: `BaseOperator`'s ``queue``,
        which ``queue=`` cannot set here because it names the Volcano queue).
    :param wait_for_completion: wait for training to finish (default). With False the task ends
        once the gang is admitted (or once submitted, with ``wait_for_admission=False``).
    :param wait_for_admission: with ``wait_for_completion=False``, wait for admission first.
    :param get_logs: put rank 0's log (a PyTorchJob's master replica) into the task log.
    :param log_tail_lines: how many log lines (and in failures, lines of the failing replica).
    :param delete_on_finish: ``always``, ``on_success`` (default) or ``never``.
    :param on_finish_action: the same choice in `KubernetesPodOperator`'s words: ``delete_job``,
        ``delete_succeeded_job`` or ``keep_job``; when given, it wins over ``delete_on_finish``.
    :param poll_interval: seconds between checks when no change is seen.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param api_unavailable_timeout: how long (timedelta or seconds) one outage of the Kubernetes
        API may last before the task fails with `GangApiUnavailable` (default 15 min; None rides
        out any outage). Nothing is deleted then: the next try reattaches to the same job. A task
        that fails so for good (no retry left) no longer owns its job, and the scheduler's orphan
        reaper deletes it so it holds no GPUs: set ``retries`` > 0 to ride out long outages.
    :param reuse_succeeded_job: a try that finds a Succeeded job of an earlier try of this task
        instance whose result no try delivered (the worker died after training ended) returns
        that job's result instead of training again (default True). A Failed job is never
        reused, and a cleared task trains anew.
    :param report_progress: write the task state store's ``progress`` entry (phase, queue,
        replicas bound) whenever the task runs in a worker: on every phase change while it waits
        there, and before and after a deferral. While deferred, phase changes go to the task
        log only: returning to a worker for each one would provoke apache/airflow#72716.
    :param collect_metrics: put the ``name=value`` pairs of rank 0's last ``log_tail_lines``
        log lines (Katib's StdOut format, e.g. ``accuracy=0.97``) into the result's ``metrics``.
    :param on_disruption: what the task does when its running gang loses pods (preempted or
        reclaimed by Volcano, a node lost, an eviction or drain; `docs/disruptions.md`):
        ``wait`` (default) lets the job's own restart bring the gang back and waits for its
        re-admission within ``admission_timeout`` of the disruption (then the job is deleted and
        `GangAdmissionTimeout` raised); ``retry`` deletes the job at once and raises
        `GangJobDisrupted`, so the task's retry submits a fresh one. Either way the task log, the
        ``progress`` entry, the job's history and the ``gang.disruptions`` metric record it.
    :param max_disruptions: disruptions one try accepts with ``wait``; one more deletes the job
        and raises `GangJobDisrupted` (default 3; None: any number).
    :param checkpoint_dir: where the training code keeps its checkpoints, given to every replica
        as ``GANG_CHECKPOINT_DIR`` (templated). Keep it the same across tries (no
        ``try_number`` in it) so a retry resumes. Default: under ``[gang] checkpoint_root``
        when set, ``<root>/<dag_id>/<task_id>/<run_id>[/<map_index>]``; else none is given.
    :param kwargs: `BaseOperator`'s (``retries``, ``execution_timeout``, ``pool``...).
"""


def admission_timeout_seconds(value: Any) -> float | None:
    """An ``admission_timeout`` argument in seconds: unset takes ``[gang] default_admission_timeout``."""
    if value is NOT_SET:
        configured = conf.get("gang", "default_admission_timeout", fallback="1800")
        return float(configured) if configured else None
    return positive_seconds(value, "admission_timeout")


def task_identity(context: Context, given_name: str | None) -> tuple[str, dict[str, str]]:
    """The job's name (``given_name``, else derived) and the identity labels of this task instance try."""
    ti = context["ti"]
    raw_index = getattr(ti, "map_index", None)
    map_index = -1 if raw_index is None else int(raw_index)
    try_number = int(getattr(ti, "try_number", 1) or 1)
    labels = identity_labels(ti.dag_id, ti.task_id, context["run_id"], map_index, try_number)
    name = given_name or job_name(ti.dag_id, ti.task_id, context["run_id"], map_index, try_number)
    return name, labels


def raise_for_choice(value: Any, field: str, choices: Sequence[str]) -> None:
    """`GangSpecError` naming ``field`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(choice) for choice in choices)
        raise GangSpecError(f"{field}={value!r} is invalid: use one of {options}", field=field)


class GangJobOperator(BaseOperator):
    """Run one gang job and wait for it (see the module docstring): the base of every kind's
    operator (`PyTorchJobOperator`, `TrainJobOperator`, `VolcanoJobOperator`), which documents
    all its parameters.

    A kind's operator sets ``job_kind``, takes its job's arguments, and implements `build_spec`
    (the validated job description) and `prepare` (the cluster checks and the `JobRecipe`).
    """

    ui_color = "#f0e4ff"
    operator_extra_links = links.JOB_LINKS
    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = (
        "volcano_queue",
        "job_name",
        "namespace",
        "kubernetes_conn_id",
        "checkpoint_dir",
    )

    def __init__(
        self,
        *,
        queue: str | None = None,
        volcano_queue: str | None = None,
        executor_queue: str | None = None,
        admission_timeout: dt.timedelta | float | None = NOT_SET,
        job_name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        wait_for_completion: bool = True,
        wait_for_admission: bool = True,
        get_logs: bool = True,
        log_tail_lines: int = 100,
        delete_on_finish: DeleteOnFinish = "on_success",
        on_finish_action: str | None = None,
        poll_interval: float = 10.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        report_progress: bool = True,
        collect_metrics: bool = True,
        api_unavailable_timeout: dt.timedelta | float | None = DEFAULT_API_UNAVAILABLE_TIMEOUT,
        reuse_succeeded_job: bool = True,
        on_disruption: str = "wait",
        max_disruptions: int | None = DEFAULT_MAX_DISRUPTIONS,
        checkpoint_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        if executor_queue is not None:
            kwargs["queue"] = executor_queue
        super().__init__(**kwargs)
        # BaseOperator.queue is Airflow's executor queue (Celery routing): the Volcano queue
        # must live elsewhere or a task for queue "research" would wait for a Celery worker.
        self.volcano_queue = volcano_queue if volcano_queue is not None else queue
        self.admission_timeout = admission_timeout
        self.job_name = job_name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.wait_for_completion = wait_for_completion
        self.wait_for_admission = wait_for_admission
        self.get_logs = get_logs
        self.log_tail_lines = log_tail_lines
        self.on_finish_action = on_finish_action
        self.delete_on_finish = ON_FINISH_ACTIONS.get(on_finish_action or "", delete_on_finish)
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.report_progress = report_progress
        self.collect_metrics = collect_metrics
        self.api_unavailable_timeout = api_unavailable_timeout
        self.reuse_succeeded_job = reuse_succeeded_job
        self.on_disruption = on_disruption
        self.max_disruptions = max_disruptions
        self.checkpoint_dir = checkpoint_dir
        self._submitted: JsonDict | None = None
        self._waiter: WorkerWait | None = None
        self._reattached = False
        # The job's gang mode, once known: from its recipe, or from the wait it resumes.
        self._gang: str | None = None

    # --- what a kind's operator provides ------------------------------------------------------

    def build_job_spec(self) -> Any:
        """The kind's validated job description (`GangJobSpec`, `TrainJobSpec`...)."""
        raise NotImplementedError

    def prepare(self, hook: GangJobHook, spec: Any, namespace: str) -> JobRecipe:
        """Check the cluster can run ``spec`` (its kinds served, its queue open...) and return the
        recipe that builds its manifests; raises `GangSpecError`/`GangCRDNotInstalled` first."""
        raise NotImplementedError

    def job_succeeded(self, context: Context, job: JsonDict, result: JsonDict) -> Any:
        """What the task returns once its job succeeded (``result``); a hook for subclasses, run while
        the job's pods and logs are still there (``@task.pytorchjob`` reads the function's value)."""
        return result

    def spec_for(self, context: Context) -> Any:
        """This try's job description (a hook: ``@task.pytorchjob`` adds the function's payload)."""
        return self.build_spec()

    # --- building blocks ----------------------------------------------------------------------

    def build_spec(self) -> Any:
        """The validated job description; raises `GangSpecError` before any API call."""
        if self.on_finish_action is not None:
            raise_for_choice(self.on_finish_action, "on_finish_action", tuple(ON_FINISH_ACTIONS))
        raise_for_choice(self.delete_on_finish, "delete_on_finish", DELETE_ON_FINISH_CHOICES)
        unavailable_timeout_seconds(self.api_unavailable_timeout)  # GangSpecError naming the field
        raise_for_choice(self.on_disruption, "on_disruption", ON_DISRUPTION_CHOICES)
        check_max_disruptions(self.max_disruptions)
        return self.build_job_spec()

    def admission_timeout_seconds(self) -> float | None:
        return admission_timeout_seconds(self.admission_timeout)

    def identity(self, context: Context) -> tuple[str, dict[str, str]]:
        """The job's name and the identity labels of this task instance try."""
        return task_identity(context, self.job_name)

    def checkpoint_location(self, context: Context) -> str | None:
        """This task instance's ``GANG_CHECKPOINT_DIR`` (`airflow_gang.jobs.checkpoints`)."""
        ti = context["ti"]
        root = conf.get("gang", "checkpoint_root", fallback="") or None
        return checkpoint_location(
            self.checkpoint_dir,
            root,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=int(getattr(ti, "map_index", -1) or -1),
        )

    @cached_property
    def hook(self) -> GangJobHook:
        return GangJobHook(conn_id=self.kubernetes_conn_id)

    @property
    def gang_mode(self) -> str | None:
        """The job's gang mode, for deleting it (None: not known yet: the provider's)."""
        return self._gang

    @contextlib.contextmanager
    def _riding_out_outages(self, name: str, namespace: str) -> Iterator[GangJobHook]:
        """The hook inside the block: quick quiet retries per call, and an API that cannot be
        reached waited for (`airflow_gang.model.outage`) up to ``api_unavailable_timeout``."""
        outage = Outage(
            f"{self.job_kind.kind} {namespace}/{name}",
            timeout=unavailable_timeout_seconds(self.api_unavailable_timeout),
        )
        with (
            self.hook.retries(WAIT_RETRY_POLICY),
            self.hook.riding_out(outage, name=name, namespace=namespace),
        ):
            yield self.hook

    # --- execute: submit, then wait here or in the triggerer -----------------------------------

    def execute(self, context: Context) -> Any:
        job, plan = self._submit(context)
        return self._wait(context, job, plan)

    def _submit(self, context: Context) -> tuple[JsonDict, WaitPlan | None]:
        """Take over this task instance's job or submit a new one; the wait it asks for (None:
        the task ends once submitted)."""
        spec = checkpoints.with_checkpoint_env(self.spec_for(context), self.checkpoint_location(context))
        name, identity = self.identity(context)
        namespace = self.namespace or self.hook.get_namespace() or "default"
        with self._riding_out_outages(name, namespace) as hook:
            recipe = self.prepare(hook, spec, namespace)
            gang = self._gang = recipe.gang_scheduling
            job = self._take_over_or_submit(context, recipe, submission.Target(name, namespace, identity))
        if not self.wait_for_completion and not self.wait_for_admission:
            return job, None
        plan = WaitPlan.for_job(
            job,
            gang,
            "both" if self.wait_for_completion else "admission",
            admission_timeout=self.admission_timeout_seconds(),
            expected_queue=recipe.expected_queue,
            on_disruption=self.on_disruption,
            max_disruptions=self.max_disruptions,
        )
        return job, plan

    def _wait(self, context: Context, job: JsonDict, plan: WaitPlan | None) -> Any:
        if plan is None:
            return job_result(job, "submitted", None, None)
        if self.deferrable:
            return self.execute_async(context, job, plan)
        return self.execute_sync(context, job, plan)

    def execute_async(self, context: Context, job: JsonDict, plan: WaitPlan) -> Any:
        """Wait in the triggerer: defer to `GangJobTrigger`, which resumes `execute_complete`."""
        metadata = job["metadata"]
        name, namespace = metadata["name"], metadata["namespace"]
        gang = self._gang or "provider"
        with self._riding_out_outages(name, namespace) as hook:
            seen = observation.observe(hook, name, namespace, gang, metadata["uid"], job_kind=self.job_kind)
        self._record_progress(context, seen.status)
        # A wait the trigger would end at once is finished here: a task resumed seconds after it
        # deferred is what apache/airflow#72716 fails.
        ends_now = seen.status.finished or seen.status.phase is GangPhase.LOST
        if ends_now or (plan.wait_for == "admission" and seen.status.admitted):
            return self.execute_sync(context, job, plan)
        started = context["ti"].start_date
        if self.execution_timeout is not None and started is not None:
            plan = plan.until(started + self.execution_timeout)
        trigger, timeout = handover.trigger_for(
            name,
            namespace,
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
        # The orphan reaper (airflow_gang.state.reaper) finds jobs through this entry.
        conn, delete_on_finish = self.kubernetes_conn_id, self.delete_on_finish
        state_store.remember_job(context, job, conn, delete_on_finish, delivered=delivered)

    def _record_progress(self, context: Context, status: GangStatus) -> None:
        if self.report_progress:
            progress = status.progress(dt.datetime.now(dt.UTC).isoformat())
            if self._waiter is not None:
                progress.update(self._waiter.disruptions.progress())
            state_store.write(context, STATE_STORE_PROGRESS_KEY, progress)

    # --- waiting in the worker ----------------------------------------------------------------

    def execute_sync(self, context: Context, job: JsonDict, plan: WaitPlan) -> Any:
        """Wait in the worker (`WorkerWait`), then finish as `execute_complete` does."""
        metadata = job["metadata"]
        with self._riding_out_outages(metadata["name"], metadata["namespace"]):
            return self._wait_in_worker(context, job, plan)

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

    # --- the end: after waiting here or in the triggerer -------------------------------------

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
            # As a wait in a worker ends: Airflow's own timeout, retried like any other failure.
            raise AirflowTaskTimeout(f"waiting for {self.job_kind.kind} {namespace}/{name}: {ended.message}")
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
                self.job_kind.leader_title,
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

    def _job_lost(self, context: Context, job: JsonDict) -> Any:
        """The job was deleted while this try waited. If this try had taken it over, the earlier
        try was cleared or marked failed by a person as this one started, and its ``on_kill``
        deleted the job ("train again"): submit a new job and wait for it. Else `GangJobLost`."""
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
        return self._wait(context, *self._submit(context))

    def on_kill(self) -> None:
        """The task was killed while waiting in the worker: delete the job and its PodGroup."""
        if self._submitted is not None:
            self._give_up(self._submitted, "task killed")
