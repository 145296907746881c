"""One JobSet's reconcile as a pure decision: which Jobs to create, delete or (un)suspend, and
the status to write — kubernetes-sigs/jobset's ``reconcile`` (v0.12) for the policies a
Trainer runtime uses.

In order: child Jobs of an earlier restart attempt (label ``restart-attempt`` below
``status.restarts``) are deleted; the others are active, succeeded (``Complete``) or failed
(``Failed``). ``status.replicatedJobsStatus`` counts them per replicated job (``ready`` = Jobs
whose succeeded + ready pods reach their parallelism). A finished JobSet only deletes its
active Jobs. A failed Job triggers the failure policy: none -> ``Failed``/``FailedJobs``;
``failurePolicy`` -> restart the whole JobSet (``restarts`` + 1, all Jobs recreated) until
``maxRestarts`` (default 0) restarts counted, then ``Failed``/``ReachedMaxRestarts``. Otherwise
succeeded Jobs meet the success policy (``All`` by default: every Job of the target replicated
jobs, all of them by default; ``Any``: one) -> ``Completed``/``AllJobsCompleted``. Then the
headless Service and missing Jobs are created, and ``spec.suspend`` is carried to the active Jobs
with the ``Suspended`` condition (``SuspendedJobs`` / ``ResumeJobs``).

Conditions follow the JobSet controller's rule: a condition of the same type is replaced only
when its status changes, a new one is added only when true. Not modelled: failure policy rules,
``InOrder`` startup, ``dependsOn``, coordinator labels, exclusive placement, TTL, in-place and
blocking restarts.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers import metav1_conditions
from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.trainer.jobset_build import (
    REPLICATED_JOB_NAME_KEY,
    RESTARTS_KEY,
    build_job,
    build_service,
    dns_hostnames,
    job_name,
    replicas,
    replicated_jobs,
)

JsonDict = dict[str, Any]

COMPLETED, FAILED, SUSPENDED = "Completed", "Failed", "Suspended"
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
ALL_JOBS_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
SUSPENDED_JOBS = ("SuspendedJobs", "jobset is suspended")
RESUMED_JOBS = ("ResumeJobs", "jobset is resumed")


@dataclass
class JobSetPlan:
    status: JsonDict
    delete_jobs: list[str] = field(default_factory=list)  # foreground: their pods go first
    create_service: JsonDict | None = None
    create_jobs: list[JsonDict] = field(default_factory=list)
    set_suspend: list[tuple[JsonDict, bool]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


@dataclass
class ChildJobs:
    active: list[JsonDict] = field(default_factory=list)
    succeeded: list[JsonDict] = field(default_factory=list)
    failed: list[JsonDict] = field(default_factory=list)
    previous: list[JsonDict] = field(default_factory=list)

    def names(self) -> set[str]:
        every = [*self.active, *self.succeeded, *self.failed, *self.previous]
        return {str((job.get("metadata") or {}).get("name")) for job in every}


def _labels(job: JsonDict) -> JsonDict:
    return (job.get("metadata") or {}).get("labels") or {}


def job_outcome(job: JsonDict) -> str | None:
    """``Complete`` or ``Failed`` once the Job controller says so, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def classify(jobs: list[JsonDict], restarts: int) -> ChildJobs:
    children = ChildJobs()
    for job in jobs:
        try:
            attempt = int(_labels(job).get(RESTARTS_KEY, ""))
        except ValueError:
            attempt = -1  # unreadable: treated as left over from an earlier attempt
        outcome = job_outcome(job)
        if attempt < restarts:
            children.previous.append(job)
        elif outcome == "Complete":
            children.succeeded.append(job)
        elif outcome == "Failed":
            children.failed.append(job)
        else:
            children.active.append(job)
    return children


def replicated_jobs_status(jobset: JsonDict, children: ChildJobs) -> list[JsonDict]:
    counts = {
        str(rjob.get("name")): dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
        for rjob in replicated_jobs(jobset)
    }
    for job in children.active:
        entry = counts.get(str(_labels(job).get(REPLICATED_JOB_NAME_KEY)))
        if entry is None:
            continue
        spec, status = job.get("spec") or {}, job.get("status") or {}
        pods = int(spec.get("parallelism") or 1)
        if spec.get("completions") is not None:
            pods = min(pods, int(spec["completions"]))
        entry["ready"] += int(int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods)
        entry["active"] += int(int(status.get("active") or 0) > 0)
        entry["suspended"] += int(bool(spec.get("suspend")))
    for bucket, key in ((children.succeeded, "succeeded"), (children.failed, "failed")):
        for job in bucket:
            entry = counts.get(str(_labels(job).get(REPLICATED_JOB_NAME_KEY)))
            if entry is not None:
                entry[key] += 1
    return [{"name": name, **entry} for name, entry in counts.items()]


def _condition(
    plan: JobSetPlan, ctype: str, truth: bool, reason_message: tuple[str, str], now: dt.datetime
) -> bool:
    """The JobSet controller's ``updateCondition``; True when the status changed (event queued)."""
    reason, message = reason_message
    status = "True" if truth else "False"
    current: list[JsonDict] = list(plan.status.get("conditions") or [])
    existing = metav1_conditions.find(current, ctype)
    if existing is not None and existing.get("status") == status:
        return False
    if existing is None and not truth:
        return False
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }
    current = [new if c.get("type") == ctype else c for c in current] if existing else [*current, new]
    plan.status["conditions"] = current
    plan.events.append(("Warning" if ctype == FAILED else "Normal", reason, message))
    return True


def finished(jobset: JsonDict) -> bool:
    current = (jobset.get("status") or {}).get("conditions")
    return metav1_conditions.is_true(current, COMPLETED) or metav1_conditions.is_true(current, FAILED)


def _fail(plan: JobSetPlan, jobset: JsonDict, now: dt.datetime) -> None:
    policy = (jobset.get("spec") or {}).get("failurePolicy")
    if policy is None:
        if _condition(plan, FAILED, True, FAILED_JOBS, now):
            plan.status["terminalState"] = FAILED
        return
    counted = int(plan.status.get("restartsCountTowardsMax") or 0)
    if counted >= int(policy.get("maxRestarts") or 0):
        if _condition(plan, FAILED, True, REACHED_MAX_RESTARTS, now):
            plan.status["terminalState"] = FAILED
        return
    plan.status["restarts"] = int(plan.status.get("restarts") or 0) + 1
    plan.status["restartsCountTowardsMax"] = counted + 1
    plan.events.append(("Warning", "Restarting", f"restarting jobset, attempt {plan.status['restarts']}"))


def _succeeded(jobset: JsonDict, children: ChildJobs) -> bool:
    policy = (jobset.get("spec") or {}).get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or []) or {
        str(r.get("name")) for r in replicated_jobs(jobset)
    }
    matching = sum(1 for job in children.succeeded if _labels(job).get(REPLICATED_JOB_NAME_KEY) in targets)
    if policy.get("operator") == "Any":
        return matching >= 1
    expected = sum(replicas(r) for r in replicated_jobs(jobset) if str(r.get("name")) in targets)
    return matching >= expected


def plan_jobset(jobset: JsonDict, jobs: list[JsonDict], service_exists: bool, now: dt.datetime) -> JobSetPlan:
    """What to do for ``jobset`` given its child ``jobs`` (controlled by it) from the cache."""
    plan = JobSetPlan(status=copy.deepcopy(jobset.get("status") or {}))
    children = classify(jobs, int(plan.status.get("restarts") or 0))
    plan.status["replicatedJobsStatus"] = replicated_jobs_status(jobset, children)
    plan.status.setdefault("restarts", 0)
    if finished(jobset):
        plan.delete_jobs = [str(job["metadata"]["name"]) for job in children.active]
        return plan
    plan.delete_jobs = [
        str(job["metadata"]["name"])
        for job in children.previous
        if not job["metadata"].get("deletionTimestamp")
    ]
    if children.failed:
        _fail(plan, jobset, now)
        return plan
    if children.succeeded and _succeeded(jobset, children):
        if _condition(plan, COMPLETED, True, ALL_JOBS_COMPLETED, now):
            plan.status["terminalState"] = COMPLETED
        return plan
    if dns_hostnames(jobset) and not service_exists:
        plan.create_service = build_service(jobset)
    existing = children.names()
    name = str((jobset.get("metadata") or {}).get("name"))
    for rjob in replicated_jobs(jobset):
        for index in range(replicas(rjob)):
            if job_name(name, str(rjob.get("name")), index) not in existing:
                plan.create_jobs.append(build_job(jobset, rjob, index))
    suspend = bool((jobset.get("spec") or {}).get("suspend"))
    if suspend:
        _condition(plan, SUSPENDED, True, SUSPENDED_JOBS, now)
    elif metav1_conditions.is_true(plan.status.get("conditions"), SUSPENDED):
        _condition(plan, SUSPENDED, False, RESUMED_JOBS, now)
    plan.set_suspend = [
        (job, suspend) for job in children.active if bool((job.get("spec") or {}).get("suspend")) != suspend
    ]
    return plan
