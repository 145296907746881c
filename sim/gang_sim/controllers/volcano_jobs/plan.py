"""One operation of the Volcano job controller on one Job, as pure functions of what it sees.

The operations of ``pkg/controllers/job/job_controller_actions.go`` at v1.16.0-alpha.1
(commit a4b775ad), split into what to write (`plan_sync`, `plan_kill`) and, once the
controller has written it, the status that follows (`sync_status`, `kill_status`):

- ``syncJob`` (lines 348-630): nothing for a job being deleted (353-357) or whose queue is not
  in the cache (362-366, an error); a job not yet past ``Pending`` is initiated (382-386,
  ``initiateJob`` 290-319: its status set to ``Pending`` when it has none, 970-993; the
  plugins' job-add; its PodGroup created or updated), any other has the plugins' job-update
  and its PodGroup created or updated (321-337). Pods are only looked at once the PodGroup has
  left ``Pending`` (404-415): before that the status only takes the state's update (417-443).
  Then every missing pod ``<job>-<task>-<i>`` is created (462-557), pods marked out of sync and
  pods beyond the replicas deleted (490-502, 559-586), every pod counted by phase (a terminating
  pod as ``terminating``), and the status written only when it changed (588-629).
- ``killPods`` (lines 91-288): nothing for a job being deleted (93-97); a whole-job kill bumps
  ``status.version`` (148-149) and kills every pod whose phase the state does not retain (all
  but Succeeded/Failed at the last retry, 159-176); a targeted kill kills its task's or pod's
  pods (107-146). Each is marked out of sync, then deleted (180-213). The status counts only
  what could not be deleted plus the terminating pods (retained pods are not counted), takes
  the state's update, ``runningDuration`` (239-242) and the plugins' job-delete (244-247), and
  is always written (249-264); then a whole-job kill deletes the PodGroup (266-283).

A phase change stamps ``state.lastTransitionTime`` and appends a condition
(`status.append_condition`). ``controlledResources`` go out with the next status written: the
real controller edits them in the cached object, so they never make a write of their own.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers.clock import parse_time, rfc3339
from gang_sim.controllers.volcano_jobs import build, plugins
from gang_sim.controllers.volcano_jobs.status import (
    COUNTERS,
    FINISHED,
    PENDING,
    UpdateStatus,
    append_condition,
    phase_of,
    wire,
)

JsonDict = dict[str, Any]
ADMITTED_IF_NOT = ("", "Pending")  # PodGroup phases that keep a job's pods from being created


@dataclass(frozen=True)
class Inputs:
    now: dt.datetime
    priorities: dict[str, int] = field(default_factory=dict)
    queue_known: bool = True


@dataclass
class Counts:
    """``classifyAndAddUpPodBaseOnPhase`` and ``calcPodStatus`` (lines 1016-1057)."""

    values: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, pod: JsonDict) -> None:
        phase = str((pod.get("status") or {}).get("phase") or "")
        key = phase.lower() if phase in ("Pending", "Running", "Succeeded", "Failed") else "unknown"
        self.values[key] += 1
        task = ((pod.get("metadata") or {}).get("annotations") or {}).get(build.TASK_SPEC_KEY)
        if task is not None:
            per_phase = self.tasks.setdefault(str(task), {})
            name = phase if key != "unknown" else "Unknown"
            per_phase[name] = per_phase.get(name, 0) + 1


@dataclass
class SyncPlan:
    """What one ``syncJob`` writes, in its order. ``error``: it stops before writing anything."""

    error: str | None = None
    init_status: JsonDict | None = None  # initJobStatus: the job's first status (Pending)
    configmap: JsonDict | None = None  # svc: the hosts ConfigMap, created or its data replaced
    service: JsonDict | None = None  # svc: the headless Service, created if missing
    create_podgroup: JsonDict | None = None
    update_podgroup: JsonDict | None = None
    sync_task: bool = False  # the PodGroup has left Pending: pods are created and counted
    create_pods: list[JsonDict] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    base_status: JsonDict = field(default_factory=dict)  # the status the update starts from


@dataclass
class KillPlan:
    kill_pods: list[str] = field(default_factory=list)  # marked out of sync, then deleted
    counts: Counts = field(default_factory=Counts)  # the terminating pods so far
    base_status: JsonDict = field(default_factory=dict)
    delete_configmap: bool = False  # svc's job-delete
    delete_service: bool = False
    delete_podgroup: bool = False
    skip: bool = False  # the job is being deleted


def deleting(obj: JsonDict | None) -> bool:
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


def _controlled(status: JsonDict) -> dict[str, str]:
    return dict(status.get("controlledResources") or {})


def plan_sync(job: JsonDict, pods: list[JsonDict], podgroup: JsonDict | None, inputs: Inputs) -> SyncPlan:
    """``syncJob``'s writes for ``job`` with the pods it controls and its PodGroup, as cached."""
    plan = SyncPlan()
    if deleting(job):
        return plan
    if not inputs.queue_known:
        plan.error = f'queue.scheduling.volcano.sh "{(job.get("spec") or {}).get("queue")}" not found'
        return plan
    status = copy.deepcopy(job.get("status") or {})
    spec = job.get("spec") or {}
    job_plugins = plugins.plugins_of(job)
    controlled = _controlled(status)
    if phase_of(status) in ("", PENDING):
        if not phase_of(status):
            status["state"] = {"phase": PENDING}
            status["minAvailable"] = int(spec.get("minAvailable") or 0)
            append_condition(status, inputs.now)
            plan.init_status = wire(status)
        for name in job_plugins:
            key = f"plugin-{name}"
            if name == plugins.SVC and controlled.get(key) != name:
                plan.configmap = plugins.build_configmap(job)
                plan.service = plugins.build_service(job)
            controlled[key] = name
    elif plugins.SVC in job_plugins:
        plan.configmap = plugins.build_configmap(job)
    status["controlledResources"] = controlled
    if podgroup is None:
        plan.create_podgroup = build.build_podgroup(job, inputs.priorities)
    else:
        plan.update_podgroup = build.updated_podgroup(podgroup, job, inputs.priorities)
    pg_phase = str(((podgroup or {}).get("status") or {}).get("phase") or "")
    plan.sync_task = podgroup is not None and pg_phase not in ADMITTED_IF_NOT
    plan.base_status = status
    if not plan.sync_task:
        return plan
    by_name = {build.name_of(pod): pod for pod in pods}
    job_name = build.name_of(job)
    for task in build.tasks(job):
        for index in range(int(task.get("replicas") or 0)):
            name = build.pod_name(job_name, str(task.get("name")), index)
            pod = by_name.pop(name, None)
            if pod is None:
                new_pod = build.build_pod(job, task, index)
                plugins.on_pod_create(new_pod, job)
                plan.create_pods.append(new_pod)
                continue
            if deleting(pod):
                plan.counts.values["terminating"] += 1
                continue
            if build.OUT_OF_SYNC_KEY in ((pod.get("metadata") or {}).get("annotations") or {}):
                plan.delete_pods.append(name)
            plan.counts.add(pod)
    # A task's pods beyond its replicas go (the task shrank), terminating or not.
    names = {str(task.get("name")) for task in build.tasks(job)}
    plan.delete_pods += sorted(
        name
        for name, pod in by_name.items()
        if ((pod.get("metadata") or {}).get("annotations") or {}).get(build.TASK_SPEC_KEY) in names
    )
    return plan


def sync_status(
    job: JsonDict,
    plan: SyncPlan,
    update: UpdateStatus | None,
    *,
    now: dt.datetime,
    created: list[JsonDict],
    deleted: int,
) -> JsonDict | None:
    """The status after a sync's writes (``created``: the pods the API answered), or None
    when it did not change (``controlledResources`` aside)."""
    base = plan.base_status
    if not plan.sync_task:
        status = copy.deepcopy(base)
        if update is not None:
            update(status)
    else:
        counts = copy.deepcopy(plan.counts)
        for pod in created:
            counts.add(pod)
        counts.values["terminating"] += deleted
        status = {
            **copy.deepcopy(base),
            **counts.values,
            "minAvailable": int((job.get("spec") or {}).get("minAvailable") or 0),
            "taskStatusCount": {task: {"phase": dict(phases)} for task, phases in counts.tasks.items()},
        }
        if update is not None:
            update(status)
    if _comparable(status) == _comparable(base):
        return None
    append_condition(status, now)
    return wire(status)


def _comparable(status: JsonDict) -> JsonDict:
    return {k: v for k, v in wire(status).items() if k != "controlledResources"}


def plan_kill(
    job: JsonDict, pods: list[JsonDict], retain: frozenset[str], target: tuple[str, str] | None = None
) -> KillPlan:
    """``killPods``' writes. ``target``: ``(task, "")`` or ``(task, pod)`` for a targeted kill."""
    plan = KillPlan()
    if deleting(job):
        plan.skip = True
        return plan
    status = copy.deepcopy(job.get("status") or {})
    spec = job.get("spec") or {}
    if target is not None:
        task, pod_name = target
        for pod in pods:
            meta = pod.get("metadata") or {}
            if (meta.get("annotations") or {}).get(build.TASK_SPEC_KEY) != task:
                continue
            if pod_name and meta.get("name") != pod_name:
                continue
            if deleting(pod):
                plan.counts.values["terminating"] += 1
            else:
                plan.kill_pods.append(str(meta.get("name")))
    else:
        status["version"] = int(status.get("version") or 0) + 1
        last_retry = int(status.get("retryCount") or 0) >= int(spec.get("maxRetry") or 0) - 1
        kept = frozenset({"Succeeded", "Failed"}) if last_retry else retain
        for pod in pods:
            if deleting(pod):
                plan.counts.values["terminating"] += 1
            elif str((pod.get("status") or {}).get("phase") or "") not in kept:
                plan.kill_pods.append(build.name_of(pod))
        plan.delete_podgroup = True
    controlled = _controlled(status)
    for name in plugins.plugins_of(job):
        key = f"plugin-{name}"
        if controlled.get(key) == name:
            if name == plugins.SVC:
                plan.delete_configmap = plan.delete_service = True
            controlled.pop(key)
    status["controlledResources"] = controlled
    plan.base_status = status
    return plan


def kill_status(
    job: JsonDict,
    plan: KillPlan,
    update: UpdateStatus | None,
    *,
    now: dt.datetime,
    killed: int,
    undeleted: list[JsonDict],
) -> JsonDict:
    """The status a kill writes (always): ``killed`` pods now terminating, ``undeleted`` counted."""
    counts = copy.deepcopy(plan.counts)
    counts.values["terminating"] += killed
    for pod in undeleted:
        counts.add(pod)
    status = {
        **copy.deepcopy(plan.base_status),
        **counts.values,
        "taskStatusCount": {task: {"phase": dict(phases)} for task, phases in counts.tasks.items()},
    }
    if update is not None and update(status):
        append_condition(status, now)
    changed = parse_time((status.get("state") or {}).get("lastTransitionTime"))
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    if changed is not None and created is not None:
        status["runningDuration"] = go_duration(max((changed - created).total_seconds(), 0.0))
    return wire(status)


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` for whole seconds (``1h2m3s``, ``45s``, ``0s``)."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def ttl_expiry(job: JsonDict) -> dt.datetime | None:
    """When the garbage collector deletes a finished job (``garbagecollector.go`` lines 243-309):
    ``state.lastTransitionTime`` + ``ttlSecondsAfterFinished`` for Completed, Failed and
    Terminated jobs not being deleted (Aborted is not finished there)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    status = job.get("status") or {}
    if not isinstance(ttl, int) or deleting(job) or phase_of(status) not in FINISHED:
        return None
    finished = parse_time((status.get("state") or {}).get("lastTransitionTime"))
    return None if finished is None else finished + dt.timedelta(seconds=ttl)


__all__ = ["Counts", "Inputs", "KillPlan", "SyncPlan", "kill_status", "plan_kill", "plan_sync", "rfc3339"]
