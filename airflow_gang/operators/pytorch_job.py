"""`PyTorchJobOperator`: submit a gang-scheduled PyTorchJob, wait for admission, then for training.

The flow (DESIGN.md §3): validate and build manifests before any API call; adopt a live job of
an earlier try or submit PodGroup + job; publish ``job_name``/``job_namespace`` before waiting;
wait for the gang to be admitted (deleting the job and raising `GangAdmissionTimeout` when the
queue holds it too long); wait for completion; put the master's log in the task log; return a
small dict; clean up per ``delete_on_finish``. Waits run in the worker (``deferrable=False``) or
in the triggerer (`GangJobTrigger`), with the same decisions (`airflow_gang.gang_state`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from airflow.configuration import conf
from airflow.sdk import BaseOperator

from airflow_gang import links
from airflow_gang.exceptions import (
    GangAdmissionTimeout,
    GangError,
    GangJobLost,
    GangSpecError,
    PyTorchJobFailed,
)
from airflow_gang.gang_state import GangPhase, GangSnapshot, GangStatus, master_pod_name
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.metrics import parse_metrics
from airflow_gang.naming import identity_labels, job_name
from airflow_gang.operators import lifecycle
from airflow_gang.operators.log_follower import LogFollower
from airflow_gang.reaper import STATE_STORE_JOB_KEY
from airflow_gang.spec import GangJobSpec
from airflow_gang.timeline import parse_time
from airflow_gang.triggers.gang import GangJobTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

JsonDict = dict[str, Any]
DeleteOnFinish = Literal["always", "on_success", "never"]
STATE_STORE_PROGRESS_KEY = "progress"
_NOT_SET: Any = object()
_JOB_ARGUMENTS = (
    "image",
    "command",
    "args",
    "env",
    "workers",
    "replica_resources",
    "nproc_per_node",
    "volcano_queue",
    "priority_class",
    "min_available",
    "min_resources",
    "gang_scheduling",
    "labels",
    "annotations",
    "node_selector",
    "tolerations",
    "volumes",
    "volume_mounts",
    "service_account_name",
    "image_pull_secrets",
    "pod_template",
    "job_template",
    "run_policy",
    "restart_policy",
)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _event_progress(event: dict[str, Any]) -> JsonDict:
    """The ``progress`` entry after a deferred wait: the trigger's last look, else the event."""
    progress = event.get("progress")
    if isinstance(progress, dict):
        return progress
    return {
        "phase": event.get("phase") or event.get("status"),
        "podgroup_phase": event.get("podgroup_phase"),
        "queue": event.get("queue"),
        "replicas_bound": None,
        "replicas_running": None,
        "replicas": None,
        "message": event.get("message") or "",
        "updated_at": _utc_now().isoformat(),
    }


class PyTorchJobOperator(BaseOperator):
    """Run a Kubeflow PyTorchJob gang-scheduled by Volcano and wait for it.

    Job arguments (``image`` ... ``restart_policy``) are those of `airflow_gang.spec.GangJobSpec`
    and are validated before anything is sent to the cluster; unset ones take its defaults
    (``workers=1``, ``queue="default"``, ``gang_scheduling="provider"``,
    ``restart_policy="OnFailure"``) or, with ``job_template``, the template's values.

    :param queue: the Volcano queue (default ``default``); also accepted as ``volcano_queue``.
        Stored as ``volcano_queue``: ``BaseOperator.queue`` is Airflow's executor queue, which
        ``executor_queue=`` sets. With ``.partial()``/``.expand()`` pass ``volcano_queue`` (a
        mapped task's ``queue`` would also route it on Celery).
    :param admission_timeout: longest wait (timedelta or seconds) from submission until the gang
        is admitted; then the job is deleted and `GangAdmissionTimeout` raised. Default:
        ``[gang] default_admission_timeout`` (30 min). ``None`` waits forever.
    :param wait_for_completion: wait for training to finish (default). With False the task ends
        once the gang is admitted (or once submitted, with ``wait_for_admission=False``).
    :param wait_for_admission: with ``wait_for_completion=False``, wait for admission first.
    :param job_name: PyTorchJob/PodGroup name; default derived from the task instance try.
    :param namespace: default: the connection's namespace, else ``default``.
    :param kubernetes_conn_id: cncf ``kubernetes`` connection.
    :param get_logs: put the master replica's log into the task log.
    :param log_tail_lines: how many log lines (and in failures, lines of the failing replica).
    :param delete_on_finish: ``always``, ``on_success`` (default) or ``never``.
    :param poll_interval: seconds between checks when no change is seen.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param report_progress: write the task state store's ``progress`` entry (phase, queue,
        replicas bound) whenever the task runs in a worker: on every phase change while it waits
        there, and before and after a deferral. While deferred, phase changes go to the task
        log only: returning to a worker for each one would provoke apache/airflow#72716.
    :param collect_metrics: put the ``name=value`` pairs of the master's last ``log_tail_lines``
        log lines (Katib's StdOut format, e.g. ``accuracy=0.97``) into the result's ``metrics``.
    """

    template_fields: Sequence[str] = (
        "image",
        "command",
        "args",
        "env",
        "replica_resources",
        "volcano_queue",
        "priority_class",
        "labels",
        "annotations",
        "node_selector",
        "tolerations",
        "volumes",
        "volume_mounts",
        "service_account_name",
        "image_pull_secrets",
        "pod_template",
        "job_template",
        "job_name",
        "namespace",
        "kubernetes_conn_id",
        "workers",
        "min_available",
        "gang_scheduling",
    )
    template_fields_renderers = {
        "env": "json",
        "replica_resources": "json",
        "pod_template": "json",
        "job_template": "yaml",
    }
    ui_color = "#f0e4ff"
    operator_extra_links = links.JOB_LINKS

    def __init__(
        self,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: dict[str, Any] | None = None,
        workers: int | None = None,
        resources: dict[str, Any] | None = None,
        nproc_per_node: int | str | None = None,
        queue: str | None = None,
        volcano_queue: str | None = None,
        executor_queue: str | None = None,
        priority_class: str | None = None,
        min_available: int | None = None,
        min_resources: dict[str, Any] | None = None,
        gang_scheduling: str | None = None,
        admission_timeout: dt.timedelta | float | None = _NOT_SET,
        wait_for_completion: bool = True,
        wait_for_admission: bool = True,
        job_name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Any] | None = None,
        volumes: list[Any] | None = None,
        volume_mounts: list[Any] | None = None,
        service_account_name: str | None = None,
        image_pull_secrets: list[str] | None = None,
        pod_template: dict[str, Any] | None = None,
        job_template: dict[str, Any] | str | None = None,
        run_policy: dict[str, Any] | None = None,
        restart_policy: str | None = None,
        get_logs: bool = True,
        log_tail_lines: int = 100,
        delete_on_finish: DeleteOnFinish = "on_success",
        poll_interval: float = 10.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        report_progress: bool = True,
        collect_metrics: bool = True,
        **kwargs: Any,
    ) -> None:
        if executor_queue is not None:
            kwargs["queue"] = executor_queue
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.workers = workers
        # BaseOperator.resources is Airflow's own (CPU/RAM hints for executors): ours go elsewhere.
        self.replica_resources = resources
        self.nproc_per_node = nproc_per_node
        # BaseOperator.queue is Airflow's executor queue (Celery routing): the Volcano queue
        # must live elsewhere or a task for queue "research" would wait for a Celery worker.
        self.volcano_queue = volcano_queue if volcano_queue is not None else queue
        self.priority_class = priority_class
        self.min_available = min_available
        self.min_resources = min_resources
        self.gang_scheduling = gang_scheduling
        self.admission_timeout = admission_timeout
        self.wait_for_completion = wait_for_completion
        self.wait_for_admission = wait_for_admission
        self.job_name = job_name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.volumes = volumes
        self.volume_mounts = volume_mounts
        self.service_account_name = service_account_name
        self.image_pull_secrets = image_pull_secrets
        self.pod_template = pod_template
        self.job_template = job_template
        self.run_policy = run_policy
        self.restart_policy = restart_policy
        self.get_logs = get_logs
        self.log_tail_lines = log_tail_lines
        self.delete_on_finish = delete_on_finish
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.report_progress = report_progress
        self.collect_metrics = collect_metrics
        self._submitted: JsonDict | None = None
        self._log_follower: LogFollower | None = None

    # --- building blocks ----------------------------------------------------------------------

    @cached_property
    def hook(self) -> GangJobHook:
        return GangJobHook(conn_id=self.kubernetes_conn_id)

    def build_spec(self) -> GangJobSpec:
        """The validated job description; raises `GangSpecError` before any API call."""
        if self.delete_on_finish not in ("always", "on_success", "never"):
            raise GangSpecError(
                f"delete_on_finish={self.delete_on_finish!r} is invalid: "
                "use 'always', 'on_success' or 'never'",
                field="delete_on_finish",
            )
        # Only what was given: unset arguments take GangJobSpec's defaults (workers=1,
        # queue="default", gang_scheduling="provider", restart_policy="OnFailure") or, with a
        # job_template, the template's values.
        given = {name: getattr(self, name) for name in _JOB_ARGUMENTS if getattr(self, name) is not None}
        if "volcano_queue" in given:
            given["queue"] = given.pop("volcano_queue")
        if "replica_resources" in given:
            given["resources"] = given.pop("replica_resources")
        return GangJobSpec(**given)

    def admission_timeout_seconds(self) -> float | None:
        if self.admission_timeout is _NOT_SET:
            configured = conf.get("gang", "default_admission_timeout", fallback="1800")
            return float(configured) if configured else None
        return lifecycle.positive_seconds(self.admission_timeout, "admission_timeout")

    def _identity(self, context: Context) -> tuple[str, dict[str, str]]:
        ti = context["ti"]
        run_id = context["run_id"]
        raw_index = getattr(ti, "map_index", None)
        map_index = -1 if raw_index is None else int(raw_index)
        try_number = int(getattr(ti, "try_number", 1) or 1)
        labels = identity_labels(ti.dag_id, ti.task_id, run_id, map_index, try_number)
        name = self.job_name or job_name(ti.dag_id, ti.task_id, run_id, map_index, try_number)
        return name, labels

    # --- execute ------------------------------------------------------------------------------

    def execute(self, context: Context) -> JsonDict | None:
        spec = self.build_spec()
        admission_timeout = self.admission_timeout_seconds()
        name, identity = self._identity(context)
        namespace = self.namespace or self.hook.get_namespace() or "default"
        job_manifest = spec.build_pytorchjob(name, namespace, labels=identity)
        podgroup_manifest = spec.build_podgroup(name, namespace, labels=identity)

        self.hook.check_api(require_volcano=spec.gang_scheduling.value != "disabled")
        if spec.gang_scheduling.value != "disabled":
            lifecycle.check_queue(self.hook, spec.effective_queue)

        job = self._reattach(context, namespace, identity)
        if job is None:
            job, adopted = lifecycle.submit(self.hook, job_manifest, podgroup_manifest, namespace, identity)
            self.log.info(
                "%s PyTorchJob %s/%s (uid %s) in queue %s",
                "adopted" if adopted else "submitted",
                namespace,
                job["metadata"]["name"],
                job["metadata"]["uid"],
                spec.effective_queue,
            )
        self._submitted = job
        self._remember(context, job)
        if not self.wait_for_completion and not self.wait_for_admission:
            return lifecycle.result(job, "submitted", None, None)

        # The admission clock starts at the job's creation, also when an earlier try submitted it.
        created = job["metadata"].get("creationTimestamp")
        submitted_at = parse_time(created) or _utc_now()
        deadline = submitted_at + dt.timedelta(seconds=admission_timeout) if admission_timeout else None
        wait_for = "both" if self.wait_for_completion else "admission"
        if self.deferrable:
            seen = self._observe(job, spec.gang_scheduling.value)
            self._record_progress(context, seen.status)
            # A wait the trigger would end at once is finished here: a task resumed seconds after
            # it deferred is what apache/airflow#72716 fails.
            ends_now = seen.status.finished or seen.status.phase is GangPhase.LOST
            if not ends_now and not (wait_for == "admission" and seen.status.admitted):
                self._defer(
                    context,
                    job,
                    gang_scheduling=spec.gang_scheduling.value,
                    wait_for=wait_for,
                    deadline=deadline,
                    submitted_at=submitted_at,
                )
        return self._wait_in_worker(context, job, spec.gang_scheduling.value, wait_for, deadline)

    def _reattach(self, context: Context, namespace: str, identity: dict[str, str]) -> JsonDict | None:
        stored = self._state_store_get(context, STATE_STORE_JOB_KEY)
        if isinstance(stored, dict) and stored.get("name"):
            job = self.hook.get_pytorchjob(stored["name"], stored.get("namespace") or namespace)
            if job is not None and job["metadata"].get("uid") == stored.get("uid") and lifecycle.is_live(job):
                self.log.info(
                    "reattaching to PyTorchJob %s/%s from an earlier attempt (uid %s)",
                    job["metadata"]["namespace"],
                    job["metadata"]["name"],
                    stored["uid"],
                )
                return job
        job = lifecycle.find_live_job(self.hook, namespace, identity)
        if job is not None:
            self.log.info(
                "reattaching to live PyTorchJob %s/%s found by its task-instance labels",
                namespace,
                job["metadata"]["name"],
            )
        return job

    def _remember(self, context: Context, job: JsonDict) -> None:
        metadata = job["metadata"]
        links.persist(context, metadata["namespace"], metadata["name"])
        # The orphan reaper (airflow_gang.reaper) finds jobs through this entry, so it names the
        # connection too.
        self._state_store_set(
            context,
            STATE_STORE_JOB_KEY,
            {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "try_number": int(getattr(context["ti"], "try_number", 1) or 1),
            },
        )

    def _record_progress(self, context: Context, status: GangStatus) -> None:
        if self.report_progress:
            self._state_store_set(context, STATE_STORE_PROGRESS_KEY, status.progress(_utc_now().isoformat()))

    # --- waiting in the worker ----------------------------------------------------------------

    def _observe(self, job: JsonDict, gang_scheduling: str) -> GangSnapshot:
        metadata = job["metadata"]
        return lifecycle.observe(
            self.hook, metadata["name"], metadata["namespace"], gang_scheduling, metadata["uid"]
        )

    def _wait_in_worker(
        self,
        context: Context,
        job: JsonDict,
        gang_scheduling: str,
        wait_for: str,
        deadline: dt.datetime | None,
    ) -> JsonDict:
        try:
            return self._wait_loop(context, job, gang_scheduling, wait_for, deadline)
        except (GangAdmissionTimeout, GangJobLost, PyTorchJobFailed):
            raise  # these outcomes already cleaned up what they should
        except BaseException:
            # execution_timeout, a lost API connection, an interrupt: nobody will wait for the
            # job any more, so it must not keep running and holding its gang's resources.
            self._abandon(job)
            raise

    def _abandon(self, job: JsonDict) -> None:
        metadata = job["metadata"]
        self.log.warning(
            "abandoning PyTorchJob %s/%s: deleting it and its PodGroup",
            metadata["namespace"],
            metadata["name"],
        )
        if self._log_follower is not None:
            self._log_follower.stop(timeout=1.0)
            self._log_follower = None
        try:
            lifecycle.delete_and_confirm(
                self.hook, metadata["name"], metadata["namespace"], metadata.get("uid")
            )
        except GangError as error:  # keep the original failure; say what could not be cleaned
            self.log.error(
                "could not delete PyTorchJob %s/%s: %s", metadata["namespace"], metadata["name"], error
            )
        self._submitted = None

    def _wait_loop(
        self,
        context: Context,
        job: JsonDict,
        gang_scheduling: str,
        wait_for: str,
        deadline: dt.datetime | None,
    ) -> JsonDict:
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        admitted_at: str | None = None
        last = ""
        while True:
            seen = self._observe(job, gang_scheduling)
            status = seen.status
            if self.get_logs and self._log_follower is None and status.phase is GangPhase.RUNNING:
                self._log_follower = LogFollower(
                    self.hook, master_pod_name(name), namespace, self.log
                ).start()
            line = status.describe()
            if line != last:
                self.log.info("gang job %s/%s: %s", namespace, name, line)
                self._record_progress(context, status)
                last = line
            if status.phase is GangPhase.LOST:
                raise GangJobLost(
                    f"PyTorchJob {namespace}/{name} was deleted while waiting", name=name, namespace=namespace
                )
            if status.admitted and admitted_at is None:
                admitted_at = seen.admitted_at()
                self.log.info(
                    "gang admitted job=%s/%s queue=%s at %s", namespace, name, status.queue, admitted_at
                )
                if wait_for == "admission":
                    return lifecycle.result(self._current(job), "admitted", admitted_at, None)
            if status.finished:
                return self._finish(
                    context, job, status.phase.value, admitted_at=admitted_at, finished_at=None
                )
            if admitted_at is None and deadline is not None and _utc_now() >= deadline:
                self._admission_timeout(job, status, gang_scheduling)
            time.sleep(self.poll_interval)

    def _current(self, job: JsonDict) -> JsonDict:
        return self.hook.get_pytorchjob(job["metadata"]["name"], job["metadata"]["namespace"]) or job

    def _admission_timeout(self, job: JsonDict, status: GangStatus, gang_scheduling: str) -> None:
        name, namespace, uid = job["metadata"]["name"], job["metadata"]["namespace"], job["metadata"]["uid"]
        self.log.warning(
            "gang not admitted in time: deleting PyTorchJob %s/%s and its PodGroup", namespace, name
        )
        lifecycle.delete_and_confirm(self.hook, name, namespace, uid)
        self._submitted = None
        by = (
            f"by queue {status.queue!r}"
            if status.queue
            else "(no gang scheduling: not every replica was bound)"
        )
        raise GangAdmissionTimeout(
            f"PyTorchJob {namespace}/{name} was not admitted {by} within "
            f"{self.admission_timeout_seconds():.0f}s ({status.describe()}); "
            "it was deleted so a retry starts clean",
            name=name,
            namespace=namespace,
            queue=status.queue,
            waited_seconds=self.admission_timeout_seconds(),
            reason=status.message or None,
        )

    # --- deferral -----------------------------------------------------------------------------

    def _defer(
        self,
        context: Context,
        job: JsonDict,
        *,
        gang_scheduling: str,
        wait_for: str,
        deadline: dt.datetime | None,
        submitted_at: dt.datetime,
        admitted_at: str | None = None,
        execution_deadline: dt.datetime | None = None,
    ) -> None:
        timeout = None
        ti = context["ti"]
        if execution_deadline is None and self.execution_timeout is not None and ti.start_date is not None:
            execution_deadline = ti.start_date + self.execution_timeout
        if execution_deadline is not None:
            # Pad the framework's timeout so the trigger reports first, with a useful message.
            timeout = max(dt.timedelta(seconds=1), execution_deadline - _utc_now()) + dt.timedelta(seconds=60)
        trigger = GangJobTrigger(
            name=job["metadata"]["name"],
            namespace=job["metadata"]["namespace"],
            uid=job["metadata"]["uid"],
            wait_for=wait_for,  # type: ignore[arg-type]
            gang_scheduling=gang_scheduling,
            admission_deadline=deadline.isoformat() if deadline else None,
            execution_deadline=execution_deadline.isoformat() if execution_deadline else None,
            submitted_at=submitted_at.isoformat(),
            admitted_at=admitted_at,
            poll_interval=self.poll_interval,
            kubernetes_conn_id=self.kubernetes_conn_id,
            hook_kwargs=self.hook.async_hook_kwargs(),
            not_before=lifecycle.resume_not_before(),
        )
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            timeout=timeout,
            kwargs={
                "gang_scheduling": gang_scheduling,
                "wait_for": wait_for,
                "admission_deadline": deadline.isoformat() if deadline else None,
                "execution_deadline": execution_deadline.isoformat() if execution_deadline else None,
                "submitted_at": submitted_at.isoformat(),
            },
        )

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any],
        *,
        gang_scheduling: str = "provider",
        wait_for: str = "both",
        admission_deadline: str | None = None,
        execution_deadline: str | None = None,
        submitted_at: str | None = None,
    ) -> Any:
        name, namespace = event["name"], event["namespace"]
        status = event["status"]
        timeline = event.get("timeline") or {}
        wait = event.get("wait") or {}
        gang_scheduling = wait.get("gang_scheduling", gang_scheduling)
        wait_for = wait.get("wait_for", wait_for)
        admission_deadline = wait.get("admission_deadline", admission_deadline)
        execution_deadline = wait.get("execution_deadline", execution_deadline)
        submitted_at = timeline.get("submitted_at") or submitted_at
        job = self.hook.get_pytorchjob(name, namespace) or {
            "metadata": {"name": name, "namespace": namespace, "uid": event.get("uid")}
        }
        self._submitted = job
        if self.report_progress:
            self._state_store_set(context, STATE_STORE_PROGRESS_KEY, _event_progress(event))
        if status == "progress":
            # Only a trigger serialized by 0.1 ends on a phase change: wait on with today's trigger.
            self._defer(
                context,
                job,
                gang_scheduling=gang_scheduling,
                wait_for=wait_for,
                deadline=dt.datetime.fromisoformat(admission_deadline) if admission_deadline else None,
                submitted_at=dt.datetime.fromisoformat(submitted_at) if submitted_at else _utc_now(),
                admitted_at=timeline.get("admitted_at"),
                execution_deadline=dt.datetime.fromisoformat(execution_deadline)
                if execution_deadline
                else None,
            )
        if status == "admitted":
            return lifecycle.result(job, "admitted", timeline.get("admitted_at"), None)
        if status == "admission_timeout":
            self._submitted = None
            raise GangAdmissionTimeout(
                f"PyTorchJob {namespace}/{name} was not admitted in time ({event.get('message')}); "
                "it was deleted so a retry starts clean",
                name=name,
                namespace=namespace,
                queue=event.get("queue"),
                reason=event.get("message"),
            )
        if status == "lost":
            self._submitted = None
            raise GangJobLost(str(event.get("message")), name=name, namespace=namespace)
        if status in ("succeeded", "failed"):
            return self._finish(
                context,
                job,
                status,
                admitted_at=timeline.get("admitted_at"),
                finished_at=timeline.get("finished_at"),
            )
        # The task gives up on a job that may still run (execution_timeout, a broken wait):
        # delete it whatever delete_on_finish says, or it would hold its GPUs with nobody waiting.
        self._abandon(job)
        raise GangError(
            f"waiting for PyTorchJob {namespace}/{name} failed: {event.get('message')}",
            name=name,
            namespace=namespace,
        )

    # --- the end ------------------------------------------------------------------------------

    def _finish(
        self,
        context: Context,
        job: JsonDict,
        state: str,
        *,
        admitted_at: str | None,
        finished_at: str | None,
    ) -> JsonDict:
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        current = self._current(job)
        tail: str | None = None
        if self._log_follower is not None:
            self._log_follower.stop()  # streamed live: the log is already in the task log
            self._log_follower = None
        elif self.get_logs:
            tail = lifecycle.log_tail(self.hook, master_pod_name(name), namespace, self.log_tail_lines)
            if tail.strip():
                self.log.info("master replica log (last %d lines):\n%s", self.log_tail_lines, tail.rstrip())
        if state == "failed":
            error = lifecycle.failure_error(self.hook, name, namespace, self.log_tail_lines)
            self._cleanup(current, succeeded=False)
            raise error
        metrics: dict[str, float] = {}
        if self.collect_metrics:
            if tail is None:
                tail = lifecycle.log_tail(self.hook, master_pod_name(name), namespace, self.log_tail_lines)
            metrics = parse_metrics(tail)
        value = lifecycle.result(current, state, admitted_at, finished_at, metrics=metrics)
        self.log.info(
            "PyTorchJob %s/%s %s: queued %ss, ran %ss",
            namespace,
            name,
            state,
            value["queued_seconds"],
            value["run_seconds"],
        )
        self._cleanup(current, succeeded=True)
        return value

    def _cleanup(self, job: JsonDict, *, succeeded: bool) -> None:
        if self.delete_on_finish == "always" or (self.delete_on_finish == "on_success" and succeeded):
            metadata = job["metadata"]
            lifecycle.delete_and_confirm(
                self.hook, metadata["name"], metadata["namespace"], metadata.get("uid")
            )
        self._submitted = None

    def on_kill(self) -> None:
        """The task was killed while waiting in the worker: delete the job and its PodGroup."""
        job = self._submitted
        if job is None:
            return
        metadata = job["metadata"]
        self.log.info(
            "task killed: deleting PyTorchJob %s/%s and its PodGroup", metadata["namespace"], metadata["name"]
        )
        lifecycle.delete_and_confirm(self.hook, metadata["name"], metadata["namespace"], metadata.get("uid"))
        self._submitted = None

    # --- Airflow 3.3 task state store (absent elsewhere: then a no-op) ------------------------

    def _state_store_get(self, context: Context, key: str) -> Any:
        store = context.get("task_state_store")
        if store is None:
            return None
        try:
            return store.get(key)
        except Exception as error:  # a store that cannot be read must not fail the job
            self.log.debug("task state store unavailable: %s", error)
            return None

    def _state_store_set(self, context: Context, key: str, value: JsonDict) -> None:
        store = context.get("task_state_store")
        if store is None:
            return
        try:
            from airflow.sdk.execution_time.context import NEVER_EXPIRE

            store.set(key, value, retention=NEVER_EXPIRE if key == STATE_STORE_JOB_KEY else None)
        except Exception as error:
            self.log.debug("task state store unavailable: %s", error)
