"""`GangWaitArguments`: how a gang job operator waits, cleans up and reports, validated before any API call.

The half of `GangJobOperator` every kind shares: its arguments (``wait_for_completion``,
``deferrable``, ``delete_on_finish``, ``api_unavailable_timeout``...), stored as given and
checked by `GangWaitArguments.build_spec` together with the job arguments of the kind's base
(`GangJobArguments`, `TrainJobArguments`).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator

from airflow_gang.jobs.checkpoints import checkpoint_location
from airflow_gang.jobs.disruption import DEFAULT_MAX_DISRUPTIONS, ON_DISRUPTION_CHOICES, check_max_disruptions
from airflow_gang.jobs.outcome import DELETE_ON_FINISH_CHOICES, ON_FINISH_ACTIONS, DeleteOnFinish
from airflow_gang.operators.job_arguments import raise_for_choice
from airflow_gang.outage import DEFAULT_API_UNAVAILABLE_TIMEOUT, unavailable_timeout_seconds

if TYPE_CHECKING:
    from airflow.sdk import Context


class GangWaitArguments(BaseOperator):
    """How a gang job operator waits (see the module docstring); `GangJobOperator` builds on it:

    :param wait_for_completion: wait for training to finish (default). With False the task ends
        once the gang is admitted (or once submitted, with ``wait_for_admission=False``).
    :param wait_for_admission: with ``wait_for_completion=False``, wait for admission first.
    :param get_logs: put the master replica's log into the task log.
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
    :param collect_metrics: put the ``name=value`` pairs of the master's last ``log_tail_lines``
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
    """

    def __init__(
        self,
        *,
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
        super().__init__(**kwargs)
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

    # --- building blocks ----------------------------------------------------------------------

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

    def build_spec(self) -> Any:
        """The validated job description; raises `GangSpecError` before any API call."""
        if self.on_finish_action is not None:
            raise_for_choice(self.on_finish_action, "on_finish_action", tuple(ON_FINISH_ACTIONS))
        raise_for_choice(self.delete_on_finish, "delete_on_finish", DELETE_ON_FINISH_CHOICES)
        unavailable_timeout_seconds(self.api_unavailable_timeout)  # GangSpecError naming the field
        raise_for_choice(self.on_disruption, "on_disruption", ON_DISRUPTION_CHOICES)
        check_max_disruptions(self.max_disruptions)
        return super().build_spec()  # type: ignore[misc]  # the arguments base's
