"""The wait of a sync-mode (``deferrable=False``) task: in the worker, until the gang's outcome.

The job, PodGroup and pods are followed by watches (`airflow_gang.jobs.job_watch`): a change is
seen as it happens, as the triggerer sees it, and the wait reads the gang from memory; while a
watch fails it reads them every ``poll_interval`` instead. The phase line goes to the task log
and the ``progress`` entry on each change; the master's log is streamed live once it runs. An
API that cannot be reached is ridden out by the hook (the caller's `GangJobHook.riding_out`
block: nothing deleted, until ``api_unavailable_timeout``). The wait decides nothing about
deleting: it reports how it ended and the operator acts (`airflow_gang.operators.pytorch_job`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.jobs import observation
from airflow_gang.jobs.disruption import DisruptionTracker, GiveUp
from airflow_gang.jobs.failure_memory import FailureMemory
from airflow_gang.jobs.job_watch import JobWatch
from airflow_gang.jobs.wait_plan import WaitPlan
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.model.gang_state import GangPhase, GangSnapshot, GangStatus, podgroup_queue, queue_mismatch
from airflow_gang.operators.log_follower import LogFollower
from airflow_gang.reports import disruption_report

JsonDict = dict[str, Any]
# How long the first look waits for the watches to list (it reads the objects itself after that).
WATCH_SYNC_SECONDS = 5.0
# While every watch works, a read anyway this often: the safety net informers resync with.
RESYNC_SECONDS = 300.0


class WaitEnd(NamedTuple):
    """How a wait ended: ``admitted`` (admission-only waits), ``finished``, ``lost``,
    ``admission_timeout``, ``queue_mismatch`` (the PodGroup appeared in another queue than
    asked) or ``disrupted`` (the ``on_disruption`` policy gave the running gang up: `give_up`);
    in the last three the job is still there: the operator deletes it."""

    kind: Literal["admitted", "finished", "lost", "admission_timeout", "queue_mismatch", "disrupted"]
    seen: GangSnapshot
    admitted_at: str | None
    failure: FailureMemory | None = None
    give_up: GiveUp | None = None


@dataclass
class WorkerWait:
    """One sync-mode wait for one job.

    :param on_change: called with the gang's status whenever its description changes.
    :param follow_logs: stream the master replica's log into the task log once it runs.
    :param watch: follow the objects with watches; False polls every ``poll_interval``.
    """

    hook: GangJobHook
    log: Any
    poll_interval: float
    on_change: Callable[[GangStatus], None]
    follow_logs: bool
    follower: LogFollower | None = None
    sleep: Callable[[float], None] = time.sleep
    watch: bool = True
    job_kind: JobKind = DEFAULT_JOB_KIND
    expected_queue: str | None = None
    disruptions: DisruptionTracker = field(default_factory=DisruptionTracker)
    on_disruption: Callable[[DisruptionTracker], None] = lambda _: None
    task: dict[str, str | None] = field(default_factory=dict)  # dag_id, task_id: metrics' tags

    def run(self, job: JsonDict, plan: WaitPlan) -> WaitEnd:
        """Wait for ``job`` as ``plan`` says (what for, until when, the queue its PodGroup must
        be in when it appears)."""
        self.expected_queue = plan.expected_queue
        self.disruptions = DisruptionTracker(
            plan.on_disruption, plan.max_disruptions, plan.readmission_timeout
        )
        gang_scheduling, wait_for, deadline = plan.gang_scheduling, plan.wait_for, plan.admission_deadline
        metadata = job["metadata"]
        name, namespace = metadata["name"], metadata["namespace"]
        if not self.watch:
            return self._wait(None, job, gang_scheduling, wait_for, deadline)
        with_podgroup = gang_scheduling != "disabled"
        with JobWatch(
            self.hook, name, namespace, with_podgroup=with_podgroup, log=self.log, job_kind=self.job_kind
        ) as feed:
            feed.ready(WATCH_SYNC_SECONDS)
            return self._wait(feed, job, gang_scheduling, wait_for, deadline)

    def _wait(
        self,
        feed: JobWatch | None,
        job: JsonDict,
        gang_scheduling: str,
        wait_for: str,
        deadline: dt.datetime | None,
    ) -> WaitEnd:
        metadata = job["metadata"]
        name, namespace, uid = metadata["name"], metadata["namespace"], metadata["uid"]
        admitted_at: str | None = None
        last = ""
        memory = FailureMemory(self.job_kind)
        podgroup_seen = False
        while True:
            if feed is not None:
                feed.changed.clear()
            seen = (feed.look(uid, gang_scheduling) if feed else None) or observation.observe(
                self.hook, name, namespace, gang_scheduling, uid, job_kind=self.job_kind
            )
            status = seen.status
            if not podgroup_seen and seen.podgroup is not None:
                # The queue is settled when the PodGroup is created (Trainer's plugin, then
                # Volcano's mutating webhook, which acts on CREATE only): one check suffices.
                podgroup_seen = True
                self.log.info("PodGroup %s/%s is in queue %s", namespace, name, podgroup_queue(seen.podgroup))
                if queue_mismatch(self.expected_queue, seen) is not None:
                    return WaitEnd("queue_mismatch", seen, None)
            if (failure := memory.noticed(seen.pods)) is not None:
                memory.tail = observation.log_tail(
                    self.hook, failure.pod, namespace, 100, self.job_kind.container, previous=failure.previous
                )
            if self.follow_logs and self.follower is None and status.phase is GangPhase.RUNNING:
                leader = self.job_kind.leader_pod(name, seen.pods)
                if leader is not None:
                    self.follower = LogFollower(
                        self.hook, leader, namespace, self.log, container=self.job_kind.container
                    ).start()
            line = status.describe()
            if line != last:
                self.log.info("gang job %s/%s: %s", namespace, name, line)
                self.on_change(status)
                last = line
            if status.phase is GangPhase.LOST:
                return WaitEnd("lost", seen, admitted_at)
            if status.admitted and admitted_at is None:
                # After an outage too: a gang admitted meanwhile counts, at its condition time.
                admitted_at = seen.admitted_at()
                self.log.info(
                    "gang admitted job=%s/%s queue=%s at %s", namespace, name, status.queue, admitted_at
                )
                if wait_for == "admission":
                    return WaitEnd("admitted", seen, admitted_at)
            step = self.disruptions.look(seen, admitted=admitted_at is not None)
            write = lambda level, text: getattr(self.log, level)(text)  # noqa: E731
            if disruption_report.report(step, status, f"{namespace}/{name}", write, **self.task):
                self.on_disruption(self.disruptions)
            if step.give_up is not None:
                return WaitEnd("disrupted", seen, admitted_at, memory, step.give_up)
            if status.finished:
                return WaitEnd("finished", seen, admitted_at, memory)
            if admitted_at is None and deadline is not None and dt.datetime.now(dt.UTC) >= deadline:
                return WaitEnd("admission_timeout", seen, None)
            self._pause(feed, deadline if admitted_at is None else self.disruptions.deadline)

    def _pause(self, feed: JobWatch | None, deadline: dt.datetime | None) -> None:
        """Until something changes (watching) or for ``poll_interval`` (polling), never past the
        admission ``deadline``."""
        seconds = self.poll_interval
        if feed is not None and feed.healthy:
            seconds = max(self.poll_interval, RESYNC_SECONDS)
        if deadline is not None:
            seconds = min(seconds, max(0.0, (deadline - dt.datetime.now(dt.UTC)).total_seconds()))
        if feed is None:
            self.sleep(seconds)
        else:
            feed.changed.wait(seconds)

    def stop_following(self, timeout: float = 10.0) -> bool:
        """Stop the log stream; whether it had delivered the whole log (then no tail is needed)."""
        follower, self.follower = self.follower, None
        if follower is None:
            return False
        follower.stop(timeout=timeout)
        return follower.complete
