"""One Volcano scheduling session as a pure function: cluster snapshot in, decisions out.

Mirrors the default ``enqueue, allocate`` actions with the gang, overcommit, proportion and
priority plugins (``docs/architecture.md#volcano-session``), one after the other:

- **enqueue** (here, with `gate.EnqueueGate`): a ``Pending`` PodGroup becomes ``Inqueue`` when it
  has no ``minResources``, or when both the overcommit check (cluster x factor - used must cover
  what admitted groups still need plus this one) and the proportion check (the queue is Open and
  its capability — or the whole cluster — covers its allocation, its admitted groups and this
  one) pass. Rejected groups are skipped; later ones may still enqueue.
- **allocate** (`allocate`): pending pods of admitted groups are placed first-fit on a scratch
  copy of the nodes; the placement is committed (pods bound) only if the gang then has
  ``minMember`` pods placed — all or nothing. With ``preempt`` or ``reclaim`` configured, a
  pipelining allocate and those actions run instead (`disrupt`).
- **session close** (`close`, `queue_status`): phases are computed from the state the session
  *started* with, so a group's pods are bound one session before its phase says ``Running`` (as
  on a real cluster); conditions ``Unschedulable``/``Scheduled`` carry the real message format.
- **events** (what ``kubectl describe`` shows, ``docs/architecture.md#volcano-messages``): the
  PodGroup gets Normal ``Unschedulable`` for each enqueue rejection here; the close states the
  others. The Normal ``Scheduled`` "Successfully assigned" event of a bound pod is the binder's
  (`scheduler.py`).
"""

from __future__ import annotations

from gang_sim.controllers.volcano.allocate import allocate
from gang_sim.controllers.volcano.close import close_all
from gang_sim.controllers.volcano.disrupt import Disruption, run_disruptive
from gang_sim.controllers.volcano.gate import EnqueueGate
from gang_sim.controllers.volcano.model import (
    ADMITTED_PHASES,
    GROUP_ANNOTATION,
    SCHEDULER_NAME,
    Group,
    GroupEvent,
    Key,
    PodEvent,
    SessionConfig,
    SessionMemo,
    SessionResult,
    Snapshot,
    gather_groups,
)
from gang_sim.controllers.volcano.queue_status import queue_statuses

__all__ = [
    "GROUP_ANNOTATION",
    "SCHEDULER_NAME",
    "GroupEvent",
    "PodEvent",
    "SessionConfig",
    "SessionMemo",
    "SessionResult",
    "Snapshot",
    "run_session",
]


DEFAULT_CONFIG = SessionConfig()


def run_session(
    snapshot: Snapshot, config: SessionConfig = DEFAULT_CONFIG, memo: SessionMemo | None = None
) -> SessionResult:
    """Decide one session: which groups enqueue, which pods bind, and every group's new status.

    With a `memo` (kept from one session to the next), gangs decided as last time reuse that
    outcome and are listed in ``unchanged``.
    """
    result = SessionResult()
    groups = gather_groups(snapshot, config, memo)
    gate = EnqueueGate(snapshot, groups, config)
    enqueued: set[Key] = set()
    placeable: list[Group] = []  # past the gate, in order: the gangs the allocate action tries
    told: dict[Key, tuple[Group, tuple[str, ...]]] = memo.rejections if memo is not None else {}
    for group in groups:
        if group.incomplete:
            continue
        if group.phase != "Pending":
            # A Completed gang is past the gate too (its Succeeded pods count as ready), but it
            # is not in ADMITTED_PHASES, which also decides what the enqueue gate keeps reserved.
            if group.phase in ADMITTED_PHASES or group.phase == "Completed":
                placeable.append(group)
            continue
        reasons = gate.admit(group)
        if not reasons:
            enqueued.add(group.key)
            placeable.append(group)
            continue
        # Which rejections apply moves with the queue's running totals: they are decided every
        # session, and stated again unless this very gang was told exactly these last session
        # (the recorder would drop the repeats).
        previous = told.get(group.key)
        if previous is not None and previous[0] is group and previous[1] == reasons:
            continue
        if memo is not None:
            told[group.key] = (group, reasons)
        for reason in reasons:
            result.events.append(GroupEvent(group.key, "Normal", "Unschedulable", reason))

    disruption: Disruption | None = None
    if config.scheduler.disrupts:  # preempt or reclaim configured (`disrupt`)
        allocated, disruption = run_disruptive(
            snapshot,
            groups=groups,
            placeable=placeable,
            enqueued=enqueued,
            conf=config.scheduler,
            result=result,
        )
        ready_groups, fit, could_go = allocated.ready_groups, allocated.fit, allocated.could_go
    else:
        ready_groups, fit, could_go = allocate(snapshot, placeable, result)
    tally = close_all(
        groups,
        result,
        enqueued=enqueued,
        ready_groups=ready_groups,
        fit=fit,
        could_go=could_go,
        memo=memo,
        disruption=disruption,
    )
    result.queue_status = queue_statuses(snapshot, tally)
    return result
