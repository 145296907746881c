"""The training-operator's decisions for one PyTorchJob, as a pure function of what it sees.

`plan_job` takes the job, the pods, services and PodGroup it controls, the time and the
restarts already made, and returns a `JobPlan`: what to create, delete and write. It follows
``ReconcileJobs`` of training-operator v1.9 (``pkg/controller.v1/common/job.go``) step by step:

1. a finished job (Succeeded/Failed) only cleans up: pods and services per ``cleanPodPolicy``,
   the PodGroup, and the job itself once ``ttlSecondsAfterFinished`` has passed;
2. a suspended job loses its pods, services and PodGroup and gets ``Suspended``; resuming
   resets ``startTime``;
3. the backoff limit, then ``activeDeadlineSeconds``, fail the job and delete its pods;
4. with a gang scheduler the PodGroup is synced first — created if missing, and otherwise
   written with the spec the operator computes on *every* round (``SyncPodGroup`` decides
   whether to update by diffing a pointer against an object, which always differs), so a
   stale read loses a conflict — and nothing else happens until Volcano has moved it past
   ``Pending``. A delayed round (no group yet, still ``Pending``, or a failed sync) only stamps
   ``lastReconcileTime``;
5. missing pods and services are created; Failed pods that may retry (OnFailure, Always,
   ExitCode 128-255) are deleted so the next round recreates them; conditions and
   ``replicaStatuses`` follow the pods.

``backoffLimit`` counts restarts as the real operator does — the ``restartCount`` of the
containers of Running pods (the kubelet restarts OnFailure/Always containers in place), the job
fails once the sum reaches the limit, and with a limit of 0 on the first failure — plus the
pods this operator deleted to recreate them (``PlanInputs.restarts``), which the real one only
notices through its work-queue retries. One other deliberate difference: a job failing on
backoff or deadline loses its pods whatever ``cleanPodPolicy`` says (so nothing keeps holding
GPUs).
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers.clock import rfc3339
from gang_sim.controllers.training_operator.pytorchjob_resources import (
    build_pod,
    build_podgroup,
    build_service,
    pod_name,
    podgroup_spec,
    replica_selector,
    replica_specs,
)
from gang_sim.controllers.training_operator.pytorchjob_status import (
    ConditionType,
    Reason,
    backoff_message,
    count_pod,
    created_message,
    deadline_message,
    find_condition,
    has_condition,
    is_finished,
    parse_time,
    replica_status,
    resumed_message,
    set_condition,
    suspended_message,
    update_conditions,
)
from gang_sim.controllers.training_operator.replica_pods import (
    deleting,
    is_retryable,
    name_of,
    phase,
    restart_count,
    slots_of,
)

JsonDict = dict[str, Any]
UNADMITTED_PHASES = ("", "Pending")
COUNTED_POLICIES = ("OnFailure", "Always", "ExitCode")


@dataclass(frozen=True)
class PlanInputs:
    """Everything besides the job's own objects that a decision depends on."""

    now: dt.datetime
    gang_scheduler: str | None = None
    restarts: int = 0  # failed pods this controller already deleted to recreate them
    priorities: dict[str, int] = field(default_factory=dict)  # PriorityClass name -> value


@dataclass
class JobPlan:
    create_pods: list[JsonDict] = field(default_factory=list)  # in replica order: Master, Worker 0..n
    create_services: list[JsonDict] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    restart_pods: list[str] = field(default_factory=list)  # deleted so that they are recreated
    delete_services: list[str] = field(default_factory=list)
    create_podgroup: JsonDict | None = None
    update_podgroup: JsonDict | None = None  # the existing group with the desired spec, every round
    # What the round writes instead when the PodGroup sync fails (refused create, lost conflict):
    # no pods, only lastReconcileTime. None when the round syncs no PodGroup.
    delayed_status: JsonDict | None = None
    delete_podgroup: bool = False
    delete_job: bool = False
    status: JsonDict | None = None  # the new status, only when it differs
    wake_at: dt.datetime | None = None  # a deadline or TTL to look at again without events


@dataclass
class _Round:
    """One job's round: its objects, the status being edited, and the plan being filled."""

    job: JsonDict
    status: JsonDict
    pods: list[JsonDict]
    services: list[JsonDict]
    podgroup: JsonDict | None
    inputs: PlanInputs
    plan: JobPlan = field(default_factory=JobPlan)

    @property
    def name(self) -> str:
        return name_of(self.job)

    @property
    def run_policy(self) -> JsonDict:
        return dict((self.job.get("spec") or {}).get("runPolicy") or {})

    @property
    def now(self) -> dt.datetime:
        return self.inputs.now

    def condition(self, ctype: ConditionType, truth: bool, reason: Reason, message: str) -> None:
        set_condition(self.status, ctype, truth, reason, message, now=self.now)

    def delete_everything(self) -> None:
        """Pods, their services and (with the gang flag) the PodGroup."""
        self.plan.delete_pods += [name_of(pod) for pod in self.pods if not deleting(pod)]
        self.plan.delete_services += [name_of(svc) for svc in self.services if not deleting(svc)]
        self.drop_podgroup()

    def drop_podgroup(self) -> None:
        # Without the gang flag a PodGroup is the provider's, never the operator's to remove.
        podgroup = self.podgroup
        gang = self.inputs.gang_scheduler is not None
        self.plan.delete_podgroup = gang and podgroup is not None and not deleting(podgroup)


def plan_job(
    job: JsonDict,
    pods: list[JsonDict],
    services: list[JsonDict],
    podgroup: JsonDict | None,
    inputs: PlanInputs,
) -> JobPlan:
    """Decide one round for ``job``; ``pods``/``services`` are those it controls (by owner UID)."""
    old_status = job.get("status") or {}
    r = _Round(job, copy.deepcopy(old_status), pods, services, podgroup, inputs)
    if find_condition(r.status, ConditionType.CREATED) is None:
        r.condition(ConditionType.CREATED, True, Reason.CREATED, created_message(r.name))
    if is_finished(r.status):
        _finish(r)
    elif r.run_policy.get("suspend"):
        _suspend(r)
    else:
        if has_condition(r.status, ConditionType.SUSPENDED):
            r.condition(ConditionType.SUSPENDED, False, Reason.RESUMED, resumed_message(r.name))
            r.status["startTime"] = rfc3339(r.now)
        if not _fail_on_limits(r) and _admitted(r):
            _sync_replicas(r)
    r.plan.status = r.status if r.status != old_status else None
    return r.plan


def _finish(r: _Round) -> None:
    policy = r.run_policy.get("cleanPodPolicy") or "None"
    if policy == "All":
        r.plan.delete_pods += [name_of(pod) for pod in r.pods if not deleting(pod)]
        r.plan.delete_services += [name_of(svc) for svc in r.services if not deleting(svc)]
    elif policy == "Running":
        doomed = {name_of(p) for p in r.pods if phase(p) in ("Running", "Pending") and not deleting(p)}
        r.plan.delete_pods += sorted(doomed)
        r.plan.delete_services += sorted(
            name_of(svc) for svc in r.services if name_of(svc) in doomed and not deleting(svc)
        )
    r.drop_podgroup()
    if has_condition(r.status, ConditionType.SUCCEEDED):
        # The pods may be gone now: whatever was still active counts as succeeded.
        for entry in (r.status.get("replicaStatuses") or {}).values():
            if entry.get("active"):
                entry["succeeded"] = int(entry.get("succeeded") or 0) + int(entry.pop("active"))
    ttl = r.run_policy.get("ttlSecondsAfterFinished")
    completed = parse_time(r.status.get("completionTime"))
    if isinstance(ttl, int) and completed is not None:
        expiry = completed + dt.timedelta(seconds=ttl)
        if r.now >= expiry:
            r.plan.delete_job = True
        else:
            r.plan.wake_at = expiry


def _suspend(r: _Round) -> None:
    r.delete_everything()
    for entry in (r.status.get("replicaStatuses") or {}).values():
        entry.pop("active", None)
    message = suspended_message(r.name)
    if has_condition(r.status, ConditionType.RUNNING):
        r.condition(ConditionType.RUNNING, False, Reason.SUSPENDED, message)
    if not has_condition(r.status, ConditionType.SUSPENDED):
        r.condition(ConditionType.SUSPENDED, True, Reason.SUSPENDED, message)


def _current_pods(r: _Round) -> dict[str, list[JsonDict]]:
    """Per replica type, the pods alone in a valid slot: the ones the decisions look at."""
    current: dict[str, list[JsonDict]] = {}
    for rtype, spec in replica_specs(r.job).items():
        slots = slots_of(r.pods, rtype)
        current[rtype] = [
            group[0] for index, group in slots.items() if index < spec["replicas"] and len(group) == 1
        ]
    return current


def _retryable_failures(r: _Round) -> set[str]:
    specs = replica_specs(r.job)
    return {
        name_of(pod)
        for rtype, pods in _current_pods(r).items()
        for pod in pods
        if phase(pod) == "Failed" and not deleting(pod) and is_retryable(specs[rtype]["restartPolicy"], pod)
    }


def _backoff_exceeded(r: _Round) -> bool:
    limit = r.run_policy.get("backoffLimit")
    if not isinstance(limit, int):
        return False
    specs = replica_specs(r.job)
    in_place = sum(
        restart_count(pod)
        for rtype, pods in _current_pods(r).items()
        if specs[rtype]["restartPolicy"] in COUNTED_POLICIES
        for pod in pods
        if phase(pod) == "Running"
    )
    restarts = r.inputs.restarts + in_place
    if limit == 0:  # the operator's "new failure with no retries left" check
        return restarts > 0 or bool(_retryable_failures(r))
    return restarts >= limit


def _fail_on_limits(r: _Round) -> bool:
    """Backoff limit, then active deadline; either fails the job and deletes what it has."""
    seconds = r.run_policy.get("activeDeadlineSeconds")
    started = parse_time(r.status.get("startTime"))
    deadline = started + dt.timedelta(seconds=seconds) if isinstance(seconds, int) and started else None
    if _backoff_exceeded(r):
        failure = backoff_message(r.name)
    elif deadline is not None and r.now >= deadline:
        failure = deadline_message(r.name)
    else:
        r.plan.wake_at = deadline
        return False
    r.status.setdefault("completionTime", rfc3339(r.now))
    r.condition(ConditionType.FAILED, True, Reason.FAILED, failure)
    r.delete_everything()
    return True


def _admitted(r: _Round) -> bool:
    """Sync the PodGroup (gang flag only); pods may exist once Volcano moved it past Pending."""
    if r.inputs.gang_scheduler is None:
        return True
    existing_queue = ((r.podgroup or {}).get("spec") or {}).get("queue")
    desired = podgroup_spec(r.job, r.inputs.priorities, existing_queue)
    if r.podgroup is None:
        r.plan.create_podgroup = build_podgroup(r.job, desired)
        _delay(r.status, r.now)
        r.plan.delayed_status = r.status
        return False
    # The whole spec is replaced: fields the operator does not compute (minTaskMember,
    # networkTopology...) are dropped, as the real fill function assigns a new PodGroupSpec.
    r.plan.update_podgroup = {**copy.deepcopy(r.podgroup), "spec": desired}
    podgroup_phase = str((r.podgroup.get("status") or {}).get("phase") or "")
    if podgroup_phase in UNADMITTED_PHASES:  # DelayPodCreationDueToPodGroup
        _delay(r.status, r.now)
        r.plan.delayed_status = r.status
        return False
    r.plan.delayed_status = copy.deepcopy(r.status)
    _delay(r.plan.delayed_status, r.now)
    return True


def _delay(status: JsonDict, now: dt.datetime) -> None:
    """A round that creates no pods because of the PodGroup: the real one stamps the time."""
    status["lastReconcileTime"] = rfc3339(now)


def _sync_replicas(r: _Round) -> None:
    """Create missing pods and services, restart retryable failures, count, set conditions."""
    specs = replica_specs(r.job)
    retry_now = _retryable_failures(r)
    service_names = {name_of(service) for service in r.services}
    counts: dict[str, dict[str, int]] = {}
    permanent: dict[str, int] = {}
    for rtype, spec in specs.items():
        counts[rtype] = {"active": 0, "succeeded": 0, "failed": 0}
        permanent[rtype] = 0
        slots = slots_of(r.pods, rtype)
        for index in range(spec["replicas"]):
            group = slots.get(index) or []
            if not group:
                pod = build_pod(r.job, rtype, index, gang_scheduler=r.inputs.gang_scheduler)
                r.plan.create_pods.append(pod)
            elif len(group) == 1:  # two pods in one slot: leave both alone, as the operator does
                pod = group[0]
                if name_of(pod) in retry_now:
                    r.plan.restart_pods.append(name_of(pod))
                elif phase(pod) == "Failed" and not deleting(pod) and spec["restartPolicy"] == "ExitCode":
                    permanent[rtype] += 1
                count_pod(counts[rtype], pod)
            if pod_name(r.name, rtype, index) not in service_names:
                r.plan.create_services.append(build_service(r.job, rtype, index))
        # Pods beyond the replica count (the spec shrank) go, as the operator kills them.
        r.plan.delete_pods += sorted(
            name_of(pod)
            for index, group in slots.items()
            if index >= spec["replicas"]
            for pod in group
            if not deleting(pod)
        )
    r.status["replicaStatuses"] = {
        rtype: replica_status(counts[rtype], replica_selector(r.name, rtype)) for rtype in specs
    }
    update_conditions(r.status, r.job, specs, counts=counts, permanent=permanent, now=r.now)
