"""A gang's PodGroup while some of its pods terminate, in any configuration (the default too)."""

from __future__ import annotations

from gang_sim.controllers.volcano.session import Snapshot, run_session
from tests.sim.volcano_disruption.snapshots import node, podgroup, queue, running

ON_ALL = ["node-1", "node-1", "node-2", "node-2"]


def close_with_terminating(min_member: int, terminating: int) -> dict[str, object]:
    group = podgroup("b", min_member, phase="Running")
    members = running("b", 4, ON_ALL)
    for pod in members[:terminating]:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:02:00Z"
    snapshot = Snapshot(
        nodes=[node("node-1"), node("node-2")],
        pods=members,
        podgroups=[group],
        queues=[queue("default")],
    )
    status: dict[str, object] = run_session(snapshot).podgroup_status[("ml", "b")]
    return status


def test_terminating_pods_are_releasing_neither_running_nor_scheduled() -> None:
    """api/helpers.go:41-64@v1.16.0-alpha.1 (a Running or Pending pod with deletionTimestamp is
    Releasing), framework/session.go:581-632@v1.16.0-alpha.1 (Running pods and this session's
    Unschedulable: Unknown; scheduled >= minMember: Running; Releasing is not scheduled,
    api/helpers.go:100-107) and gang.go:229-297@v1.16.0-alpha.1 (ready counts no Releasing pod)."""
    full = close_with_terminating(min_member=4, terminating=2)
    assert full["phase"] == "Unknown"
    assert full["running"] == 2
    conditions = full["conditions"]
    assert isinstance(conditions, list)
    assert conditions[-1]["message"] == (
        "2/4 tasks in gang unschedulable: pod group is not ready, 2 Releasing, 2 Running, 4 minAvailable"
    )
    elastic = close_with_terminating(min_member=2, terminating=2)
    assert elastic["phase"] == "Running"
    assert elastic["running"] == 2
    gone = close_with_terminating(min_member=2, terminating=4)
    assert gone["phase"] == "Pending"
    assert gone["running"] == 0
