"""Requests and policies: which event each change is, and which action a job's policies pick.

As volcano-sh/volcano v1.16.0-alpha.1 (commit a4b775ad):

- ``job_controller_handler.go``: a job's creation, and an update changing its spec or phase,
  is ``OutOfSync`` (52-115); a pod controlled by a Job and annotated with its job name, version
  and task is, when added, ``PodPending`` (142-209); when updated (211-323) ``PodFailed`` as it
  turns Failed (with the first container's exit code), ``TaskCompleted`` as it turns Succeeded
  and completes its task, ``TaskFailed`` while Running/Pending with its task's restarts at
  ``maxRetry``, ``PodRunning``/``PodPending`` as it turns Running/Pending, else ``OutOfSync``;
  when deleted ``PodEvicted`` (325-402), unless the controller did not know it. A pod marked
  out of sync (``volcano.sh/controller-out-of-sync``) is always ``OutOfSync``. A PodGroup
  whose phase changes requests a sync of its job, ``Unknown`` as ``JobUnknownEvent``
  (452-492).
- ``job_controller_util.go`` lines 182-305 ``applyPolicies``: a request's own action wins;
  internal events (``OutOfSync``, ``CommandIssued``, ``PodRunning``: 407-416), a request of an
  older job (another uid) or of an older job version sync; otherwise the first policy of the
  pod's task, then of the job, whose events hold the event (or ``*``), or whose ``exitCode``
  is the pod's, gives the action (``PodPending`` only with a ``timeout``); none: ``SyncJob``.
  A ``timeout`` delays the action.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from gang_sim.controllers.informer import Change
from gang_sim.controllers.kinds import VCJOBS
from gang_sim.controllers.ownership import controller_uid
from gang_sim.controllers.volcano_jobs.build import (
    JOB_NAME_KEY,
    JOB_VERSION_KEY,
    OUT_OF_SYNC_KEY,
    TASK_SPEC_KEY,
    tasks,
)
from gang_sim.controllers.volcano_jobs.status import SYNC_JOB

JsonDict = dict[str, Any]

# bus/v1alpha1/events.go lines 26-60.
ANY = "*"
POD_FAILED, POD_EVICTED, POD_PENDING, POD_RUNNING = "PodFailed", "PodEvicted", "PodPending", "PodRunning"
JOB_UNKNOWN, TASK_COMPLETED, TASK_FAILED = "Unknown", "TaskCompleted", "TaskFailed"
OUT_OF_SYNC, COMMAND_ISSUED = "OutOfSync", "CommandIssued"
INTERNAL_EVENTS = frozenset({OUT_OF_SYNC, COMMAND_ISSUED, POD_RUNNING})


@dataclass(frozen=True)
class Request:
    """``apis.Request``: what woke a job (equal requests coalesce, as in a work queue)."""

    namespace: str
    job_name: str
    event: str = ""
    job_uid: str = ""
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    exit_code: int = 0
    job_version: int = 0
    action: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.job_name


@dataclass(frozen=True)
class Decision:
    action: str
    delay: dt.timedelta | None = None


def _meta(obj: JsonDict | None) -> JsonDict:
    return (obj or {}).get("metadata") or {}


def _phase(obj: JsonDict | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def job_request(change: Change) -> Request | None:
    """``addJob``/``updateJob``: OutOfSync for a new job, or a changed spec or phase."""
    if change.type == "DELETED":
        return None
    meta = _meta(change.obj)
    if change.type == "MODIFIED" and change.old is not None:
        old = change.old
        if meta.get("resourceVersion") == _meta(old).get("resourceVersion"):
            return None
        same_spec = (change.obj.get("spec") or {}) == (old.get("spec") or {})
        phase = ((change.obj.get("status") or {}).get("state") or {}).get("phase")
        old_phase = ((old.get("status") or {}).get("state") or {}).get("phase")
        if same_spec and phase == old_phase:
            return None
    return Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""), OUT_OF_SYNC)


def _task_pods(job_pods: list[JsonDict], task: str) -> list[JsonDict]:
    return [p for p in job_pods if (_meta(p).get("annotations") or {}).get(TASK_SPEC_KEY) == task]


def task_completed(job: JsonDict | None, job_pods: list[JsonDict], task: str) -> bool:
    """``jobCache.TaskCompleted`` (controllers/cache/cache.go lines 274-307)."""
    spec = next((t for t in tasks(job or {}) if t.get("name") == task), None)
    replicas = int((spec or {}).get("replicas") or 0)
    if replicas <= 0:
        return False
    return sum(1 for p in _task_pods(job_pods, task) if _phase(p) == "Succeeded") >= replicas


def task_failed(job: JsonDict | None, job_pods: list[JsonDict], task: str) -> bool:
    """``jobCache.TaskFailed`` (cache.go lines 309-350): restarts of live pods reach maxRetry."""
    spec = next((t for t in tasks(job or {}) if t.get("name") == task), None)
    if spec is None:
        return False
    max_retry = int(spec.get("maxRetry") or 0) or 3
    if not spec.get("replicas") or max_retry == -1:
        return False
    retried = 0
    for pod in _task_pods(job_pods, task):
        if _phase(pod) in ("Running", "Pending"):
            status = pod.get("status") or {}
            for stat in [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]:
                retried += int(stat.get("restartCount") or 0)
    return retried >= max_retry


def _exit_code(pod: JsonDict) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    terminated = ((statuses[0].get("state") or {}).get("terminated") if statuses else None) or {}
    code = terminated.get("exitCode")
    return code if isinstance(code, int) else 0


def pod_request(change: Change, job: JsonDict | None, job_pods: list[JsonDict]) -> Request | None:
    """``addPod``/``updatePod``/``deletePod``: the request a pod's change makes, if any.

    :param job: the pod's job as cached; ``job_pods`` its pods as cached after the change.
    """
    pod = change.obj
    meta = _meta(pod)
    uid = controller_uid(pod, VCJOBS)
    annotations = meta.get("annotations") or {}
    if uid is None or JOB_NAME_KEY not in annotations or TASK_SPEC_KEY not in annotations:
        return None
    try:
        version = int(annotations.get(JOB_VERSION_KEY, ""))
    except ValueError:
        return None
    task = str(annotations[TASK_SPEC_KEY])
    out_of_sync = OUT_OF_SYNC_KEY in annotations
    exit_code = 0
    if change.type == "ADDED":
        event = OUT_OF_SYNC if out_of_sync else POD_PENDING
    elif change.type == "DELETED":
        # The controller's cache did not have it (``!cache.HasPod``): nothing was evicted.
        event = OUT_OF_SYNC if out_of_sync or change.old is None else POD_EVICTED
    else:
        old = change.old or {}
        if _meta(old).get("resourceVersion") == meta.get("resourceVersion"):
            return None
        event, phase, old_phase = OUT_OF_SYNC, _phase(pod), _phase(old)
        if phase == "Failed" and old_phase != "Failed":
            event, exit_code = POD_FAILED, _exit_code(pod)
        elif phase == "Succeeded" and old_phase != "Succeeded" and task_completed(job, job_pods, task):
            event = TASK_COMPLETED
        elif phase in ("Running", "Pending"):
            if task_failed(job, job_pods, task):
                event = TASK_FAILED
            if old_phase != phase:
                event = POD_RUNNING if phase == "Running" else POD_PENDING
        if out_of_sync:
            event = OUT_OF_SYNC
    return Request(
        namespace=str(meta.get("namespace") or ""),
        job_name=str(annotations[JOB_NAME_KEY]),
        event=event,
        job_uid=uid,
        task=task,
        pod=str(meta.get("name") or ""),
        pod_uid=str(meta.get("uid") or ""),
        exit_code=exit_code,
        job_version=version,
    )


def podgroup_request(change: Change) -> Request | None:
    """``updatePodGroup``: only an update that changes the phase; the job is the owner named Job."""
    if change.type != "MODIFIED" or _phase(change.obj) == _phase(change.old):
        return None
    meta = _meta(change.obj)
    job_name = str(meta.get("name") or "")
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            job_name = str(ref.get("name"))
    event = JOB_UNKNOWN if _phase(change.obj) == "Unknown" else ""
    return Request(str(meta.get("namespace") or ""), job_name, event)


def _events(policy: JsonDict) -> list[str]:
    listed = [str(e) for e in policy.get("events") or []]
    if policy.get("event"):
        listed.append(str(policy["event"]))
    return listed


def _timeout(policy: JsonDict) -> dt.timedelta | None:
    raw = policy.get("timeout")
    return parse_go_duration(str(raw)) if raw else None


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_go_duration(text: str) -> dt.timedelta | None:
    """A ``metav1.Duration`` as Go's ``time.ParseDuration`` reads it (``1m30s``); None if invalid."""
    body = text.strip().lstrip("+")
    if body in ("0", ""):
        return dt.timedelta(0) if body == "0" else None
    parts = _DURATION_PART.findall(body)
    if "".join(number + unit for number, unit in parts) != body:
        return None
    return dt.timedelta(seconds=sum(float(number) * _UNITS[unit] for number, unit in parts))


def _match(policies: list[Any], request: Request) -> Decision | None:
    for policy in [p for p in policies if isinstance(p, dict)]:
        events = _events(policy)
        if events and request.event and (request.event in events or ANY in events):
            timeout = _timeout(policy)
            if request.event != POD_PENDING or timeout is not None:
                return Decision(str(policy.get("action") or SYNC_JOB), timeout)
        code = policy.get("exitCode")
        if isinstance(code, int) and code == request.exit_code:
            return Decision(str(policy.get("action") or SYNC_JOB), _timeout(policy))
    return None


def apply_policies(job: JsonDict, request: Request) -> Decision:
    """``applyPolicies`` (job_controller_util.go lines 182-284)."""
    if request.action:
        return Decision(request.action)
    if request.event in INTERNAL_EVENTS:
        return Decision(SYNC_JOB)
    if request.job_uid and request.job_uid != str(_meta(job).get("uid") or ""):
        return Decision(SYNC_JOB)
    if request.job_version < int(((job.get("status") or {}).get("version")) or 0):
        return Decision(SYNC_JOB)
    if request.task:
        for task in tasks(job):
            if task.get("name") == request.task:
                found = _match(task.get("policies") or [], request)
                if found is not None:
                    return found
                break
    found = _match((job.get("spec") or {}).get("policies") or [], request)
    return found if found is not None else Decision(SYNC_JOB)
