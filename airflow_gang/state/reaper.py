"""The orphan reaper: no gang job outlives the task instance that waits for it.

Airflow can end a task from outside without running any of the task's code: the scheduler fails
a resumed try that races the executor's report of the deferral (apache/airflow#72716), a worker
is killed and its supervisor reports the try failed, a heartbeat times out. Neither the
operator's ``on_kill`` nor the trigger's runs then, and the job would hold its gang's GPUs for
ever. The reaper closes that gap from the one place that sees every such failure: the metadata
database.

A job is an orphan when all of this holds:

- the task state store entry ``pytorchjob`` of a task instance names it (the operator writes
  ``{name, namespace, uid, kubernetes_conn_id}`` before any wait);
- that task instance is ``failed``, ``upstream_failed``, ``skipped`` or ``removed``: no try will
  wait for the job or adopt it (``up_for_retry``, ``scheduled``, ``queued``, ``running``,
  ``deferred`` all have a try coming that adopts the live job; ``success`` may have handed the
  job on with ``wait_for_completion=False``);
- the job still exists with that uid and is live (not Succeeded/Failed, not being deleted).

Then the job and its PodGroup are deleted (uid precondition) and the deletion is logged at
WARNING. That includes a task that failed for good with `GangApiUnavailable` (an outage longer
than ``api_unavailable_timeout`` and no retry left): its try deleted nothing, but the task gave
up, so no try will ever collect the job's result (a clear trains anew), and the job would hold
its GPUs for nobody. Only a retry reattaches; ``retries`` > 0 is how to ride out long outages.

A job of such a task instance that already **finished** is deleted when the entry's
``delete_on_finish`` asks for it (``always``; ``on_success`` and the job Succeeded): what the
operator would have done at the end, had the task not been ended from outside after the job.
It never deletes a job because it could not read it: a failed read leaves the candidate for the
next sweep. `OrphanReaper` runs these sweeps in the scheduler, started by the
plugin's listener (`airflow_gang.plugins.listener`), every ``[gang] orphan_reaper_interval``
seconds and at once when the scheduler fails a task instance.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from airflow_gang.kinds import DEFAULT_JOB_KIND
from airflow_gang.reports import telemetry

log = logging.getLogger(__name__)

# The task state store key under which the operator keeps its job's identity.
STATE_STORE_JOB_KEY = "pytorchjob"
ORPHANING_STATES = frozenset({"failed", "upstream_failed", "skipped", "removed"})
# Task instances that ended longer ago than this are not looked at again (their jobs were
# settled by earlier sweeps, or by a scheduler that ran then).
LOOKBACK = dt.timedelta(days=1)


@dataclass(frozen=True)
class Candidate:
    """A job named by the state store of a task instance that no try will wait for."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    ti_state: str
    name: str
    namespace: str
    uid: str
    conn_id: str
    # The operator's delete_on_finish (None in entries written before 0.3: live jobs only).
    delete_on_finish: str | None = None
    # PyTorchJob or TrainJob (entries written before 0.5 name no kind: PyTorchJobs).
    kind: str = DEFAULT_JOB_KIND.kind

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.dag_id, self.run_id, self.task_id, self.map_index, self.uid)

    def describe(self) -> str:
        index = "" if self.map_index < 0 else f"[{self.map_index}]"
        return f"{self.dag_id}.{self.task_id}{index} run {self.run_id} ({self.ti_state})"


def candidate_from_entry(
    value: str, *, dag_id: str, run_id: str, task_id: str, map_index: int, ti_state: str
) -> Candidate | None:
    """A `Candidate` from one state-store row, or None when the row does not name a job."""
    try:
        entry = json.loads(value)
    except (TypeError, ValueError):
        return None
    if not isinstance(entry, dict) or not entry.get("name") or not entry.get("uid"):
        return None
    return Candidate(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        ti_state=ti_state,
        name=str(entry["name"]),
        namespace=str(entry.get("namespace") or "default"),
        uid=str(entry["uid"]),
        conn_id=str(entry.get("kubernetes_conn_id") or "kubernetes_default"),
        delete_on_finish=str(entry["delete_on_finish"]) if entry.get("delete_on_finish") else None,
        kind=str(entry.get("kind") or DEFAULT_JOB_KIND.kind),
    )


def find_candidates(since: dt.datetime) -> list[Candidate]:
    """Task instances that ended in an orphaning state since ``since`` and named a job."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    store, ti = TaskStateStoreModel, TaskInstance
    query = (
        select(store.dag_id, store.run_id, store.task_id, store.map_index, ti.state, store.value)
        .join(
            ti,
            and_(
                ti.dag_id == store.dag_id,
                ti.run_id == store.run_id,
                ti.task_id == store.task_id,
                ti.map_index == store.map_index,
            ),
        )
        .where(store.key == STATE_STORE_JOB_KEY)
        .where(ti.state.in_(sorted(ORPHANING_STATES)))
        .where(ti.end_date.is_(None) | (ti.end_date >= since))
    )
    with create_session() as session:
        rows = session.execute(query).all()
    found = (
        candidate_from_entry(
            value,
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=int(map_index),
            ti_state=str(state),
        )
        for dag_id, run_id, task_id, map_index, state, value in rows
    )
    return [candidate for candidate in found if candidate is not None]


def reap(candidate: Candidate) -> bool:
    """Delete the candidate's job and PodGroup if it is still live; True if it was deleted.

    Raises (`GangError` or a connection error) when the cluster cannot be read or written: the
    caller tries again later.
    """
    from airflow_gang.hooks.gang import GangJobHook
    from airflow_gang.jobs import cleanup, submission
    from airflow_gang.kinds import DEFAULT_JOB_KIND, JOB_KINDS

    job_kind = JOB_KINDS.get(candidate.kind, DEFAULT_JOB_KIND)
    hook = GangJobHook(conn_id=candidate.conn_id)
    job = hook.get_job(job_kind, candidate.name, candidate.namespace)
    if job is None or job["metadata"].get("uid") != candidate.uid or job["metadata"].get("deletionTimestamp"):
        return False
    if submission.is_live(job, job_kind):
        reason = "orphaned"
        log.warning(
            "deleting orphaned %s %s/%s (uid %s) and its PodGroup: its task instance %s ended "
            "and no try will wait for it",
            job_kind.kind,
            candidate.namespace,
            candidate.name,
            candidate.uid,
            candidate.describe(),
        )
    elif finished_job_to_delete(submission.outcome(job, job_kind), candidate.delete_on_finish):
        reason = f"delete_on_finish={candidate.delete_on_finish}"
        log.warning(
            "deleting finished %s %s/%s (uid %s) per delete_on_finish=%s: its task instance %s "
            "ended from outside before it could",
            job_kind.kind,
            candidate.namespace,
            candidate.name,
            candidate.uid,
            candidate.delete_on_finish,
            candidate.describe(),
        )
    else:
        return False
    cleanup.delete_gang(
        hook,
        candidate.name,
        candidate.namespace,
        candidate.uid,
        timeout=30.0,
        reason=reason,
        logger=log,
        job_kind=job_kind,
    )
    telemetry.reaper_deletion(reason=reason, dag_id=candidate.dag_id, task_id=candidate.task_id)
    return True


def finished_job_to_delete(outcome: str | None, delete_on_finish: str | None) -> bool:
    """Whether the operator's ``delete_on_finish`` would have deleted a job that ended so."""
    return delete_on_finish == "always" or (delete_on_finish == "on_success" and outcome == "Succeeded")


class OrphanReaper:
    """Sweeps for orphaned jobs in a background thread: periodically, and at once when woken."""

    def __init__(
        self,
        interval: float,
        *,
        finder: Callable[[dt.datetime], Iterable[Candidate]] = find_candidates,
        reaper: Callable[[Candidate], bool] = reap,
        settle_delay: float = 2.0,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self.interval = interval
        self._finder = finder
        self._reaper = reaper
        # Asked before each sweep; False ends the thread (see airflow_gang.plugins.listener).
        self._enabled = enabled
        # A wake-up comes from inside the scheduler's own transaction: give it time to commit.
        self._settle_delay = settle_delay
        # Candidates already looked at; only those still returned by the finder are kept.
        self._settled: set[tuple[str, str, str, int, str]] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> OrphanReaper:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="airflow-gang-orphan-reaper", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        announced = False
        while not self._stop.is_set():
            woken = self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if woken and self._stop.wait(self._settle_delay):
                return
            if not self._enabled():
                return
            if not announced:
                log.info("airflow-gang orphan reaper sweeping every %.0fs", self.interval)
                announced = True
            try:
                self.sweep()
            except Exception:  # the reaper must never take the scheduler down
                log.exception("airflow-gang orphan sweep failed; trying again in %.0fs", self.interval)

    def sweep(self) -> list[Candidate]:
        """One pass: reap every live orphan not settled by an earlier pass."""
        candidates = list(self._finder(dt.datetime.now(dt.UTC) - LOOKBACK))
        # Forget what the finder no longer returns (past the lookback), so a scheduler running
        # for weeks does not keep every key it ever saw.
        self._settled &= {candidate.key for candidate in candidates}
        reaped = []
        for candidate in candidates:
            if candidate.key in self._settled:
                continue
            try:
                deleted = self._reaper(candidate)
            except Exception as error:  # unreadable now (outage, bad connection): next sweep
                log.warning("could not check orphan candidate %s: %s", candidate.describe(), error)
                continue
            self._settled.add(candidate.key)
            if deleted:
                reaped.append(candidate)
        return reaped
