"""One batch/v1 Job's sync as a pure decision: pods to create or delete, and the status to write.

What kube-controller-manager's Job controller does, for what JobSet's Jobs use:

- **Pods**: ``completionMode: Indexed`` runs one pod per completion index not yet succeeded,
  at most ``parallelism`` at a time: ``generateName: <job>-<index>-``, the index as label and
  annotation ``batch.kubernetes.io/job-completion-index`` and as env ``JOB_COMPLETION_INDEX``,
  hostname ``<job>-<index>`` (the pod template's ``subdomain`` completes its DNS name).
  ``NonIndexed`` runs ``parallelism`` pods (``<job>-<random>``) until ``completions`` succeed.
  A failed pod (``restartPolicy: Never``) is replaced right away (``podReplacementPolicy:
  TerminatingOrFailed``; the controller's 10 s exponential delay is not modelled).
- **Counts** (``status``): ``active`` (pods neither finished nor being deleted), ``ready``
  (those with ``Ready=True``), ``terminating``, ``succeeded`` (distinct completed indexes, kept
  in ``completedIndexes`` as ``0-2,4``), ``failed``. Counts never go down when finished pods
  are deleted (upstream tracks them through a pod finalizer; here the status remembers them).
- **Failure**: more failed pods than ``backoffLimit`` (default 6) — or, with ``restartPolicy:
  OnFailure``, container restarts of the active pods reaching it (any restart at 0) — sets
  ``FailureTarget``/``BackoffLimitExceeded``/"Job has reached the specified backoff limit",
  deletes the active pods, and once none is left ``Failed`` with the same reason and message.
- **Success**: every index (``completions`` pods) succeeded -> ``SuccessCriteriaMet`` then,
  with no pod left running, ``Complete``, both ``CompletionsReached``/"Reached expected number of
  succeeded pods", and ``completionTime``.
- **Suspension**: a suspended Job's active pods are deleted and ``Suspended=True``
  (``JobSuspended``/"Job suspended"); resuming sets it ``False`` (``JobResumed``/"Job resumed").
  ``startTime`` is set when the Job first runs unsuspended.

Not modelled: ``activeDeadlineSeconds``, ``backoffLimitPerIndex``, pod failure and success
policies, TTL after finished, the job-tracking finalizer and the ``managedBy`` field.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.kinds import JOBS, PODS
from gang_sim.controllers.ownership import owner_reference

JsonDict = dict[str, Any]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
DEFAULT_BACKOFF_LIMIT = 6
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass
class JobPlan:
    status: JsonDict
    create_pods: list[JsonDict] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


def completion_index(pod: JsonDict) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def parse_indexes(text: str | None) -> set[int]:
    """``"0-2,4"`` -> {0, 1, 2, 4} (``status.completedIndexes``)."""
    indexes: set[int] = set()
    for part in (text or "").split(","):
        if not part.strip():
            continue
        low, _, high = part.partition("-")
        try:
            indexes.update(range(int(low), int(high or low) + 1))
        except ValueError:
            continue
    return indexes


def format_indexes(indexes: set[int]) -> str:
    ranges: list[str] = []
    for index in sorted(indexes):
        if ranges and ranges[-1].split("-")[-1] == str(index - 1):
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{index}"
        else:
            ranges.append(str(index))
    return ",".join(ranges)


def _phase(pod: JsonDict) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _deleting(pod: JsonDict) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _ready(pod: JsonDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _restarts(pod: JsonDict) -> int:
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def build_pod(job: JsonDict, index: int | None) -> JsonDict:
    """A pod from the Job's template, owned by the Job (and indexed when ``index`` is given)."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name") or "")
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    labels, annotations = (
        dict(template_meta.get("labels") or {}),
        dict(template_meta.get("annotations") or {}),
    )
    pod_spec: JsonDict = template.get("spec") or {}
    if index is not None:
        labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
        pod_spec.setdefault("hostname", f"{name}-{index}")
        source = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
        for key in ("initContainers", "containers"):
            for container in pod_spec.get(key) or []:
                env = container.setdefault("env", [])
                if not any(item.get("name") == COMPLETION_INDEX_ENV for item in env):
                    env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": source})
    metadata: JsonDict = {
        "generateName": f"{name}-{index}-" if index is not None else f"{name}-",
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [owner_reference(job, JOBS)],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": PODS.api_version, "kind": PODS.kind, "metadata": metadata, "spec": pod_spec}


def _is_true(conditions: list[JsonDict], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def _set(
    conditions: list[JsonDict], ctype: str, truth: bool, reason_message: tuple[str, str], *, now: str
) -> None:
    """A batch JobCondition (with ``lastProbeTime``), replaced in place or appended."""
    reason, message = reason_message
    new = {
        "type": ctype,
        "status": "True" if truth else "False",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    for position, condition in enumerate(conditions):
        if condition.get("type") == ctype:
            conditions[position] = new
            return
    conditions.append(new)


@dataclass(frozen=True)
class Observed:
    """What a Job's pods say: the ones still live, their counts, the indexes done."""

    live: list[JsonDict]  # neither Succeeded nor Failed (being deleted or not)
    active: list[JsonDict]  # live and not being deleted
    done: set[int]  # completed indexes (Indexed Jobs)
    succeeded: int
    failed: int
    restarts: int  # container restarts of the active pods (restartPolicy OnFailure)


def observe(job: JsonDict, pods: list[JsonDict]) -> Observed:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    completions = spec.get("completions")
    live = [pod for pod in pods if _phase(pod) not in FINISHED_PHASES]
    active = [pod for pod in live if not _deleting(pod)]
    succeeded_pods = [pod for pod in pods if _phase(pod) == "Succeeded"]
    done = parse_indexes(status.get("completedIndexes"))
    if spec.get("completionMode") == "Indexed" and isinstance(completions, int):
        done |= {
            i for pod in succeeded_pods if (i := completion_index(pod)) is not None and 0 <= i < completions
        }
        succeeded = len(done)
    else:
        succeeded = max(int(status.get("succeeded") or 0), len(succeeded_pods))
    return Observed(
        live=live,
        active=active,
        done=done,
        succeeded=succeeded,
        failed=max(int(status.get("failed") or 0), sum(1 for pod in pods if _phase(pod) == "Failed")),
        restarts=sum(_restarts(pod) for pod in active),
    )


def _judge(job: JsonDict, seen: Observed, conditions: list[JsonDict], plan: JobPlan, now: str) -> None:
    """Decide (once) whether the Job has failed or met its completions: the *target* conditions."""
    if _is_true(conditions, "FailureTarget") or _is_true(conditions, "SuccessCriteriaMet"):
        return
    spec = job.get("spec") or {}
    backoff = spec.get("backoffLimit")
    backoff = DEFAULT_BACKOFF_LIMIT if backoff is None else int(backoff)
    restart_policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    restarts_exceeded = restart_policy == "OnFailure" and (
        seen.restarts > 0 if backoff == 0 else seen.restarts >= backoff
    )
    completions = spec.get("completions")
    if isinstance(completions, int):
        complete = seen.succeeded >= completions
    else:  # a work queue: done once a pod succeeded and none is left running
        complete = seen.succeeded > 0 and not seen.active
    if seen.failed > backoff or restarts_exceeded:
        _set(conditions, "FailureTarget", True, BACKOFF_LIMIT_EXCEEDED, now=now)
        plan.events.append(("Warning", *BACKOFF_LIMIT_EXCEEDED))
    elif complete:
        _set(conditions, "SuccessCriteriaMet", True, COMPLETIONS_REACHED, now=now)


def plan_job(job: JsonDict, pods: list[JsonDict], now: dt.datetime) -> JobPlan:
    """What ``job`` needs, given the pods it controls (from the cache)."""
    spec = job.get("spec") or {}
    status = copy.deepcopy(job.get("status") or {})
    conditions: list[JsonDict] = list(status.get("conditions") or [])
    plan = JobPlan(status=status)
    if _is_true(conditions, "Complete") or _is_true(conditions, "Failed"):
        return plan
    stamp = rfc3339(now)
    seen = observe(job, pods)
    _judge(job, seen, conditions, plan, stamp)
    finishing = _is_true(conditions, "FailureTarget") or _is_true(conditions, "SuccessCriteriaMet")
    if finishing or spec.get("suspend"):
        plan.delete_pods = [str(pod["metadata"]["name"]) for pod in seen.active]
    if finishing and not seen.live:
        failed = _is_true(conditions, "FailureTarget")
        _set(
            conditions,
            "Failed" if failed else "Complete",
            True,
            BACKOFF_LIMIT_EXCEEDED if failed else COMPLETIONS_REACHED,
            now=stamp,
        )
        if not failed:
            status["completionTime"] = stamp
            plan.events.append(("Normal", "Completed", "Job completed"))
    elif not finishing and spec.get("suspend"):
        if not _is_true(conditions, "Suspended"):
            _set(conditions, "Suspended", True, ("JobSuspended", "Job suspended"), now=stamp)
            plan.events.append(("Normal", "Suspended", "Job suspended"))
    elif not finishing:
        if _is_true(conditions, "Suspended"):
            _set(conditions, "Suspended", False, ("JobResumed", "Job resumed"), now=stamp)
            plan.events.append(("Normal", "Resumed", "Job resumed"))
        status.setdefault("startTime", stamp)
        plan.create_pods = _missing_pods(job, seen)
    _write_counts(job, seen, plan)
    if conditions:
        status["conditions"] = conditions
    return plan


def _write_counts(job: JsonDict, seen: Observed, plan: JobPlan) -> None:
    status = plan.status
    still_active = [pod for pod in seen.active if pod["metadata"]["name"] not in plan.delete_pods]
    for key, value in (("active", len(still_active)), ("succeeded", seen.succeeded), ("failed", seen.failed)):
        if value:
            status[key] = value
        else:
            status.pop(key, None)  # Go's omitempty
    status["ready"] = sum(1 for pod in still_active if _ready(pod))
    status["terminating"] = len(seen.live) - len(still_active)
    status["uncountedTerminatedPods"] = {}
    if (job.get("spec") or {}).get("completionMode") == "Indexed":
        status["completedIndexes"] = format_indexes(seen.done)


def _missing_pods(job: JsonDict, seen: Observed) -> list[JsonDict]:
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism") or 0)
    slots = parallelism - len(seen.active)
    if spec.get("completionMode") == "Indexed" and isinstance(completions, int):
        running = {completion_index(pod) for pod in seen.active}
        wanted = [i for i in range(completions) if i not in seen.done and i not in running]
        return [build_pod(job, index) for index in wanted[: max(slots, 0)]]
    remaining = (
        parallelism if not isinstance(completions, int) else min(parallelism, completions - seen.succeeded)
    )
    return [build_pod(job, None) for _ in range(max(remaining - len(seen.active), 0))]
